// Gemma 4's tool calls (ToolCallFormat::Gemma4): <|tool_call>call:NAME{key:value,...}<tool_call|>,
// values written as the template writes them (strings between <|"|>, keys bare, numbers, true,
// false, null, nested {...} and [...]), read into OpenAI's calls with JSON arguments as they
// grow, and the grammar that holds a call to that syntax (as llama.cpp's does: not to each
// tool's schema).
#include "chat/gemma4_template.h"
#include "chat/tool_call_text.h"
#include "iwb/engine/chat/tool_calls.h"
#include "tokenizer/utf8.h"

#include <nlohmann/json.hpp>

namespace iwb::detail {
namespace {

constexpr std::string_view kCallPrefix = "call:";
// Deeper values are no call's (the reader recurses).
constexpr int kMaxDepth = 64;

// A JSON string's text between its quotes (escaped as nlohmann writes it, bytes as they are).
void append_json_text(std::string_view text, std::string* out) {
  for (const char c : text) {
    switch (c) {
      case '"': *out += "\\\""; break;
      case '\\': *out += "\\\\"; break;
      case '\n': *out += "\\n"; break;
      case '\r': *out += "\\r"; break;
      case '\t': *out += "\\t"; break;
      case '\b': *out += "\\b"; break;
      case '\f': *out += "\\f"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char hex[8];
          std::snprintf(hex, sizeof hex, "\\u%04x", static_cast<unsigned char>(c));
          *out += hex;
        } else {
          *out += c;
        }
    }
  }
}

// Reads one value of the call's syntax as JSON into `out`, as far as it is written. Each byte
// appended is final (a streamed call's arguments only grow): a string's text as it comes (without
// a quote marker or a character still being written), a number or literal once it ends.
class ArgumentReader {
 public:
  enum class Status : uint8_t { Done, Incomplete, Invalid };
  ArgumentReader(std::string_view text, bool is_streaming) : m_text(text), m_is_streaming(is_streaming) {}

  Status value(size_t* i, std::string* out, int depth) {
    if (depth > kMaxDepth) return Status::Invalid;
    skip_space(i);
    const std::string_view rest = m_text.substr(*i);
    if (rest.empty()) return Status::Incomplete;
    if (rest.starts_with(kGemma4Quote)) return string(i, out);
    if (kGemma4Quote.starts_with(rest)) return Status::Incomplete;  // a quote marker being written
    if (rest.front() == '{') return object(i, out, depth);
    if (rest.front() == '[') return array(i, out, depth);
    return scalar(i, out);
  }

  void skip_space(size_t* i) const {
    while (*i < m_text.size() && kWhitespace.find(m_text[*i]) != std::string_view::npos) ++*i;
  }

 private:
  Status string(size_t* i, std::string* out) {
    const size_t begin = *i + kGemma4Quote.size();
    const size_t end = m_text.find(kGemma4Quote, begin);
    *out += '"';
    if (end == std::string_view::npos) {
      std::string_view text = m_text.substr(begin);
      // A call's end inside it: the string was never closed (no call), not cut off.
      if (text.find(kGemma4CallClose) != std::string_view::npos) return Status::Invalid;
      if (m_is_streaming) {
        text.remove_suffix(partial_marker(text, kGemma4Quote));
        text = text.substr(0, tokenizer::utf8::complete_prefix_length(text));
      }
      append_json_text(text, out);
      *i = m_text.size();
      return Status::Incomplete;
    }
    append_json_text(m_text.substr(begin, end - begin), out);
    *out += '"';
    *i = end + kGemma4Quote.size();
    return Status::Done;
  }

  // {key:value,...}; a key bare (or between <|"|>, as the template writes a declaration's).
  Status object(size_t* i, std::string* out, int depth) {
    *out += '{';
    ++*i;
    skip_space(i);
    if (*i < m_text.size() && m_text[*i] == '}') {
      *out += '}';
      ++*i;
      return Status::Done;
    }
    while (true) {
      skip_space(i);
      const size_t colon = m_text.find(':', *i);
      if (colon == std::string_view::npos) {
        const std::string_view partial = m_text.substr(*i);
        const bool is_quoted = partial.starts_with(kGemma4Quote) || kGemma4Quote.starts_with(partial);
        return is_quoted || partial.find_first_of("{}[],<>\"") == std::string_view::npos ? Status::Incomplete
                                                                                         : Status::Invalid;
      }
      std::string_view key = trim(m_text.substr(*i, colon - *i));
      if (key.size() >= 2 * kGemma4Quote.size() && key.starts_with(kGemma4Quote) && key.ends_with(kGemma4Quote)) {
        key = key.substr(kGemma4Quote.size(), key.size() - 2 * kGemma4Quote.size());
      }
      if (key.empty() || key.find_first_of("{}[],<>\"") != std::string_view::npos) return Status::Invalid;
      *out += '"';
      append_json_text(key, out);
      *out += "\":";
      *i = colon + 1;
      if (const Status s = value(i, out, depth + 1); s != Status::Done) return s;
      skip_space(i);
      if (*i >= m_text.size()) return Status::Incomplete;
      if (m_text[*i] == '}') {
        *out += '}';
        ++*i;
        return Status::Done;
      }
      if (m_text[*i] != ',') return Status::Invalid;
      *out += ',';
      ++*i;
    }
  }

  Status array(size_t* i, std::string* out, int depth) {
    *out += '[';
    ++*i;
    skip_space(i);
    if (*i < m_text.size() && m_text[*i] == ']') {
      *out += ']';
      ++*i;
      return Status::Done;
    }
    while (true) {
      if (const Status s = value(i, out, depth + 1); s != Status::Done) return s;
      skip_space(i);
      if (*i >= m_text.size()) return Status::Incomplete;
      if (m_text[*i] == ']') {
        *out += ']';
        ++*i;
        return Status::Done;
      }
      if (m_text[*i] != ',') return Status::Invalid;
      *out += ',';
      ++*i;
    }
  }

  // A number, true, false or null (Python's True, False and None taken too), once it ends.
  Status scalar(size_t* i, std::string* out) {
    const size_t end = m_text.find_first_of(",}] \t\r\n<", *i);
    const std::string_view token = m_text.substr(*i, end == std::string_view::npos ? end : end - *i);
    if (end == std::string_view::npos && m_is_streaming) return Status::Incomplete;  // may go on
    std::string json;
    if (token == "True" || token == "False" || token == "None") {
      json = token == "True" ? "true" : token == "False" ? "false" : "null";
    } else {
      const nlohmann::json parsed = nlohmann::json::parse(token, nullptr, /*allow_exceptions=*/false);
      if (token.empty() || parsed.is_discarded() || parsed.is_structured() || parsed.is_string()) {
        return end == std::string_view::npos ? Status::Incomplete : Status::Invalid;
      }
      json = std::string(token);
    }
    *out += json;
    *i = end == std::string_view::npos ? m_text.size() : end;
    return end == std::string_view::npos ? Status::Incomplete : Status::Done;
  }

  std::string_view m_text;
  bool m_is_streaming;
};

bool is_name_char(char c) { return std::string_view(" \t\r\n<>{}[]:,\"'").find(c) == std::string_view::npos; }

// One call read from `body` (after <|tool_call>).
CallBlock read_gemma4_call(std::string_view reply, size_t body, bool is_streaming) {
  CallBlock out;
  const std::string_view rest = reply.substr(body);
  if (!rest.starts_with(kCallPrefix)) {
    out.is_undecided = kCallPrefix.starts_with(rest);
    return out;
  }
  const size_t name_at = body + kCallPrefix.size();
  size_t brace = name_at;
  while (brace < reply.size() && is_name_char(reply[brace])) ++brace;
  if (brace == reply.size()) {
    out.is_undecided = true;  // the name still being written
    return out;
  }
  if (reply[brace] != '{' || brace == name_at) return out;  // prose, not a call
  ParsedToolCall call;
  call.name = std::string(reply.substr(name_at, brace - name_at));
  ArgumentReader reader(reply, is_streaming);
  size_t i = brace;
  const ArgumentReader::Status status = reader.value(&i, &call.arguments, 0);
  if (status == ArgumentReader::Status::Invalid) return out;
  if (status == ArgumentReader::Status::Done) {
    size_t after = i;
    reader.skip_space(&after);
    const std::string_view tail = reply.substr(after);
    if (tail.starts_with(kGemma4CallClose)) {
      out.end = after + kGemma4CallClose.size();
    } else if (!tail.empty() && !(is_streaming && kGemma4CallClose.starts_with(tail))) {
      out.end = i;  // no closing marker: what follows the arguments is text
    }
  }
  out.call = std::move(call);
  return out;
}

}  // namespace

ToolReply split_gemma4_calls(std::string_view reply, bool is_streaming) {
  ToolReply out;
  size_t pos = 0;
  while (pos <= reply.size()) {
    const size_t open = append_text_before(reply, pos, kGemma4CallOpen, is_streaming, &out.content);
    if (open == std::string_view::npos) break;
    const size_t body = open + kGemma4CallOpen.size();
    CallBlock read = read_gemma4_call(reply, body, is_streaming);
    if (read.call) {
      out.calls.push_back(std::move(*read.call));
      if (read.end == std::string_view::npos) break;  // still being written, or cut off
      pos = read.end;
      continue;
    }
    if (is_streaming && read.is_undecided) break;  // held back until it tells
    // No call: its text as written, up to its closing marker (or the reply's end).
    const size_t close = reply.find(kGemma4CallClose, body);
    if (close == std::string_view::npos) {
      std::string_view text = reply.substr(open);
      if (is_streaming) text.remove_suffix(partial_marker(text, kGemma4CallClose));
      out.content += text;
      break;
    }
    out.content += reply.substr(open, close + kGemma4CallClose.size() - open);
    pos = close + kGemma4CallClose.size();
  }
  trim_trailing_space(&out, is_streaming);
  return out;
}

namespace {

// The regex a call's arguments are held to.
std::string arguments_pattern() {
  // A string: <|"|>, then text without <|"|> up to the first one: a walk of the automaton that
  // finds the marker, where after a "<" any of "|", "|\"", "|\"|" may come back to a "<" (P<) or
  // leave with a byte that breaks the marker (L); the closing marker ends such a walk.
  const std::string back = R"((?:(?:\|(?:"\|?)?)?<)*)";
  const std::string leave = R"((?:[^<|]|\|(?:[^<"]|"(?:[^<|]|\|[^<>]))))";
  const std::string string = R"(<\|"\|>[^<]*(?:<)" + back + leave + R"([^<]*)*<)" + back + R"(\|"\|>)";
  const std::string scalar =
      "(?:" + string + R"(|-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?|true|false|null))";
  const std::string key = R"([^:{}\[\],<>"\s]+)";
  // Objects and lists nested three deep, the arguments' own included (a regex cannot count
  // further).
  std::string value = scalar;
  std::string object;
  for (int depth = 0; depth < 3; ++depth) {
    object = R"(\{(?:)" + key + ":" + value + "(?:," + key + ":" + value + R"()*)?\})";
    const std::string list = R"(\[(?:)" + value + "(?:," + value + R"()*)?\])";
    value = "(?:" + scalar + "|" + object + "|" + list + ")";
  }
  return object;
}

}  // namespace

Result<std::shared_ptr<const JsonGrammar>> gemma4_arguments_grammar() {
  static const Result<std::shared_ptr<const JsonGrammar>> grammar = JsonGrammar::from_regex(arguments_pattern());
  return grammar;
}

std::vector<JsonGrammar::Piece> gemma4_call_pieces(const std::string& name,
                                                   std::shared_ptr<const JsonGrammar> arguments) {
  return {
      {std::string(kCallPrefix) + name, nullptr}, {"", std::move(arguments)}, {std::string(kGemma4CallClose), nullptr}};
}

}  // namespace iwb::detail
