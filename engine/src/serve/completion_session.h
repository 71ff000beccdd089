// One chat or text completion between its submission and its last byte: folds the engine's
// events into choices and renders them in OpenAI's shapes (server-sent event chunks or one
// JSON body), with usage, logprobs and llama-server's `timings`. A chat reply's reasoning
// (harmony's analysis channel, <think>…</think>) goes in `reasoning_content`, as llama-server
// and vLLM send it, apart from the answer's `content`; with tools, the reply's <tool_call>
// blocks become `tool_calls` (whole calls, one delta each, when streaming). No HTTP here: the server
// writes what this returns.
#pragma once

#include "openai_request.h"

#include "iwb/engine/serve/serve_core.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace iwb::serve {

enum class CompletionKind { Chat, Text };

class CompletionSession {
 public:
  // `prompt_sizes[p]`: tokens of prompt p; its choices are p * n ... p * n + n - 1.
  CompletionSession(CompletionKind kind, std::shared_ptr<const ServedModel> model, const CompletionParams& params,
                    std::vector<int32_t> prompt_sizes);
  // With CompletionParams::return_token_ids: the prompts' tokens (one per prompt_sizes entry),
  // sent as vLLM sends them: a chat's at the top (`prompt_token_ids`, in the first chunk when
  // streaming), each text choice's in the choice (in its first chunk); generated ids go in
  // each choice's `token_ids` (each chunk's own when streaming).
  void set_prompt_token_ids(std::vector<std::vector<int32_t>> prompts) { m_prompt_token_ids = std::move(prompts); }

  size_t num_choices() const { return m_choices.size(); }
  bool is_stream() const { return m_is_stream; }
  bool is_finished() const { return m_num_finished == m_choices.size(); }
  const std::string& id() const { return m_id; }

  // Streaming: the first chunks (chat: each choice's assistant role).
  std::string stream_start() const;
  // Takes events in; when streaming, returns the server-sent events to write now.
  std::string add(std::vector<ServeEvent> events);
  // Once finished. Streaming: the usage chunk (when asked for) and "data: [DONE]". Otherwise
  // the whole response body (or the error object when a choice failed).
  std::string finish_text() const;

  // For the request log: totals so far.
  int32_t num_prompt_tokens() const;
  int32_t num_generated_tokens() const;
  std::string first_error() const;

 private:
  struct Choice {
    std::string text;
    int32_t num_tokens = 0;
    std::vector<int32_t> token_ids;          // when return_token_ids was asked for
    bool is_prompt_sent = false;             // streamed text: its prompt_token_ids went out
    std::vector<TokenEvent> logprob_tokens;  // when logprobs were asked for
    std::vector<size_t> text_offsets;        // where each of them starts in `text`
    // Chat: how much of split_reply(text)'s reasoning and content the stream has sent.
    size_t num_reasoning_sent = 0;
    size_t num_content_sent = 0;
    std::vector<std::string> call_ids;       // tool calls announced so far, by index
    std::vector<size_t> num_arguments_sent;  // how much of each one's arguments the stream has sent
    std::optional<RequestFinished> finished;
  };

  nlohmann::json chunk_base() const;
  nlohmann::json token_chunk(size_t index, const TokenEvent& token, size_t text_offset, nlohmann::json delta);
  // The prompt's ids of choice `index` (return_token_ids), an empty list when not kept.
  nlohmann::json prompt_ids_json(size_t index) const;
  // Chat: what split_reply adds to the choice's reasoning and content since the last call, as
  // a delta ({"reasoning_content", "content"}, keys only for what grew).
  nlohmann::json next_chat_delta(Choice* choice, bool is_streaming) const;
  // Chat: the reply's reasoning, content and (with tools) calls, as split for the client.
  struct ChatParts {
    std::string reasoning, content;
    std::vector<ParsedToolCall> calls;
  };
  ChatParts chat_parts(const std::string& text, bool is_streaming) const;
  // Chat: "tool_calls" where the reply made calls and ended by itself, else the engine's reason.
  const char* finish_reason(const Choice& choice, bool has_calls) const;
  nlohmann::json finish_chunk(size_t index) const;
  nlohmann::json logprobs_json(const std::vector<TokenEvent>& tokens, const std::vector<size_t>& offsets) const;
  nlohmann::json usage_json() const;
  std::string body_text() const;

  CompletionKind m_kind;
  std::shared_ptr<const ServedModel> m_model;
  std::string m_id;
  int64_t m_created = 0;
  int32_t m_n = 1;
  bool m_is_stream = false;
  bool m_include_usage = false;
  int32_t m_num_top_logprobs = -1;
  std::optional<ToolCallFormat> m_tool_format;  // set: the reply's calls are parsed
  std::shared_ptr<const ToolArgumentTypes> m_tool_argument_types;
  bool m_is_reply_in_reasoning = false;  // CompletionParams::is_reply_in_reasoning
  bool m_return_token_ids = false;       // CompletionParams::return_token_ids
  std::vector<std::vector<int32_t>> m_prompt_token_ids;
  std::vector<int32_t> m_prompt_sizes;
  std::vector<Choice> m_choices;
  size_t m_num_finished = 0;
};

// llama-server's `timings` over finished requests (several choices: counts summed, times the
// longest): prompt_n (prompt tokens computed), cache_n (taken from the prefix cache), prompt_ms,
// prompt_per_token_ms, prompt_per_second, predicted_n, predicted_ms, predicted_per_token_ms,
// predicted_per_second, and draft_n / draft_n_accepted when `is_speculating`.
nlohmann::json timings_json(const std::vector<const RequestFinished*>& finished, bool is_speculating);

}  // namespace iwb::serve
