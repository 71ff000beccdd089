// OpenAI request bodies read into plain values, every field checked for type and range: a bad
// request becomes an ApiError (HTTP status and OpenAI's error object), never an exception.
#pragma once

#include "iwb/engine/chat/chat_template.h"
#include "iwb/engine/chat/tool_calls.h"
#include "iwb/engine/sampling/json_grammar.h"
#include "iwb/engine/sampling/sampler.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace iwb::serve {

// OpenAI's error object {"error": {"message", "type", "param", "code"}} and its HTTP status.
struct ApiError {
  int status = 400;
  std::string message;
  std::string type = "invalid_request_error";
  std::string param;  // the offending field, "" for none (null in the body)
  std::string code;   // a short machine-readable code, "" for none (null)
};
nlohmann::json error_json(const ApiError& error);
ApiError invalid_request(std::string message, std::string param = {}, std::string code = {});

// Limits a request must keep (ServeOptions carries them).
struct RequestLimits {
  int32_t max_choices = 16;  // n times the number of prompts
  int32_t max_top_logprobs = 20;
  int32_t max_stop_strings = 16;
  size_t max_stop_bytes = 256;   // per stop string
  size_t max_logit_bias = 1024;  // entries of logit_bias
  size_t max_tools = 128;        // OpenAI's limit
};

// What chat and text completions share.
struct CompletionParams {
  SamplingParams sampling;            // the server's defaults with the request's fields over them
  bool has_seed = false;              // false: each choice gets a fresh random seed
  std::optional<int64_t> max_tokens;  // max_tokens / max_completion_tokens; none: up to the context
  std::vector<std::string> stop;
  int32_t n = 1;
  bool is_stream = false;
  bool include_usage = false;     // stream_options.include_usage
  int32_t num_top_logprobs = -1;  // -1: no logprobs; 0: the chosen token's; N: also the top N
  bool ignore_eos = false;        // vLLM's and llama-server's extension: generate through EOS
                                  // up to max_tokens (what load generators send)
  // vLLM's extension: the response carries the prompt's token ids and each choice's generated
  // ones (its end-of-generation token included), so a client can continue from exactly those
  // tokens (a chat's next turn hits the prefix cache past the reply).
  bool return_token_ids = false;
  // response_format {"type": "json_object"} or {"type": "json_schema", "json_schema": {"schema":
  // ...}} (also llama-server's "json_schema" field): the reply is held to it. Null: free text.
  std::shared_ptr<const JsonGrammar> json_grammar;
  // Tool calls (tools with tool_choice other than "none"): json_grammar holds each call the
  // reply writes after the trigger (GenerationRequest::grammar_trigger and its companions), and
  // the reply is split into content and tool_calls.
  std::string grammar_trigger;
  std::string grammar_separator = "\n";
  bool is_grammar_trigger_forced = false;
  bool ends_after_grammar = false;
  bool is_trigger_in_grammar = false;
  bool is_trigger_at_start = false;
  std::optional<ToolCallFormat> tool_format;  // set: the reply's calls are parsed in this format
  // Formats whose arguments are text (QwenXml, GlmXml): how each parameter's text is read.
  std::shared_ptr<const ToolArgumentTypes> tool_argument_types;
  // The prompt ends inside an open <think> block (GLM-4.7's generation prompt): the reply opens
  // with its reasoning, without the tag (ChatPrompt::opens_reasoning).
  bool is_reply_in_reasoning = false;
};

// tool_choice: "none", "auto", "required" or {"type": "function", "function": {"name": ...}}.
enum class ToolChoice { None, Auto, Required, Function };

struct ChatCompletionRequest {
  CompletionParams params;
  std::vector<ChatMessage> messages;
  std::vector<ToolDefinition> tools;  // rendered into the prompt unless tool_choice is "none"
  ToolChoice tool_choice = ToolChoice::None;
  std::string tool_choice_name;  // ToolChoice::Function: the tool
  bool is_parallel_tool_calls = true;
  // Thinking controls the model's template reads: `chat_template_kwargs` (vLLM's and
  // llama-server's field) {"enable_thinking": false} (Qwen3, SmolLM3), and `reasoning_effort`
  // (OpenAI's field, or the same kwarg: gpt-oss's "Reasoning: low|medium|high").
  std::optional<bool> enable_thinking;
  std::string reasoning_effort;
  std::optional<bool> clear_thinking;  // GLM-4.7's chat_template_kwargs.clear_thinking
};

// A prompt given as text or as token ids.
using PromptInput = std::variant<std::string, std::vector<int32_t>>;

struct TextCompletionRequest {
  CompletionParams params;
  std::vector<PromptInput> prompts;  // each gets n choices
};

// Parses a request body: a JSON object at most `max_depth` levels deep; anything else
// (invalid JSON or UTF-8, another type) is an ApiError.
std::variant<nlohmann::json, ApiError> parse_body(std::string_view body, int max_depth = 64);

// `raw_body`: the body's text, read again for the tools' key order (the template shows tools
// as the client wrote them; nlohmann::json sorts keys). Empty: sorted.
std::variant<ChatCompletionRequest, ApiError> read_chat_request(const nlohmann::json& body,
                                                                const SamplingParams& defaults,
                                                                const RequestLimits& limits,
                                                                std::string_view raw_body = {});
std::variant<TextCompletionRequest, ApiError> read_completion_request(const nlohmann::json& body,
                                                                      const SamplingParams& defaults,
                                                                      const RequestLimits& limits);

// With tools to call: the grammar of a call in the model's format (a strict tool's schema the
// grammar cannot hold is the error), its trigger, and the reply parsed into tool_calls.
std::optional<ApiError> hold_tool_calls(ChatCompletionRequest* request, ToolCallFormat format);

// Dumps JSON for the wire: invalid UTF-8 in strings (a token cut inside a character) becomes
// U+FFFD instead of an exception.
std::string dump_json(const nlohmann::json& value);

}  // namespace iwb::serve
