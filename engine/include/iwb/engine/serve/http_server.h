// The OpenAI-compatible HTTP API over a ServeCore (cpp-httplib underneath): chat and text
// completions (streamed as server-sent events or not), models, health, tokenize, detokenize
// and Prometheus metrics. Limits keep hostile clients bounded: body size, choices per request,
// requests in flight, read and write timeouts. docs/serving.md describes every endpoint.
#pragma once

#include "iwb/engine/sampling/sampler.h"
#include "iwb/engine/serve/serve_core.h"
#include "iwb/engine/serve/serve_metrics.h"
#include "iwb/engine/status.h"

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

namespace iwb::serve {

struct ServeOptions {
  std::string host = "127.0.0.1";
  int port = 8080;                          // 0: any free port (HttpServer::bind returns it)
  std::string api_key;                      // set: every endpoint but /health needs "Authorization: Bearer KEY"
  size_t max_body_bytes = size_t{8} << 20;  // larger request bodies get 413
  int32_t max_choices = 16;                 // n (times the prompts of a text completion) at most
  int32_t max_top_logprobs = 20;
  // Engine requests queued or generating at once; a request that would pass it gets 503 with
  // Retry-After (n choices count n).
  int64_t max_requests_in_flight = 256;
  int num_http_threads = 0;         // connections served at once; 0: max(64, in-flight cap / 2) + 8
  int read_timeout_seconds = 10;    // a client that stops sending mid-request is dropped
  int write_timeout_seconds = 10;   // a client that stops reading is dropped (its request aborted)
  SamplingParams default_sampling;  // what a request's missing fields take
  bool has_default_seed = false;    // default_sampling.seed is the server's --seed (else each request draws one)
  int64_t default_max_tokens = -1;  // a request without max_tokens: this many at most (-1: the context)
  // --chat-template-kwargs (llama-server's): the thinking controls of a request that gives none.
  std::optional<bool> default_enable_thinking;
  std::string default_reasoning_effort;
  std::optional<bool> default_clear_thinking;
};

// Reads llama-server's --chat-template-kwargs JSON ({"enable_thinking": false},
// {"reasoning_effort": "high"}) into the defaults; an error says what is wrong, as a request's
// chat_template_kwargs would be refused.
Status set_default_chat_template_kwargs(std::string_view json_text, ServeOptions* options);

// One answered HTTP request, for a log (iwb serve's stderr, the application's request table).
struct RequestLogEntry {
  std::string method;
  std::string path;
  std::string remote_address;
  int status = 0;
  int32_t num_prompt_tokens = 0;
  int32_t num_generated_tokens = 0;
  double seconds = 0;   // from the request's arrival to its last byte (or its end)
  std::string outcome;  // finish reasons ("stop", "length"), "disconnected", or the error message
};

class HttpServer {
 public:
  // `core` and `metrics` must outlive the server.
  HttpServer(ServeCore& core, ServeMetrics& metrics, ServeOptions options);
  ~HttpServer();  // stop()
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Called from HTTP threads after each request; set before listen().
  void set_request_log(std::function<void(const RequestLogEntry&)> log);

  // Binds options.host:options.port; returns the port bound.
  Result<int> bind();
  // Serves on the calling thread until stop(). bind() first.
  Status listen();
  // Any thread: listen() returns once the connections in progress end (streams stop, and
  // their requests are aborted).
  void stop();

  const ServeOptions& options() const;

 private:
  class Impl;
  std::unique_ptr<Impl> m_impl;
};

// True for addresses only this machine reaches (127.0.0.0/8, ::1, localhost).
bool is_loopback_host(const std::string& host);

}  // namespace iwb::serve
