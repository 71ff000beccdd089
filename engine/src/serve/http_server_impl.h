// HttpServer's inside, shared by http_server.cpp (set-up, auth, errors, the small endpoints)
// and completion_routes.cpp (chat and text completions).
#pragma once

#include "completion_session.h"
#include "guarded_stream.h"
#include "openai_request.h"

#include "iwb/engine/serve/http_server.h"

#include <httplib.h>
#include <nlohmann/json.hpp>

#include <atomic>
#include <chrono>
#include <functional>
#include <mutex>
#include <random>

namespace iwb::serve {

class HttpServer::Impl {
 public:
  Impl(ServeCore& core, ServeMetrics& metrics, ServeOptions options);

  void install_routes();

  // The small endpoints (http_server.cpp).
  void handle_health(const httplib::Request& req, httplib::Response& res);
  void handle_models(const httplib::Request& req, httplib::Response& res);
  void handle_tokenize(const httplib::Request& req, httplib::Response& res);
  void handle_detokenize(const httplib::Request& req, httplib::Response& res);
  void handle_metrics(const httplib::Request& req, httplib::Response& res);
  void handle_apply_template(const httplib::Request& req, httplib::Response& res);
  // Chat and text completions (completion_routes.cpp).
  void handle_completion(const httplib::Request& req, httplib::Response& res, CompletionKind kind);

  void send_json(httplib::Response& res, const nlohmann::json& body, int status = 200);
  void send_error(httplib::Response& res, const ApiError& error);
  ApiError loading_error() const;
  uint64_t random_seed();
  void log(const RequestLogEntry& entry) const;

  ServeCore& core;
  ServeMetrics& metrics;
  ServeOptions options;
  RequestLimits limits;
  GuardedServer server;
  std::function<void(const RequestLogEntry&)> request_log;
  std::atomic<int64_t> num_in_flight{0};  // engine requests submitted and not yet answered
  int listen_socket = -1;                 // seen in the socket-options hook, for the backlog
  bool is_bound = false;
  std::atomic<bool> is_listening{false};
  std::atomic<bool> is_stop_requested{false};
  int64_t created = 0;  // unix seconds, for /v1/models

 private:
  std::mutex m_seed_mutex;
  std::mt19937_64 m_seed_source;
};

// Seconds since `start`.
inline double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace iwb::serve
