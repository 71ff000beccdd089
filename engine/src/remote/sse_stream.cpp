// Server-sent events and OpenAI completion chunks, byte by byte: nothing here assumes that a
// network read ends at a line, an event or even a UTF-8 character.
#include "sse_stream.h"

#include <nlohmann/json.hpp>

#include <cctype>

namespace iwb::remote {
namespace {

using json = nlohmann::json;

constexpr size_t kHeadBytes = 64 * 1024;  // kept for a non-stream body or a diagnostic

std::string shortened(std::string_view text, size_t max_chars = 200) {
  size_t begin = 0, end = text.size();
  while (begin < end && std::isspace(static_cast<unsigned char>(text[begin]))) ++begin;
  while (end > begin && std::isspace(static_cast<unsigned char>(text[end - 1]))) --end;
  std::string out(text.substr(begin, end - begin));
  if (out.size() > max_chars) out = out.substr(0, max_chars) + "...";
  return out;
}

const std::string* string_at(const json& object, const char* key) {
  if (!object.is_object()) return nullptr;
  auto it = object.find(key);
  return it != object.end() && it->is_string() ? it->get_ptr<const std::string*>() : nullptr;
}

std::optional<double> number_at(const json& object, const char* key) {
  if (!object.is_object()) return std::nullopt;
  auto it = object.find(key);
  if (it == object.end() || !it->is_number()) return std::nullopt;
  return it->get<double>();
}

}  // namespace

bool SseParser::feed(std::string_view bytes) {
  m_num_bytes_seen += bytes.size();
  for (const char c : bytes) {
    if (c == '\n' && m_last_was_cr) {  // the second half of a \r\n, perhaps split across feeds
      m_last_was_cr = false;
      continue;
    }
    m_last_was_cr = c == '\r';
    if (c == '\r' || c == '\n') {
      const bool keep_going = take_line(m_line);
      m_line.clear();
      if (!keep_going) return false;
    } else {
      m_line.push_back(c);
    }
  }
  return true;
}

bool SseParser::finish() {
  if (!m_line.empty()) {
    if (!take_line(m_line)) return false;
    m_line.clear();
  }
  return dispatch();
}

bool SseParser::take_line(std::string_view line) {
  if (line.empty()) return dispatch();
  if (line.front() == ':') return true;  // a comment (keep-alive pings)
  const size_t colon = line.find(':');
  const std::string_view field = line.substr(0, colon);
  std::string_view value = colon == std::string_view::npos ? std::string_view{} : line.substr(colon + 1);
  if (!value.empty() && value.front() == ' ') value.remove_prefix(1);
  if (field != "data") return true;  // event, id, retry: nothing an OpenAI stream needs
  if (m_has_data) m_data.push_back('\n');
  m_data.append(value);
  m_has_data = true;
  return true;
}

bool SseParser::dispatch() {
  if (!m_has_data) return true;
  std::string data = std::move(m_data);
  m_data.clear();
  m_has_data = false;
  ++m_num_events;
  return m_on_event(data);
}

CompletionStreamDecoder::CompletionStreamDecoder(StreamedCompletion* out, ContentHandler on_content)
    : m_out(out),
      m_on_content(std::move(on_content)),
      m_parser([this](const std::string& data) { return on_event(data); }) {}

bool CompletionStreamDecoder::feed(std::string_view bytes, double seconds) {
  if (has_failed()) return false;
  m_now = seconds;
  // Kept only until the first event: a real event stream needs no copy.
  if (m_parser.num_events() == 0 && m_head.size() < kHeadBytes) {
    m_head.append(bytes.substr(0, kHeadBytes - m_head.size()));
  }
  return m_parser.feed(bytes) && !has_failed();
}

void CompletionStreamDecoder::finish(double seconds) {
  if (has_failed()) return;
  m_now = seconds;
  if (!m_parser.finish() || has_failed()) return;
  if (m_is_done || !m_out->finish_reason.empty()) return;
  if (m_parser.num_events() == 0 && m_parser.num_bytes_seen() > 0) {
    // Not an event stream; a server that ignored "stream": true still answers a completion.
    const json body = json::parse(m_head, nullptr, false);
    if (body.is_object() && (body.contains("choices") || body.contains("error"))) {
      on_event(m_head);
      if (has_failed() || !m_out->finish_reason.empty()) return;
    } else {
      fail(RemoteErrorKind::Malformed, "the server did not answer with an event stream: " + shortened(m_head));
      return;
    }
  }
  if (m_parser.num_events() == 0 && m_parser.num_bytes_seen() == 0) {
    fail(RemoteErrorKind::Dropped, "the server closed the stream without sending anything");
  } else {
    fail(RemoteErrorKind::Dropped, "the stream ended before [DONE] or a finish_reason, after " +
                                       std::to_string(m_out->token_seconds.size()) + " content chunks");
  }
}

void CompletionStreamDecoder::fail(RemoteErrorKind kind, std::string message) {
  if (has_failed()) return;
  m_out->error.kind = kind;
  m_out->error.message = std::move(message);
}

bool CompletionStreamDecoder::on_event(const std::string& data) {
  if (m_is_done || has_failed()) return !has_failed();
  if (shortened(data) == "[DONE]") {
    m_is_done = true;
    return true;
  }
  const json chunk = json::parse(data, nullptr, false);
  if (chunk.is_discarded() || !chunk.is_object()) {
    fail(RemoteErrorKind::Malformed, "a stream chunk is not a JSON object: " + shortened(data));
    return false;
  }
  if (auto it = chunk.find("error"); it != chunk.end() && !it->is_null()) {
    std::string message = it->is_string() ? it->get<std::string>() : shortened(it->dump());
    if (const std::string* m = string_at(*it, "message")) message = *m;
    fail(RemoteErrorKind::HttpError, "the server reported an error in the stream: " + message);
    return false;
  }
  if (auto it = chunk.find("choices"); it != chunk.end() && !it->is_null()) {
    if (!it->is_array()) {
      fail(RemoteErrorKind::Malformed, "a stream chunk's \"choices\" is not a list: " + shortened(data));
      return false;
    }
    for (const json& choice : *it) {
      // Chat streams carry delta.content (reasoning models also delta.reasoning_content, which
      // counts as generated output for timing, as vLLM's benchmark counts it); text
      // completions carry "text"; a non-streamed answer carries message.content.
      std::string_view content, reasoning;
      if (auto d = choice.find("delta"); choice.is_object() && d != choice.end()) {
        if (const std::string* s = string_at(*d, "content")) content = *s;
        if (const std::string* s = string_at(*d, "reasoning_content")) reasoning = *s;
      } else if (const std::string* s = string_at(choice, "text")) {
        content = *s;
      } else if (auto m = choice.find("message"); choice.is_object() && m != choice.end()) {
        if (const std::string* s = string_at(*m, "content")) content = *s;
      }
      if (!content.empty() || !reasoning.empty()) {
        if (!m_out->ttft_seconds) m_out->ttft_seconds = m_now;
        m_out->token_seconds.push_back(m_now);
        m_out->text.append(content);
        // The chat shows reasoning_content as a local model's <think> block.
        std::string handed;
        if (!reasoning.empty()) {
          if (!m_is_in_reasoning) handed = "<think>";
          m_is_in_reasoning = true;
          handed += reasoning;
        }
        if (!content.empty()) {
          if (m_is_in_reasoning) handed += "</think>";
          m_is_in_reasoning = false;
          handed += content;
        }
        if (m_on_content && !m_on_content(handed, m_now)) {
          fail(RemoteErrorKind::Cancelled, "cancelled");
          return false;
        }
      }
      if (const std::string* reason = string_at(choice, "finish_reason")) m_out->finish_reason = *reason;
    }
  }
  if (auto it = chunk.find("usage"); it != chunk.end() && it->is_object()) {
    if (auto n = number_at(*it, "prompt_tokens")) m_out->prompt_tokens = static_cast<int64_t>(*n);
    if (auto n = number_at(*it, "completion_tokens")) m_out->completion_tokens = static_cast<int64_t>(*n);
  }
  if (auto it = chunk.find("timings"); it != chunk.end() && it->is_object()) {
    ServerTimings t;
    t.prompt_n = static_cast<int64_t>(number_at(*it, "prompt_n").value_or(0));
    t.prompt_ms = number_at(*it, "prompt_ms").value_or(0);
    t.predicted_n = static_cast<int64_t>(number_at(*it, "predicted_n").value_or(0));
    t.predicted_ms = number_at(*it, "predicted_ms").value_or(0);
    t.cache_n = static_cast<int64_t>(number_at(*it, "cache_n").value_or(0));
    m_out->server_timings = t;  // the last one wins: the usage chunk's covers every choice
  }
  return true;
}

std::string server_error_message(std::string_view body) {
  const json value = json::parse(body, nullptr, false);
  if (value.is_object()) {
    if (auto it = value.find("error"); it != value.end()) {
      if (it->is_string()) return it->get<std::string>();
      if (const std::string* m = string_at(*it, "message")) return *m;
    }
    if (const std::string* m = string_at(value, "message")) return *m;
    if (const std::string* m = string_at(value, "detail")) return *m;  // FastAPI's shape
  }
  const std::string text = shortened(body, 300);
  return text.empty() ? "(no message: empty body)" : text;
}

}  // namespace iwb::remote
