// HttpServer: cpp-httplib set up with our limits, the API key check, OpenAI-shaped errors for
// everything httplib refuses itself (404, 413, malformed requests), and the small endpoints:
// /health, /v1/models, /tokenize, /detokenize, /metrics.
#include "http_server_impl.h"

#include <arpa/inet.h>
#include <sys/socket.h>

#include <algorithm>
#include <limits>
#include <thread>

namespace iwb::serve {
namespace {

using json = nlohmann::json;

thread_local std::chrono::steady_clock::time_point t_request_start;  // set as each request is routed

bool is_completion_path(const std::string& path) {
  return path == "/v1/chat/completions" || path == "/chat/completions" || path == "/v1/completions" ||
         path == "/completions";
}

// Compares without stopping at the first difference, so timing does not reveal the key.
bool equal_constant_time(const std::string& a, const std::string& b) {
  unsigned diff = a.size() == b.size() ? 0u : 1u;
  for (size_t i = 0; i < std::max(a.size(), b.size()); ++i) {
    const auto x = static_cast<unsigned char>(i < a.size() ? a[i] : 0);
    const auto y = static_cast<unsigned char>(i < b.size() ? b[i] : 0);
    diff |= static_cast<unsigned>(x ^ y);
  }
  return diff == 0;
}

ApiError status_error(int status) {
  ApiError e;
  e.status = status;
  switch (status) {
    case 404:
      e.type = "not_found_error";
      e.message = "no such endpoint (see /v1/models, /v1/chat/completions, /v1/completions, /health, /metrics)";
      break;
    case 405: e.message = "method not allowed on this endpoint"; break;
    case 413:
      e.message = "the request body is larger than this server accepts";
      e.code = "payload_too_large";
      break;
    case 414: e.message = "the request URI is too long"; break;
    case 416: e.message = "ranges are not supported here"; break;
    default:
      if (status >= 500) {
        e.type = "server_error";
        e.message = "internal server error";
      } else {
        e.message = "malformed HTTP request (or a header block over 64 KiB)";
      }
  }
  return e;
}

}  // namespace

bool is_loopback_host(const std::string& host) {
  if (host == "localhost" || host == "::1" || host == "[::1]") return true;
  in_addr v4{};
  return inet_pton(AF_INET, host.c_str(), &v4) == 1 && (ntohl(v4.s_addr) >> 24) == 127;
}

HttpServer::Impl::Impl(ServeCore& core_in, ServeMetrics& metrics_in, ServeOptions options_in)
    : core(core_in), metrics(metrics_in), options(std::move(options_in)), m_seed_source(std::random_device{}()) {
  limits.max_choices = std::max(options.max_choices, 1);
  limits.max_top_logprobs = std::max(options.max_top_logprobs, 0);
  created =
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

void HttpServer::Impl::send_json(httplib::Response& res, const json& body, int status) {
  res.status = status;
  res.set_content(dump_json(body), "application/json");
}

void HttpServer::Impl::send_error(httplib::Response& res, const ApiError& error) {
  send_json(res, error_json(error), error.status);
  if (error.status == 503) res.set_header("Retry-After", "1");
}

ApiError HttpServer::Impl::loading_error() const {
  ApiError e;
  e.status = 503;
  e.type = "unavailable_error";
  e.message = "the model is loading";
  e.code = "model_loading";
  return e;
}

uint64_t HttpServer::Impl::random_seed() {
  std::lock_guard lock(m_seed_mutex);
  return m_seed_source();
}

void HttpServer::Impl::log(const RequestLogEntry& entry) const {
  if (request_log) request_log(entry);
}

void HttpServer::Impl::install_routes() {
  using httplib::Request;
  using httplib::Response;
  server.set_pre_routing_handler([this](const Request& req, Response& res) {
    t_request_start = std::chrono::steady_clock::now();
    if (options.api_key.empty() || req.path == "/health" || req.path == "/v1/health") {
      return httplib::Server::HandlerResponse::Unhandled;
    }
    if (equal_constant_time(req.get_header_value("Authorization"), "Bearer " + options.api_key)) {
      return httplib::Server::HandlerResponse::Unhandled;
    }
    ApiError e;
    e.status = 401;
    e.type = "authentication_error";
    e.message = "a valid API key is required (Authorization: Bearer KEY)";
    e.code = "invalid_api_key";
    send_error(res, e);
    return httplib::Server::HandlerResponse::Handled;
  });
  // Errors httplib answers itself (no route, body too large, a request it cannot parse) get
  // the same JSON shape as ours.
  server.set_error_handler(httplib::Server::HandlerWithResponse([this](const Request&, Response& res) {
    if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
    send_error(res, status_error(res.status));
    return httplib::Server::HandlerResponse::Handled;
  }));
  server.set_exception_handler([this](const Request&, Response& res, std::exception_ptr) {
    ApiError e = status_error(500);
    send_error(res, e);
  });
  server.set_logger([this](const Request& req, const Response& res) {
    if (res.status == 200 && is_completion_path(req.path)) return;  // logged when its stream ends
    RequestLogEntry entry;
    entry.method = req.method;
    entry.path = req.path;
    entry.remote_address = req.remote_addr;
    entry.status = res.status;
    entry.seconds = t_request_start.time_since_epoch().count() != 0 ? seconds_since(t_request_start) : 0.0;
    if (res.status >= 400) {
      try {
        entry.outcome = json::parse(res.body).at("error").at("message").get<std::string>();
      } catch (const json::exception&) {
        entry.outcome = "error";
      }
    }
    t_request_start = {};
    log(entry);
  });

  server.Get("/health", [this](const Request& q, Response& s) { handle_health(q, s); });
  server.Get("/v1/health", [this](const Request& q, Response& s) { handle_health(q, s); });
  server.Get("/v1/models", [this](const Request& q, Response& s) { handle_models(q, s); });
  server.Get("/models", [this](const Request& q, Response& s) { handle_models(q, s); });
  server.Get("/metrics", [this](const Request& q, Response& s) { handle_metrics(q, s); });
  server.Post("/tokenize", [this](const Request& q, Response& s) { handle_tokenize(q, s); });
  server.Post("/detokenize", [this](const Request& q, Response& s) { handle_detokenize(q, s); });
  server.Post("/apply-template", [this](const Request& q, Response& s) { handle_apply_template(q, s); });
  for (const char* path : {"/v1/chat/completions", "/chat/completions"}) {
    server.Post(path, [this](const Request& q, Response& s) { handle_completion(q, s, CompletionKind::Chat); });
  }
  for (const char* path : {"/v1/completions", "/completions"}) {
    server.Post(path, [this](const Request& q, Response& s) { handle_completion(q, s, CompletionKind::Text); });
  }
}

void HttpServer::Impl::handle_health(const httplib::Request&, httplib::Response& res) {
  if (core.model() == nullptr) return send_error(res, loading_error());
  send_json(res, {{"status", "ok"}});
}

void HttpServer::Impl::handle_models(const httplib::Request&, httplib::Response& res) {
  const std::shared_ptr<const ServedModel> model = core.model();
  if (model == nullptr) return send_error(res, loading_error());
  const ModelSummary& s = model->summary;
  const json meta = {{"n_ctx", model->context_length},
                     {"n_ctx_train", s.hparams.context_length},
                     {"n_params", s.num_params},
                     {"size", s.tensor_bytes},
                     {"n_vocab", model->tokenizer.num_tokens()},
                     {"n_embd", s.hparams.embedding_length},
                     {"architecture", s.architecture},
                     {"file_type", s.file_type},
                     {"has_chat_template", !model->chat_template.empty()}};
  const json entry = {
      {"id", model->id}, {"object", "model"}, {"created", created}, {"owned_by", "iwb"}, {"meta", meta}};
  send_json(res, {{"object", "list"}, {"data", json::array({entry})}});
}

void HttpServer::Impl::handle_metrics(const httplib::Request&, httplib::Response& res) {
  const std::shared_ptr<const ServedModel> model = core.model();
  res.set_content(metrics.prometheus_text(model != nullptr ? model->id : ""),
                  "text/plain; version=0.0.4; charset=utf-8");
}

void HttpServer::Impl::handle_tokenize(const httplib::Request& req, httplib::Response& res) {
  const std::shared_ptr<const ServedModel> model = core.model();
  if (model == nullptr) return send_error(res, loading_error());
  std::variant<json, ApiError> body = parse_body(req.body);
  if (const ApiError* e = std::get_if<ApiError>(&body)) return send_error(res, *e);
  const json& b = std::get<json>(body);
  const auto content = b.find("content");
  if (content == b.end() || !content->is_string()) {
    return send_error(res, invalid_request("'content' must be the text to tokenize", "content"));
  }
  tokenizer::EncodeOptions encode;
  encode.add_bos = false;
  encode.parse_special = true;
  bool with_pieces = false;
  for (const auto& [name, target] : {std::pair<const char*, bool*>{"add_special", &encode.add_bos},
                                     {"parse_special", &encode.parse_special},
                                     {"with_pieces", &with_pieces}}) {
    const auto it = b.find(name);
    if (it == b.end() || it->is_null()) continue;
    if (!it->is_boolean())
      return send_error(res, invalid_request(std::string("'") + name + "' must be true or false", name));
    *target = it->get<bool>();
  }
  const std::vector<int32_t> ids = model->tokenizer.encode(content->get<std::string>(), encode);
  json tokens = json::array();
  for (const int32_t id : ids) {
    if (with_pieces) {
      tokens.push_back({{"id", id}, {"piece", model->tokenizer.token_to_piece(id, true)}});
    } else {
      tokens.push_back(id);
    }
  }
  send_json(res, {{"tokens", tokens}});
}

void HttpServer::Impl::handle_detokenize(const httplib::Request& req, httplib::Response& res) {
  const std::shared_ptr<const ServedModel> model = core.model();
  if (model == nullptr) return send_error(res, loading_error());
  std::variant<json, ApiError> body = parse_body(req.body);
  if (const ApiError* e = std::get_if<ApiError>(&body)) return send_error(res, *e);
  const json& b = std::get<json>(body);
  const auto tokens = b.find("tokens");
  const std::string bad =
      "'tokens' must be a list of token ids from 0 to " + std::to_string(model->tokenizer.num_tokens() - 1);
  if (tokens == b.end() || !tokens->is_array()) return send_error(res, invalid_request(bad, "tokens"));
  std::vector<int32_t> ids;
  for (const json& t : *tokens) {
    if (!t.is_number_integer() || t.get<int64_t>() < 0 ||
        t.get<int64_t>() >= static_cast<int64_t>(model->tokenizer.num_tokens())) {
      return send_error(res, invalid_request(bad, "tokens"));
    }
    ids.push_back(static_cast<int32_t>(t.get<int64_t>()));
  }
  tokenizer::DecodeOptions decode;
  decode.strip_leading_space = false;
  send_json(res, {{"content", model->tokenizer.decode(ids, decode)}});
}

HttpServer::HttpServer(ServeCore& core, ServeMetrics& metrics, ServeOptions options)
    : m_impl(std::make_unique<Impl>(core, metrics, std::move(options))) {
  Impl& s = *m_impl;
  const ServeOptions& o = s.options;
  const int num_threads = o.num_http_threads > 0
                              ? o.num_http_threads
                              : static_cast<int>(std::max<int64_t>(64, o.max_requests_in_flight / 2)) + 8;
  s.server.new_task_queue = [num_threads] { return new httplib::ThreadPool(static_cast<size_t>(num_threads)); };
  s.server.set_payload_max_length(o.max_body_bytes);
  s.server.set_read_timeout(o.read_timeout_seconds, 0);
  s.server.set_write_timeout(o.write_timeout_seconds, 0);
  // Each connection's one request is read through a GuardedStream with these limits.
  s.server.limits.max_request_bytes = o.max_body_bytes + s.server.limits.max_header_bytes + (size_t{64} << 10);
  s.server.limits.read_timeout = std::chrono::seconds(o.read_timeout_seconds);
  s.server.limits.write_timeout = std::chrono::seconds(o.write_timeout_seconds);
  s.server.limits.request_timeout = std::chrono::seconds(std::max(60, 6 * o.read_timeout_seconds));
  // SO_REUSEADDR only: httplib's default also sets SO_REUSEPORT, which would let a second
  // server share the port silently. The socket is kept to widen the listen backlog after bind.
  s.server.set_socket_options([&s](socket_t sock) {
    const int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    s.listen_socket = sock;
  });
  s.install_routes();
}

HttpServer::~HttpServer() { stop(); }

void HttpServer::set_request_log(std::function<void(const RequestLogEntry&)> log) {
  m_impl->request_log = std::move(log);
}

const ServeOptions& HttpServer::options() const { return m_impl->options; }

Result<int> HttpServer::bind() {
  Impl& s = *m_impl;
  const ServeOptions& o = s.options;
  if (o.port < 0 || o.port > 65535) return make_error(ErrorCode::InvalidArgument, "port must be 0 to 65535");
  int port = o.port;
  if (port == 0) {
    port = s.server.bind_to_any_port(o.host);
    if (port < 0) port = 0;
  } else if (!s.server.bind_to_port(o.host, port)) {
    port = 0;
  }
  if (port == 0) {
    return make_error(ErrorCode::IoError, "cannot listen on " + o.host + ":" + std::to_string(o.port) +
                                              " (address in use, or not an address of this machine)");
  }
  // httplib listens with a backlog of 5; dozens of clients connecting at once need more.
  if (s.listen_socket >= 0) ::listen(s.listen_socket, SOMAXCONN);
  s.is_bound = true;
  return port;
}

Status HttpServer::listen() {
  Impl& s = *m_impl;
  if (!s.is_bound) return make_error(ErrorCode::InvalidArgument, "bind() the server before listen()");
  s.is_listening = true;
  const bool is_clean = s.is_stop_requested || s.server.listen_after_bind();
  s.is_listening = false;
  if (!is_clean) return make_error(ErrorCode::IoError, "the server stopped with a socket error");
  return {};
}

void HttpServer::stop() {
  Impl& s = *m_impl;
  s.is_stop_requested = true;
  // A listen() about to start would miss a stop sent before it runs.
  while (s.is_listening && !s.server.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  s.server.stop();
}

}  // namespace iwb::serve
