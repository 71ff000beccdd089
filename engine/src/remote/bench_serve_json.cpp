// BenchServeResult ⇄ JSON, for `iwb bench-serve --json` and the results store. Absent server
// figures stay null (not 0); a histogram's +Inf bound is written as null too (JSON has no
// infinity) and read back as +Inf.
#include "bench_serve_internal.h"

#include <nlohmann/json.hpp>

#include <limits>

namespace iwb::remote {
namespace {

using json = nlohmann::json;

json optional_json(const std::optional<double>& v) { return v ? json(*v) : json(nullptr); }

std::optional<double> optional_from(const json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_number()) return std::nullopt;
  return it->get<double>();
}

template <typename T>
T value_or(const json& j, const char* key, T fallback) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  try {
    return it->get<T>();
  } catch (const json::exception&) {
    return fallback;
  }
}

json histogram_json(const std::optional<ScrapedHistogram>& h) {
  if (!h) return nullptr;
  json bounds = json::array();
  for (const double b : h->upper_bounds) bounds.push_back(std::isfinite(b) ? json(b) : json(nullptr));
  return {{"upper_bounds", bounds}, {"cumulative_counts", h->cumulative_counts}, {"sum", h->sum}, {"count", h->count}};
}

std::optional<ScrapedHistogram> histogram_from(const json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_object()) return std::nullopt;
  ScrapedHistogram h;
  for (const json& b : it->value("upper_bounds", json::array())) {
    h.upper_bounds.push_back(b.is_number() ? b.get<double>() : std::numeric_limits<double>::infinity());
  }
  h.cumulative_counts = value_or(*it, "cumulative_counts", std::vector<double>{});
  h.sum = value_or(*it, "sum", 0.0);
  h.count = value_or(*it, "count", 0.0);
  return h;
}

// The optional figures of a snapshot, in one table so writing and reading stay in step.
using SnapshotField = std::optional<double> ServerSnapshot::*;
constexpr std::pair<const char*, SnapshotField> kSnapshotFields[] = {
    {"num_requests_running", &ServerSnapshot::num_requests_running},
    {"num_requests_waiting", &ServerSnapshot::num_requests_waiting},
    {"kv_cache_usage", &ServerSnapshot::kv_cache_usage},
    {"num_preemptions", &ServerSnapshot::num_preemptions},
    {"prefix_cache_queries", &ServerSnapshot::prefix_cache_queries},
    {"prefix_cache_hits", &ServerSnapshot::prefix_cache_hits},
    {"prompt_tokens", &ServerSnapshot::prompt_tokens},
    {"generation_tokens", &ServerSnapshot::generation_tokens},
    {"num_requests_finished", &ServerSnapshot::num_requests_finished},
    {"spec_num_drafts", &ServerSnapshot::spec_num_drafts},
    {"spec_num_draft_tokens", &ServerSnapshot::spec_num_draft_tokens},
    {"spec_num_accepted_tokens", &ServerSnapshot::spec_num_accepted_tokens},
};

json snapshot_json(const ServerSnapshot& s) {
  json j = {{"seconds", s.seconds}, {"kind", server_kind_name(s.kind)}};
  for (const auto& [name, field] : kSnapshotFields) j[name] = optional_json(s.*field);
  j["spec_accepted_per_position"] = s.spec_accepted_per_position;
  j["time_to_first_token"] = histogram_json(s.time_to_first_token);
  j["inter_token_latency"] = histogram_json(s.inter_token_latency);
  j["e2e_request_latency"] = histogram_json(s.e2e_request_latency);
  return j;
}

ServerSnapshot snapshot_from(const json& j) {
  ServerSnapshot s;
  s.seconds = value_or(j, "seconds", 0.0);
  s.kind = server_kind_from_name(value_or(j, "kind", std::string()));
  for (const auto& [name, field] : kSnapshotFields) s.*field = optional_from(j, name);
  s.spec_accepted_per_position = value_or(j, "spec_accepted_per_position", std::vector<double>{});
  s.time_to_first_token = histogram_from(j, "time_to_first_token");
  s.inter_token_latency = histogram_from(j, "inter_token_latency");
  s.e2e_request_latency = histogram_from(j, "e2e_request_latency");
  return s;
}

json stats_json(const LatencyStats& s) {
  return {{"mean", s.mean}, {"median", s.median}, {"p90", s.p90},    {"p99", s.p99},
          {"min", s.min},   {"max", s.max},       {"count", s.count}};
}

LatencyStats stats_from(const json& j, const char* key) {
  LatencyStats s;
  auto it = j.find(key);
  if (it == j.end() || !it->is_object()) return s;
  s.mean = value_or(*it, "mean", 0.0);
  s.median = value_or(*it, "median", 0.0);
  s.p90 = value_or(*it, "p90", 0.0);
  s.p99 = value_or(*it, "p99", 0.0);
  s.min = value_or(*it, "min", 0.0);
  s.max = value_or(*it, "max", 0.0);
  s.count = value_or(*it, "count", int64_t{0});
  return s;
}

json timings_json(const std::optional<ServerTimings>& t) {
  if (!t) return nullptr;
  return {{"prompt_n", t->prompt_n},
          {"prompt_ms", t->prompt_ms},
          {"predicted_n", t->predicted_n},
          {"predicted_ms", t->predicted_ms},
          {"cache_n", t->cache_n}};
}

RemoteErrorKind error_kind_from_name(const std::string& name) {
  for (const RemoteErrorKind k : {RemoteErrorKind::ConnectFailed, RemoteErrorKind::Timeout, RemoteErrorKind::HttpError,
                                  RemoteErrorKind::Dropped, RemoteErrorKind::Malformed, RemoteErrorKind::Cancelled}) {
    if (name == remote_error_kind_name(k)) return k;
  }
  return RemoteErrorKind::None;
}

json request_json(const RequestRecord& r) {
  json j = {{"start_seconds", r.start_seconds},
            {"prompt_tokens", r.prompt_tokens},
            {"output_tokens", r.output_tokens},
            {"ttft_ms", r.ttft_ms},
            {"tpot_ms", r.tpot_ms},
            {"e2e_ms", r.e2e_ms},
            {"itl_ms", r.itl_ms},
            {"server_timings", timings_json(r.server_timings)}};
  if (r.error.kind != RemoteErrorKind::None) {
    j["error"] = {{"kind", remote_error_kind_name(r.error.kind)},
                  {"http_status", r.error.http_status},
                  {"message", r.error.message}};
  } else {
    j["error"] = nullptr;
  }
  return j;
}

RequestRecord request_from(const json& j) {
  RequestRecord r;
  r.start_seconds = value_or(j, "start_seconds", 0.0);
  r.prompt_tokens = value_or(j, "prompt_tokens", int64_t{0});
  r.output_tokens = value_or(j, "output_tokens", int64_t{0});
  r.ttft_ms = value_or(j, "ttft_ms", 0.0);
  r.tpot_ms = value_or(j, "tpot_ms", 0.0);
  r.e2e_ms = value_or(j, "e2e_ms", 0.0);
  r.itl_ms = value_or(j, "itl_ms", std::vector<double>{});
  if (auto t = j.find("server_timings"); t != j.end() && t->is_object()) {
    ServerTimings st;
    st.prompt_n = value_or(*t, "prompt_n", int64_t{0});
    st.prompt_ms = value_or(*t, "prompt_ms", 0.0);
    st.predicted_n = value_or(*t, "predicted_n", int64_t{0});
    st.predicted_ms = value_or(*t, "predicted_ms", 0.0);
    st.cache_n = value_or(*t, "cache_n", int64_t{0});
    r.server_timings = st;
  }
  if (auto e = j.find("error"); e != j.end() && e->is_object()) {
    r.error.kind = error_kind_from_name(value_or(*e, "kind", std::string()));
    r.error.http_status = value_or(*e, "http_status", 0);
    r.error.message = value_or(*e, "message", std::string());
  }
  return r;
}

json config_json(const BenchServeConfig& c) {
  json goodput = json::object();
  if (c.goodput.ttft_ms) goodput["ttft"] = *c.goodput.ttft_ms;
  if (c.goodput.tpot_ms) goodput["tpot"] = *c.goodput.tpot_ms;
  if (c.goodput.e2el_ms) goodput["e2el"] = *c.goodput.e2el_ms;
  return {{"base_url", c.endpoint.base_url},  // never the API key
          {"connect_timeout_seconds", c.endpoint.connect_timeout_seconds},
          {"read_timeout_seconds", c.endpoint.read_timeout_seconds},
          {"model", c.model},
          {"dataset", c.dataset},
          {"input_len", c.input_len},
          {"output_len", c.output_len},
          {"num_prompts", c.num_prompts},
          {"request_rate", c.request_rate},
          {"burstiness", c.burstiness},
          {"max_concurrency", c.max_concurrency},
          {"sweep_concurrency", c.sweep_concurrency},
          {"shared_prefix_len", c.shared_prefix_len},
          {"goodput", goodput},
          {"seed", c.seed},
          {"scrape_interval_seconds", c.scrape_interval_seconds}};
}

BenchServeConfig config_from(const json& j) {
  BenchServeConfig c;
  c.endpoint.base_url = value_or(j, "base_url", std::string());
  c.endpoint.connect_timeout_seconds = value_or(j, "connect_timeout_seconds", c.endpoint.connect_timeout_seconds);
  c.endpoint.read_timeout_seconds = value_or(j, "read_timeout_seconds", c.endpoint.read_timeout_seconds);
  c.model = value_or(j, "model", std::string());
  c.dataset = value_or(j, "dataset", c.dataset);
  c.input_len = value_or(j, "input_len", c.input_len);
  c.output_len = value_or(j, "output_len", c.output_len);
  c.num_prompts = value_or(j, "num_prompts", c.num_prompts);
  c.request_rate = value_or(j, "request_rate", c.request_rate);
  c.burstiness = value_or(j, "burstiness", c.burstiness);
  c.max_concurrency = value_or(j, "max_concurrency", c.max_concurrency);
  c.sweep_concurrency = value_or(j, "sweep_concurrency", std::vector<int64_t>{});
  c.shared_prefix_len = value_or(j, "shared_prefix_len", c.shared_prefix_len);
  if (auto g = j.find("goodput"); g != j.end() && g->is_object()) {
    c.goodput.ttft_ms = optional_from(*g, "ttft");
    c.goodput.tpot_ms = optional_from(*g, "tpot");
    c.goodput.e2el_ms = optional_from(*g, "e2el");
  }
  c.seed = value_or(j, "seed", c.seed);
  c.scrape_interval_seconds = value_or(j, "scrape_interval_seconds", c.scrape_interval_seconds);
  return c;
}

json point_json(const BenchServePoint& p, bool with_details) {
  json j = {{"max_concurrency", p.max_concurrency},
            {"request_rate", p.request_rate},
            {"duration_seconds", p.duration_seconds},
            {"num_completed", p.num_completed},
            {"num_failed", p.num_failed},
            {"errors_by_kind", p.errors_by_kind},
            {"total_input_tokens", p.total_input_tokens},
            {"total_output_tokens", p.total_output_tokens},
            {"request_throughput", p.request_throughput},
            {"output_throughput", p.output_throughput},
            {"total_token_throughput", p.total_token_throughput},
            {"goodput", p.goodput},
            {"ttft_ms", stats_json(p.ttft)},
            {"tpot_ms", stats_json(p.tpot)},
            {"itl_ms", stats_json(p.itl)},
            {"e2el_ms", stats_json(p.e2el)},
            {"server_delta", p.server_delta ? snapshot_json(*p.server_delta) : json(nullptr)}};
  if (with_details) {
    json requests = json::array(), series = json::array();
    for (const RequestRecord& r : p.requests) requests.push_back(request_json(r));
    for (const ServerSnapshot& s : p.server_series) series.push_back(snapshot_json(s));
    j["requests"] = std::move(requests);
    j["server_series"] = std::move(series);
  }
  return j;
}

BenchServePoint point_from(const json& j) {
  BenchServePoint p;
  p.max_concurrency = value_or(j, "max_concurrency", int64_t{0});
  p.request_rate = value_or(j, "request_rate", 0.0);
  p.duration_seconds = value_or(j, "duration_seconds", 0.0);
  p.num_completed = value_or(j, "num_completed", int64_t{0});
  p.num_failed = value_or(j, "num_failed", int64_t{0});
  p.errors_by_kind = value_or(j, "errors_by_kind", std::map<std::string, int64_t>{});
  p.total_input_tokens = value_or(j, "total_input_tokens", int64_t{0});
  p.total_output_tokens = value_or(j, "total_output_tokens", int64_t{0});
  p.request_throughput = value_or(j, "request_throughput", 0.0);
  p.output_throughput = value_or(j, "output_throughput", 0.0);
  p.total_token_throughput = value_or(j, "total_token_throughput", 0.0);
  p.goodput = value_or(j, "goodput", 0.0);
  p.ttft = stats_from(j, "ttft_ms");
  p.tpot = stats_from(j, "tpot_ms");
  p.itl = stats_from(j, "itl_ms");
  p.e2el = stats_from(j, "e2el_ms");
  if (auto d = j.find("server_delta"); d != j.end() && d->is_object()) p.server_delta = snapshot_from(*d);
  for (const json& r : j.value("requests", json::array())) p.requests.push_back(request_from(r));
  for (const json& s : j.value("server_series", json::array())) p.server_series.push_back(snapshot_from(s));
  return p;
}

template <typename T>
Result<T> parse_object(const std::string& text, const char* what, T (*read)(const json&)) {
  const json j = json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object())
    return make_error(ErrorCode::CorruptFile, std::string("stored ") + what + " is not a JSON object");
  try {
    return read(j);
  } catch (const std::exception& e) {
    return make_error(ErrorCode::CorruptFile, std::string("stored ") + what + " cannot be read: " + e.what());
  }
}

BenchServeResult result_from(const json& j) {
  BenchServeResult r;
  if (auto c = j.find("config"); c != j.end() && c->is_object()) r.config = config_from(*c);
  r.server_kind = server_kind_from_name(value_or(j, "server_kind", std::string()));
  r.started_at = value_or(j, "started_at", std::string());
  for (const json& p : j.value("points", json::array())) r.points.push_back(point_from(p));
  return r;
}

}  // namespace

ServerKind server_kind_from_name(const std::string& name) {
  for (const ServerKind k :
       {ServerKind::Iwb, ServerKind::Vllm, ServerKind::Sglang, ServerKind::LlamaCpp, ServerKind::OpenAiNoMetrics}) {
    if (name == server_kind_name(k)) return k;
  }
  return ServerKind::Unknown;
}

std::string bench_serve_config_to_json(const BenchServeConfig& config) {
  return config_json(config).dump(-1, ' ', false, json::error_handler_t::replace);
}
Result<BenchServeConfig> bench_serve_config_from_json(const std::string& text) {
  return parse_object<BenchServeConfig>(text, "bench-serve configuration", &config_from);
}
std::string bench_serve_point_to_json(const BenchServePoint& point, bool with_details) {
  return point_json(point, with_details).dump(-1, ' ', false, json::error_handler_t::replace);
}
Result<BenchServePoint> bench_serve_point_from_json(const std::string& text) {
  return parse_object<BenchServePoint>(text, "bench-serve point", &point_from);
}

std::string bench_serve_result_to_json(const BenchServeResult& result, bool with_details) {
  json points = json::array();
  for (const BenchServePoint& p : result.points) points.push_back(point_json(p, with_details));
  const json j = {{"config", config_json(result.config)},
                  {"server_kind", server_kind_name(result.server_kind)},
                  {"started_at", result.started_at},
                  {"points", std::move(points)}};
  // Server messages may hold invalid UTF-8: replaced rather than failing the whole dump.
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

Result<BenchServeResult> bench_serve_result_from_json(const std::string& text) {
  return parse_object<BenchServeResult>(text, "bench-serve result", &result_from);
}

}  // namespace iwb::remote
