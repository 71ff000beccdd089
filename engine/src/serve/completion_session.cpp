// CompletionSession: OpenAI's chat.completion / chat.completion.chunk and text_completion
// shapes, built from the engine's token events and request ends.
#include "completion_session.h"

#include "iwb/engine/chat/reply_parts.h"
#include "iwb/engine/chat/tool_calls.h"
#include "iwb/engine/serve/serve_metrics.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <random>

namespace iwb::serve {
namespace {

using json = nlohmann::json;

std::string random_id(const char* prefix) {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  char hex[33];
  std::snprintf(hex, sizeof hex, "%016llx%016llx", static_cast<unsigned long long>(rng()),
                static_cast<unsigned long long>(rng()));
  return std::string(prefix) + hex;
}

// The id a call gets: the model's own where it wrote one (Mistral's templates show ids, so their
// models write them) that its template takes back, 9 letters and digits (Kimi K2's:
// functions.NAME:INDEX, as llama-server returns it), and no earlier call of the reply has; else a
// new one.
std::string call_id(const ParsedToolCall& call, const std::vector<std::string>& earlier, ToolCallFormat format) {
  const bool is_taken_back = (format == ToolCallFormat::KimiK2 && !call.id.empty()) ||
                             (call.id.size() == 9 && std::all_of(call.id.begin(), call.id.end(), [](char c) {
                                return std::isalnum(static_cast<unsigned char>(c));
                              }));
  if (!is_taken_back || std::find(earlier.begin(), earlier.end(), call.id) != earlier.end()) {
    return new_tool_call_id(format);
  }
  return call.id;
}

std::string sse(const json& value) { return "data: " + dump_json(value) + "\n\n"; }

json bytes_json(const std::string& piece) {
  json bytes = json::array();
  for (const char c : piece) bytes.push_back(static_cast<int>(static_cast<unsigned char>(c)));
  return bytes;
}

}  // namespace

json timings_json(const std::vector<const RequestFinished*>& finished, bool is_speculating) {
  int64_t prompt_n = 0, cache_n = 0, predicted_n = 0, draft_n = 0, draft_accepted = 0;
  double prompt_ms = 0, predicted_ms = 0;
  for (const RequestFinished* f : finished) {
    prompt_n += f->num_prompt_tokens - f->num_reused_prompt_tokens;
    cache_n += f->num_reused_prompt_tokens;
    predicted_n += f->num_generated_tokens;
    prompt_ms = std::max(prompt_ms, f->prompt_seconds * 1e3);
    predicted_ms = std::max(predicted_ms, f->generation_seconds * 1e3);
    draft_n += f->speculation.num_drafted;
    draft_accepted += f->speculation.num_accepted;
  }
  auto per_token = [](double ms, int64_t n) { return n > 0 ? ms / static_cast<double>(n) : 0.0; };
  auto per_second = [](double ms, int64_t n) { return ms > 0 ? 1e3 * static_cast<double>(n) / ms : 0.0; };
  json t = {{"prompt_n", prompt_n},
            {"prompt_ms", prompt_ms},
            {"prompt_per_token_ms", per_token(prompt_ms, prompt_n)},
            {"prompt_per_second", per_second(prompt_ms, prompt_n)},
            {"predicted_n", predicted_n},
            {"predicted_ms", predicted_ms},
            {"predicted_per_token_ms", per_token(predicted_ms, predicted_n)},
            {"predicted_per_second", per_second(predicted_ms, predicted_n)},
            {"cache_n", cache_n}};
  if (is_speculating) {
    t["draft_n"] = draft_n;
    t["draft_n_accepted"] = draft_accepted;
  }
  return t;
}

CompletionSession::CompletionSession(CompletionKind kind, std::shared_ptr<const ServedModel> model,
                                     const CompletionParams& params, std::vector<int32_t> prompt_sizes)
    : m_kind(kind),
      m_model(std::move(model)),
      m_id(random_id(kind == CompletionKind::Chat ? "chatcmpl-" : "cmpl-")),
      m_created(std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
                    .count()),
      m_n(params.n),
      m_is_stream(params.is_stream),
      m_include_usage(params.include_usage),
      m_num_top_logprobs(params.num_top_logprobs),
      m_tool_format(params.tool_format),
      m_tool_argument_types(params.tool_argument_types),
      m_is_reply_in_reasoning(params.is_reply_in_reasoning),
      m_return_token_ids(params.return_token_ids),
      m_prompt_sizes(std::move(prompt_sizes)),
      m_choices(m_prompt_sizes.size() * static_cast<size_t>(params.n)) {}

json CompletionSession::chunk_base() const {
  json chunk = {{"id", m_id},
                {"object", m_kind == CompletionKind::Chat ? "chat.completion.chunk" : "text_completion"},
                {"created", m_created},
                {"model", m_model->id},
                {"system_fingerprint", nullptr}};
  if (m_include_usage) chunk["usage"] = nullptr;
  return chunk;
}

json CompletionSession::prompt_ids_json(size_t index) const {
  const size_t prompt = index / static_cast<size_t>(std::max(1, m_n));
  return prompt < m_prompt_token_ids.size() ? json(m_prompt_token_ids[prompt]) : json::array();
}

std::string CompletionSession::stream_start() const {
  if (m_kind != CompletionKind::Chat) return {};
  std::string out;
  for (size_t i = 0; i < m_choices.size(); ++i) {
    json chunk = chunk_base();
    if (m_return_token_ids && i == 0) chunk["prompt_token_ids"] = prompt_ids_json(0);  // the first chunk only
    chunk["choices"] = json::array({{{"index", i},
                                     {"delta", {{"role", "assistant"}, {"content", ""}}},
                                     {"logprobs", nullptr},
                                     {"finish_reason", nullptr}}});
    out += sse(chunk);
  }
  return out;
}

json CompletionSession::logprobs_json(const std::vector<TokenEvent>& tokens, const std::vector<size_t>& offsets) const {
  const tokenizer::Tokenizer& tok = m_model->tokenizer;
  if (m_kind == CompletionKind::Chat) {
    json content = json::array();
    for (const TokenEvent& t : tokens) {
      const std::string piece = tok.token_to_piece(t.token, true);
      json top = json::array();
      for (const TokenLogprob& c : t.top_logprobs) {
        const std::string p = tok.token_to_piece(c.token, true);
        top.push_back({{"token", p}, {"logprob", c.logprob}, {"bytes", bytes_json(p)}});
      }
      content.push_back(
          {{"token", piece}, {"logprob", t.logprob}, {"bytes", bytes_json(piece)}, {"top_logprobs", top}});
    }
    return {{"content", content}};
  }
  // The legacy completions shape: parallel lists, top_logprobs as {token: logprob} maps.
  json pieces = json::array(), logprobs = json::array(), tops = json::array(), text_offsets = json::array();
  for (size_t i = 0; i < tokens.size(); ++i) {
    pieces.push_back(tok.token_to_piece(tokens[i].token, true));
    logprobs.push_back(tokens[i].logprob);
    json top = json::object();
    for (const TokenLogprob& c : tokens[i].top_logprobs) top[tok.token_to_piece(c.token, true)] = c.logprob;
    tops.push_back(top);
    text_offsets.push_back(i < offsets.size() ? offsets[i] : 0);
  }
  return {{"tokens", pieces}, {"token_logprobs", logprobs}, {"top_logprobs", tops}, {"text_offset", text_offsets}};
}

CompletionSession::ChatParts CompletionSession::chat_parts(const std::string& text, bool is_streaming) const {
  if (m_tool_format == ToolCallFormat::Harmony) {
    // gpt-oss's calls are messages of their own, headers included: taken out of the reply
    // first, then its channels read from what is left.
    ToolReply reply = split_tool_calls(text, is_streaming, ToolCallFormat::Harmony);
    ReplyParts parts = split_reply(reply.content, is_streaming);
    return {std::move(parts.reasoning), std::move(parts.content), std::move(reply.calls)};
  }
  // A reply whose prompt opened its think block: read as if the reply had opened it.
  ReplyParts parts =
      m_is_reply_in_reasoning ? split_reply("<think>" + text, is_streaming) : split_reply(text, is_streaming);
  ChatParts out{std::move(parts.reasoning), std::move(parts.content), {}};
  if (m_tool_format) {
    ToolReply reply = split_tool_calls(out.content, is_streaming, *m_tool_format, m_tool_argument_types.get());
    out.content = std::move(reply.content);
    out.calls = std::move(reply.calls);
  }
  return out;
}

const char* CompletionSession::finish_reason(const Choice& c, bool has_calls) const {
  if (!c.finished) return "abort";
  const FinishReason reason = c.finished->reason;
  const bool ended_itself = reason == FinishReason::EndOfGeneration || reason == FinishReason::StopString;
  if (has_calls && ended_itself) return "tool_calls";
  return openai_finish_reason(reason);
}

json CompletionSession::next_chat_delta(Choice* c, bool is_streaming) const {
  json delta = json::object();
  // Most replies open with text: no marker can follow, so the content is the text as it is
  // (split_reply would copy all of it on every token). A tool call may follow any text.
  const size_t first = c->text.find_first_not_of(" \t\r\n");
  if (!m_tool_format && !m_is_reply_in_reasoning && first != std::string::npos && c->text[first] != '<' &&
      c->num_reasoning_sent == 0) {
    if (c->text.size() > c->num_content_sent) delta["content"] = c->text.substr(c->num_content_sent);
    c->num_content_sent = c->text.size();
    return delta;
  }
  const ChatParts parts = chat_parts(c->text, is_streaming);
  // The parts only grow while streaming (split_reply and split_tool_calls hold back unfinished
  // markers and calls).
  if (parts.reasoning.size() > c->num_reasoning_sent) {
    delta["reasoning_content"] = parts.reasoning.substr(c->num_reasoning_sent);
    c->num_reasoning_sent = parts.reasoning.size();
  }
  if (parts.content.size() > c->num_content_sent) {
    delta["content"] = parts.content.substr(c->num_content_sent);
    c->num_content_sent = parts.content.size();
  }
  // Calls as OpenAI streams them: the first delta of a call has its index, id, type and name
  // (and the arguments read so far), later ones only the index and the next piece of the
  // arguments; clients join the pieces.
  for (size_t i = 0; i < parts.calls.size(); ++i) {
    const ParsedToolCall& call = parts.calls[i];
    if (i == c->call_ids.size()) {
      c->call_ids.push_back(call_id(call, c->call_ids, *m_tool_format));
      c->num_arguments_sent.push_back(call.arguments.size());
      delta["tool_calls"].push_back({{"index", i},
                                     {"id", c->call_ids.back()},
                                     {"type", "function"},
                                     {"function", {{"name", call.name}, {"arguments", call.arguments}}}});
    } else if (call.arguments.size() > c->num_arguments_sent[i]) {
      delta["tool_calls"].push_back(
          {{"index", i}, {"function", {{"arguments", call.arguments.substr(c->num_arguments_sent[i])}}}});
      c->num_arguments_sent[i] = call.arguments.size();
    }
  }
  return delta;
}

json CompletionSession::token_chunk(size_t index, const TokenEvent& token, size_t text_offset, json delta) {
  json chunk = chunk_base();
  json lp = m_num_top_logprobs >= 0 ? logprobs_json({token}, {text_offset}) : json(nullptr);
  if (m_kind == CompletionKind::Chat) {
    if (delta.empty()) delta["content"] = "";  // a token that only logprobs (or its id) report
    chunk["choices"] =
        json::array({{{"index", index}, {"delta", std::move(delta)}, {"logprobs", lp}, {"finish_reason", nullptr}}});
  } else {
    chunk["choices"] =
        json::array({{{"text", token.text}, {"index", index}, {"logprobs", lp}, {"finish_reason", nullptr}}});
  }
  if (m_return_token_ids) {
    json& choice = chunk["choices"][0];
    choice["token_ids"] = json::array({token.token});
    Choice& c = m_choices[index];
    if (m_kind == CompletionKind::Text && !c.is_prompt_sent) choice["prompt_token_ids"] = prompt_ids_json(index);
    c.is_prompt_sent = true;
  }
  return chunk;
}

json CompletionSession::finish_chunk(size_t index) const {
  const RequestFinished& f = *m_choices[index].finished;
  json chunk = chunk_base();
  // Streaming: the reply's last delta has sent every call (call_ids counts them).
  const char* reason = m_kind == CompletionKind::Chat
                           ? finish_reason(m_choices[index], !m_choices[index].call_ids.empty())
                           : openai_finish_reason(f.reason);
  if (m_kind == CompletionKind::Chat) {
    chunk["choices"] =
        json::array({{{"index", index}, {"delta", json::object()}, {"logprobs", nullptr}, {"finish_reason", reason}}});
  } else {
    chunk["choices"] =
        json::array({{{"text", ""}, {"index", index}, {"logprobs", nullptr}, {"finish_reason", reason}}});
  }
  chunk["timings"] = timings_json({&f}, m_model->is_speculating);
  return chunk;
}

std::string CompletionSession::add(std::vector<ServeEvent> events) {
  std::string out;
  for (ServeEvent& e : events) {
    if (e.index >= m_choices.size()) continue;
    Choice& c = m_choices[e.index];
    if (c.finished) continue;
    if (TokenEvent* token = std::get_if<TokenEvent>(&e.event)) {
      const size_t offset = c.text.size();
      c.text += token->text;
      ++c.num_tokens;
      if (m_return_token_ids) c.token_ids.push_back(token->token);
      if (m_is_stream) {
        json delta = m_kind == CompletionKind::Chat ? next_chat_delta(&c, /*is_streaming=*/true) : json::object();
        const bool has_text = m_kind == CompletionKind::Chat ? !delta.empty() : !token->text.empty();
        if (has_text || m_num_top_logprobs >= 0 || m_return_token_ids) {
          out += sse(token_chunk(e.index, *token, offset, std::move(delta)));
        }
      }
      if (m_num_top_logprobs >= 0) {
        c.logprob_tokens.push_back(std::move(*token));
        c.text_offsets.push_back(offset);
      }
      continue;
    }
    c.finished = std::move(std::get<RequestFinished>(e.event));
    ++m_num_finished;
    if (!m_is_stream) continue;
    if (c.finished->reason == FinishReason::Error) {
      ApiError error;
      error.status = 500;
      error.type = "server_error";
      error.message = "generation failed: " + c.finished->error;
      out += sse(error_json(error));
    } else {
      if (m_kind == CompletionKind::Chat) {
        // Text held back as a possible marker is the answer's after all.
        json delta = next_chat_delta(&c, /*is_streaming=*/false);
        if (!delta.empty()) {
          json chunk = chunk_base();
          chunk["choices"] = json::array(
              {{{"index", e.index}, {"delta", std::move(delta)}, {"logprobs", nullptr}, {"finish_reason", nullptr}}});
          out += sse(chunk);
        }
      }
      out += sse(finish_chunk(e.index));
    }
  }
  return out;
}

json CompletionSession::usage_json() const {
  // Prompt tokens count once per prompt, however many choices share it.
  int64_t prompt_tokens = 0, cached = 0, completion_tokens = 0;
  for (size_t p = 0; p < m_prompt_sizes.size(); ++p) {
    prompt_tokens += m_prompt_sizes[p];
    int64_t best_cached = 0;
    for (size_t i = p * static_cast<size_t>(m_n); i < (p + 1) * static_cast<size_t>(m_n) && i < m_choices.size(); ++i) {
      if (m_choices[i].finished)
        best_cached = std::max<int64_t>(best_cached, m_choices[i].finished->num_reused_prompt_tokens);
    }
    cached += best_cached;
  }
  for (const Choice& c : m_choices) {
    if (c.finished) completion_tokens += c.finished->num_generated_tokens;
  }
  return {{"prompt_tokens", prompt_tokens},
          {"completion_tokens", completion_tokens},
          {"total_tokens", prompt_tokens + completion_tokens},
          {"prompt_tokens_details", {{"cached_tokens", cached}}}};
}

std::string CompletionSession::body_text() const {
  if (const std::string error = first_error(); !error.empty()) {
    ApiError e;
    e.status = 500;
    e.type = "server_error";
    e.message = "generation failed: " + error;
    return dump_json(error_json(e));
  }
  json choices = json::array();
  std::vector<const RequestFinished*> finished;
  for (size_t i = 0; i < m_choices.size(); ++i) {
    const Choice& c = m_choices[i];
    if (c.finished) finished.push_back(&*c.finished);
    json lp = m_num_top_logprobs >= 0 ? logprobs_json(c.logprob_tokens, c.text_offsets) : json(nullptr);
    if (m_kind == CompletionKind::Chat) {
      const ChatParts parts = chat_parts(c.text, /*is_streaming=*/false);
      const char* reason = finish_reason(c, !parts.calls.empty());
      json message = {{"role", "assistant"}, {"content", parts.content}};
      if (!parts.reasoning.empty()) message["reasoning_content"] = parts.reasoning;
      if (!parts.calls.empty()) {
        // OpenAI's shape: content null when the reply is only calls.
        if (parts.content.empty()) message["content"] = nullptr;
        json calls = json::array();
        std::vector<std::string> ids;
        for (const ParsedToolCall& call : parts.calls) {
          ids.push_back(call_id(call, ids, *m_tool_format));
          calls.push_back({{"id", ids.back()},
                           {"type", "function"},
                           {"function", {{"name", call.name}, {"arguments", call.arguments}}}});
        }
        message["tool_calls"] = std::move(calls);
      }
      choices.push_back({{"index", i}, {"message", std::move(message)}, {"logprobs", lp}, {"finish_reason", reason}});
    } else {
      const char* reason = c.finished ? openai_finish_reason(c.finished->reason) : "abort";
      choices.push_back({{"text", c.text}, {"index", i}, {"logprobs", lp}, {"finish_reason", reason}});
      if (m_return_token_ids) choices.back()["prompt_token_ids"] = prompt_ids_json(i);
    }
    if (m_return_token_ids) choices.back()["token_ids"] = c.token_ids;
  }
  json body = {{"id", m_id},
               {"object", m_kind == CompletionKind::Chat ? "chat.completion" : "text_completion"},
               {"created", m_created},
               {"model", m_model->id},
               {"system_fingerprint", nullptr},
               {"choices", choices},
               {"usage", usage_json()},
               {"timings", timings_json(finished, m_model->is_speculating)}};
  if (m_return_token_ids && m_kind == CompletionKind::Chat) body["prompt_token_ids"] = prompt_ids_json(0);
  return dump_json(body);
}

std::string CompletionSession::finish_text() const {
  if (!m_is_stream) return body_text();
  std::string out;
  if (m_include_usage) {
    json chunk = chunk_base();
    chunk["choices"] = json::array();
    chunk["usage"] = usage_json();
    std::vector<const RequestFinished*> finished;
    for (const Choice& c : m_choices) {
      if (c.finished) finished.push_back(&*c.finished);
    }
    chunk["timings"] = timings_json(finished, m_model->is_speculating);
    out += sse(chunk);
  }
  return out + "data: [DONE]\n\n";
}

int32_t CompletionSession::num_prompt_tokens() const {
  int32_t n = 0;
  for (const int32_t s : m_prompt_sizes) n += s;
  return n;
}

int32_t CompletionSession::num_generated_tokens() const {
  int32_t n = 0;
  for (const Choice& c : m_choices) {
    n += c.num_tokens;
  }
  return n;
}

std::string CompletionSession::first_error() const {
  for (const Choice& c : m_choices) {
    if (c.finished && c.finished->reason == FinishReason::Error) return c.finished->error;
  }
  return {};
}

}  // namespace iwb::serve
