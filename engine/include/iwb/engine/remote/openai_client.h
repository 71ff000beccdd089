// A client of OpenAI-compatible servers (vLLM, SGLang, llama-server, LM Studio, `iwb serve`):
// the served models, a streamed chat or text completion with client-side timing of every
// content token, and the server's /metrics text. Blocking calls on the caller's thread (the
// GUI calls them from a worker); cancellable between chunks; every failure is classified.
#pragma once

#include "iwb/engine/status.h"

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace iwb::remote {

struct Endpoint {
  std::string base_url;  // "http://host:8000" or "http://host:8000/v1" (both accepted)
  std::string api_key;   // sent as "Authorization: Bearer <key>" when not empty
  double connect_timeout_seconds = 5;
  double read_timeout_seconds = 120;  // longest silence between two stream chunks
};

// The server root without a trailing /v1 or slash ("http://host:8000"), for /metrics.
std::string endpoint_root(const std::string& base_url);

struct RemoteMessage {
  std::string role;  // system, user, assistant
  std::string content;
};

struct RemoteRequest {
  std::string model;
  bool is_chat = true;                  // /v1/chat/completions with messages, else /v1/completions with prompt
  std::vector<RemoteMessage> messages;  // is_chat
  std::string prompt;                   // !is_chat
  int64_t max_tokens = 256;
  std::optional<double> temperature;
  std::optional<double> top_p;
  std::optional<int64_t> seed;
  bool ignore_eos = false;  // vLLM/llama.cpp/iwb extension: generate exactly max_tokens (load tests)
  // OpenAI's response_format as JSON text ({"type": "json_object"}, ...); empty: none sent.
  // The caller checks it is a JSON object.
  std::string response_format;
  // A regex the whole reply must match, sent as vLLM's guided_regex (iwb serve takes it too;
  // llama-server and OpenAI do not); empty: none sent.
  std::string guided_regex;
  // Thinking controls as vLLM and llama-server take them: chat_template_kwargs.enable_thinking
  // (unset: none sent) and OpenAI's reasoning_effort (empty: none sent).
  std::optional<bool> enable_thinking;
  std::string reasoning_effort;
};

enum class RemoteErrorKind {
  None,
  ConnectFailed,  // nothing listening, DNS, refused
  Timeout,        // connect or read timeout
  HttpError,      // a non-2xx status (http_status and the server's message kept)
  Dropped,        // the stream ended before [DONE] or a finish_reason
  Malformed,      // a chunk or body that is not the JSON the API promises
  Cancelled,      // the caller's cancel flag
};
const char* remote_error_kind_name(RemoteErrorKind kind);  // "connect", "timeout", "http", ...

struct RemoteError {
  RemoteErrorKind kind = RemoteErrorKind::None;
  int http_status = 0;
  std::string message;
};

// Server-side timings when the server sends them (llama-server's and iwb's "timings" object).
struct ServerTimings {
  int64_t prompt_n = 0;
  double prompt_ms = 0;
  int64_t predicted_n = 0;
  double predicted_ms = 0;
  int64_t cache_n = 0;
};

// One streamed completion as the client saw it. Times are seconds since the request was sent.
struct StreamedCompletion {
  std::string text;
  std::string finish_reason;           // "stop", "length", ... (empty when the stream broke)
  std::optional<double> ttft_seconds;  // first chunk carrying content (not the role-only chunk)
  std::vector<double> token_seconds;   // arrival of every content chunk (one or more tokens each)
  double e2e_seconds = 0;              // until [DONE] or the failure
  int64_t prompt_tokens = -1;          // from "usage" when the server sends it (stream_options)
  int64_t completion_tokens = -1;      // from "usage"; else -1
  std::optional<ServerTimings> server_timings;
  RemoteError error;  // kind None on success
  bool is_ok() const { return error.kind == RemoteErrorKind::None; }
};

class OpenAiClient {
 public:
  explicit OpenAiClient(Endpoint endpoint);

  const Endpoint& endpoint() const { return m_endpoint; }
  // GET /v1/models: the served model ids.
  Result<std::vector<std::string>> list_models() const;
  // GET <root>/metrics: the exposition text; NotFound when the server has none.
  Result<std::string> fetch_metrics_text() const;
  // POST a streamed completion (stream: true, stream_options.include_usage: true). on_content
  // receives every content delta with its arrival time, a reasoning model's reasoning_content
  // inside <think>…</think> before it (so split_reply shows it apart, as for a local model);
  // returning false cancels, as does
  // *cancel becoming true. Never throws; failures land in the result's error.
  StreamedCompletion stream(const RemoteRequest& request,
                            const std::function<bool(std::string_view delta, double seconds)>& on_content = {},
                            const std::atomic<bool>* cancel = nullptr) const;

 private:
  Endpoint m_endpoint;
};

}  // namespace iwb::remote
