// OpenAiClient over cpp-httplib: one connection per call (calls may run on many threads at
// once), the stream read through a content receiver into CompletionStreamDecoder, and every
// transport failure mapped onto a RemoteErrorKind.
#include "iwb/engine/remote/openai_client.h"

#include "sse_stream.h"

#include <httplib.h>
#include <nlohmann/json.hpp>

#include <cctype>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <thread>

namespace iwb::remote {
namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

constexpr size_t kMaxErrorBody = 64 * 1024;

// "https://host:8000/prefix" → {"https://host:8000", "/prefix"}.
struct SplitUrl {
  std::string scheme_host_port;
  std::string path_prefix;
};

Result<SplitUrl> split_url(const std::string& base_url) {
  const std::string root = endpoint_root(base_url);
  if (root.empty()) return make_error(ErrorCode::InvalidArgument, "no server URL given");
  std::string scheme = "http";
  std::string rest = root;
  if (const size_t sep = root.find("://"); sep != std::string::npos) {
    scheme = root.substr(0, sep);
    rest = root.substr(sep + 3);
    for (char& c : scheme) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  if (scheme != "http" && scheme != "https") {
    return make_error(ErrorCode::InvalidArgument,
                      "unsupported URL scheme '" + scheme + "' in " + base_url + " (use http:// or https://)");
  }
#ifndef CPPHTTPLIB_OPENSSL_SUPPORT
  if (scheme == "https") {
    return make_error(ErrorCode::Unsupported,
                      "https is not supported by this build (cpp-httplib without OpenSSL): " + base_url);
  }
#endif
  const size_t slash = rest.find('/');
  SplitUrl out;
  out.scheme_host_port = scheme + "://" + rest.substr(0, slash);
  if (slash != std::string::npos) out.path_prefix = rest.substr(slash);
  if (rest.empty() || slash == 0)
    return make_error(ErrorCode::InvalidArgument, "no host in the server URL " + base_url);
  return out;
}

void set_timeout(double seconds, const std::function<void(time_t, time_t)>& set) {
  const double s = seconds > 0 ? seconds : 1e6;
  const auto whole = static_cast<time_t>(s);
  set(whole, static_cast<time_t>((s - static_cast<double>(whole)) * 1e6));
}

std::unique_ptr<httplib::Client> make_client(const Endpoint& endpoint, const std::string& scheme_host_port) {
  auto client = std::make_unique<httplib::Client>(scheme_host_port);
  set_timeout(endpoint.connect_timeout_seconds, [&](time_t s, time_t us) { client->set_connection_timeout(s, us); });
  set_timeout(endpoint.read_timeout_seconds, [&](time_t s, time_t us) { client->set_read_timeout(s, us); });
  set_timeout(endpoint.read_timeout_seconds, [&](time_t s, time_t us) { client->set_write_timeout(s, us); });
  if (!endpoint.api_key.empty()) client->set_bearer_token_auth(endpoint.api_key);
  client->set_follow_location(false);
  return client;
}

std::string describe_transport_error(httplib::Error error) { return httplib::to_string(error); }

std::string seconds_text(double seconds) {
  char text[32];
  std::snprintf(text, sizeof text, "%g s", seconds);
  return text;
}

// A GET whose failures become Status messages naming the URL.
Result<std::string> get_text(const Endpoint& endpoint, const std::string& path, bool is_not_found_expected) {
  auto url = split_url(endpoint.base_url);
  if (!url) return url.status();
  auto client = make_client(endpoint, url->scheme_host_port);
  const std::string full = url->scheme_host_port + url->path_prefix + path;
  httplib::Result res = client->Get(url->path_prefix + path);
  if (!res) {
    const httplib::Error e = res.error();
    const char* what = e == httplib::Error::Connection          ? "cannot connect to "
                       : e == httplib::Error::ConnectionTimeout ? "timed out connecting to "
                       : e == httplib::Error::Read ? "no complete answer (timeout or dropped connection) from "
                                                   : "request failed for ";
    return make_error(ErrorCode::IoError, std::string(what) + full + " (" + describe_transport_error(e) + ")");
  }
  if (res->status == 404 && is_not_found_expected) {
    return make_error(ErrorCode::NotFound, full + " does not exist on this server (HTTP 404)");
  }
  if (res->status < 200 || res->status >= 300) {
    return make_error(ErrorCode::IoError,
                      full + " answered HTTP " + std::to_string(res->status) + ": " + server_error_message(res->body));
  }
  return res->body;
}

// Polls the caller's cancel flag while a request runs and shuts the socket down when it is set,
// so a cancel during a long silence does not wait for the read timeout.
class CancelWatcher {
 public:
  CancelWatcher(const std::atomic<bool>* cancel, httplib::Client* client) {
    if (cancel == nullptr) return;
    m_thread = std::thread([this, cancel, client] {
      std::unique_lock<std::mutex> lock(m_mutex);
      while (!m_is_finished) {
        if (cancel->load()) client->stop();  // repeated: a stop before the socket opens is a no-op
        m_wake.wait_for(lock, std::chrono::milliseconds(20));
      }
    });
  }
  ~CancelWatcher() {
    if (!m_thread.joinable()) return;
    {
      std::lock_guard<std::mutex> lock(m_mutex);
      m_is_finished = true;
    }
    m_wake.notify_all();
    m_thread.join();
  }

 private:
  std::mutex m_mutex;
  std::condition_variable m_wake;
  bool m_is_finished = false;
  std::thread m_thread;
};

json request_json(const RemoteRequest& request) {
  json body = {{"model", request.model},
               {"stream", true},
               {"stream_options", {{"include_usage", true}}},
               {"max_tokens", request.max_tokens}};
  if (request.is_chat) {
    json messages = json::array();
    for (const RemoteMessage& m : request.messages) messages.push_back({{"role", m.role}, {"content", m.content}});
    body["messages"] = std::move(messages);
  } else {
    body["prompt"] = request.prompt;
  }
  if (request.temperature) body["temperature"] = *request.temperature;
  if (request.top_p) body["top_p"] = *request.top_p;
  if (request.seed) body["seed"] = *request.seed;
  if (request.ignore_eos) body["ignore_eos"] = true;
  if (!request.response_format.empty()) {
    json format = json::parse(request.response_format, nullptr, /*allow_exceptions=*/false);
    if (format.is_object()) body["response_format"] = std::move(format);
  }
  if (!request.guided_regex.empty()) {
    body["guided_regex"] = request.guided_regex;
  }
  if (request.enable_thinking) body["chat_template_kwargs"] = {{"enable_thinking", *request.enable_thinking}};
  if (!request.reasoning_effort.empty()) body["reasoning_effort"] = request.reasoning_effort;
  return body;
}

}  // namespace

std::string endpoint_root(const std::string& base_url) {
  std::string root = base_url;
  while (!root.empty() && (root.back() == '/' || std::isspace(static_cast<unsigned char>(root.back()))))
    root.pop_back();
  size_t begin = 0;
  while (begin < root.size() && std::isspace(static_cast<unsigned char>(root[begin]))) ++begin;
  root.erase(0, begin);
  if (root.size() >= 3 && root.compare(root.size() - 3, 3, "/v1") == 0) root.resize(root.size() - 3);
  while (!root.empty() && root.back() == '/') root.pop_back();
  return root;
}

const char* remote_error_kind_name(RemoteErrorKind kind) {
  switch (kind) {
    case RemoteErrorKind::None: return "none";
    case RemoteErrorKind::ConnectFailed: return "connect";
    case RemoteErrorKind::Timeout: return "timeout";
    case RemoteErrorKind::HttpError: return "http";
    case RemoteErrorKind::Dropped: return "dropped";
    case RemoteErrorKind::Malformed: return "malformed";
    case RemoteErrorKind::Cancelled: return "cancelled";
  }
  return "unknown";
}

OpenAiClient::OpenAiClient(Endpoint endpoint) : m_endpoint(std::move(endpoint)) {}

Result<std::vector<std::string>> OpenAiClient::list_models() const {
  try {
    auto body = get_text(m_endpoint, "/v1/models", false);
    if (!body) return body.status();
    const json value = json::parse(*body, nullptr, false);
    auto data = value.is_object() ? value.find("data") : value.end();
    if (value.is_discarded() || !value.is_object() || data == value.end() || !data->is_array()) {
      return make_error(ErrorCode::CorruptFile,
                        "the /v1/models answer is not an OpenAI model list: " + server_error_message(*body));
    }
    std::vector<std::string> ids;
    for (const json& model : *data) {
      if (model.is_object() && model.contains("id") && model["id"].is_string())
        ids.push_back(model["id"].get<std::string>());
    }
    return ids;
  } catch (const std::exception& e) {
    return make_error(ErrorCode::IoError, std::string("listing models failed: ") + e.what());
  }
}

Result<std::string> OpenAiClient::fetch_metrics_text() const {
  try {
    return get_text(m_endpoint, "/metrics", true);
  } catch (const std::exception& e) {
    return make_error(ErrorCode::IoError, std::string("reading /metrics failed: ") + e.what());
  }
}

StreamedCompletion OpenAiClient::stream(const RemoteRequest& request,
                                        const std::function<bool(std::string_view delta, double seconds)>& on_content,
                                        const std::atomic<bool>* cancel) const {
  StreamedCompletion out;
  const Clock::time_point start = Clock::now();
  auto seconds_since = [](Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); };
  try {
    auto url = split_url(m_endpoint.base_url);
    if (!url) {
      out.error = {RemoteErrorKind::ConnectFailed, 0, url.error_message()};
      return out;
    }
    auto client = make_client(m_endpoint, url->scheme_host_port);
    CompletionStreamDecoder decoder(&out, on_content);
    int status = 0;
    std::string error_body;
    Clock::time_point last_bytes = start;

    httplib::Request req;
    req.method = "POST";
    req.path = url->path_prefix + (request.is_chat ? "/v1/chat/completions" : "/v1/completions");
    req.set_header("Content-Type", "application/json");
    req.set_header("Accept", "text/event-stream");
    req.body = request_json(request).dump();
    req.response_handler = [&](const httplib::Response& res) {
      status = res.status;
      return !(cancel && cancel->load());
    };
    req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
      last_bytes = Clock::now();
      if (cancel && cancel->load()) return false;
      if (status < 200 || status >= 300) {
        if (error_body.size() < kMaxErrorBody) error_body.append(data, std::min(n, kMaxErrorBody - error_body.size()));
        return true;
      }
      return decoder.feed(std::string_view(data, n), std::chrono::duration<double>(last_bytes - start).count());
    };

    httplib::Response res;
    httplib::Error error = httplib::Error::Success;
    {
      CancelWatcher watcher(cancel, client.get());
      client->send(req, res, error);
    }
    const double now = seconds_since(start);
    out.e2e_seconds = now;
    const bool is_cancelled = cancel && cancel->load();

    if (decoder.has_failed()) return out;  // malformed, a server error event, or on_content's cancel
    if (is_cancelled && !decoder.is_done()) {
      out.error = {RemoteErrorKind::Cancelled, 0, "cancelled"};
      return out;
    }
    const std::string where = url->scheme_host_port + req.path;
    switch (error) {
      case httplib::Error::Success:
        if (status < 200 || status >= 300) {
          out.error = {RemoteErrorKind::HttpError, status,
                       "HTTP " + std::to_string(status) + " from " + where + ": " + server_error_message(error_body)};
        } else {
          decoder.finish(now);
        }
        return out;
      case httplib::Error::Connection:
      case httplib::Error::SSLConnection:
      case httplib::Error::SSLLoadingCerts:
      case httplib::Error::SSLServerVerification:
        out.error = {RemoteErrorKind::ConnectFailed, 0,
                     "cannot connect to " + where + " (" + describe_transport_error(error) + ")"};
        return out;
      case httplib::Error::ConnectionTimeout:
        out.error = {RemoteErrorKind::Timeout, 0,
                     "no connection to " + where + " within " + seconds_text(m_endpoint.connect_timeout_seconds)};
        return out;
      case httplib::Error::Canceled: out.error = {RemoteErrorKind::Cancelled, 0, "cancelled"}; return out;
      default: break;
    }
    // A read or write that failed: the server went silent past the read timeout, or the
    // connection broke. A stream already complete counts as received.
    if (decoder.is_done() || (!out.finish_reason.empty() && status >= 200 && status < 300)) return out;
    const double silence = std::chrono::duration<double>(Clock::now() - last_bytes).count();
    if (m_endpoint.read_timeout_seconds > 0 && silence >= 0.9 * m_endpoint.read_timeout_seconds) {
      out.error = {RemoteErrorKind::Timeout, status,
                   "no data from " + where + " for " + seconds_text(silence) + " (read timeout " +
                       seconds_text(m_endpoint.read_timeout_seconds) + ")"};
    } else {
      out.error = {RemoteErrorKind::Dropped, status,
                   "the connection to " + where + " broke after " + std::to_string(out.token_seconds.size()) +
                       " content chunks (" + describe_transport_error(error) + ")"};
    }
    return out;
  } catch (const std::exception& e) {
    out.e2e_seconds = seconds_since(start);
    if (out.error.kind == RemoteErrorKind::None)
      out.error = {RemoteErrorKind::Malformed, 0, std::string("client error: ") + e.what()};
    return out;
  }
}

}  // namespace iwb::remote
