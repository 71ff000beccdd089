// prom_dump FILE: our Prometheus parser's reading of FILE as JSON, for the Python tests that
// compare it with prometheus_client's; --snapshot FILE: map_server_metrics' reading; --difference
// BEFORE AFTER: counter_difference of the two. Non-finite values are strings ("NaN", "+Inf",
// "-Inf"). A file that does not parse: {"error": ...} and exit status 1.
#include "iwb/engine/remote/prometheus_text.h"
#include "iwb/engine/remote/server_metrics.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>

using namespace iwb::remote;
using nlohmann::json;

namespace {

json number(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  return v;
}

json optional_number(const std::optional<double>& v) { return v ? number(*v) : json(nullptr); }

json histogram(const std::optional<ScrapedHistogram>& h) {
  if (!h) return nullptr;
  json bounds = json::array(), counts = json::array();
  for (const double b : h->upper_bounds) bounds.push_back(number(b));
  for (const double c : h->cumulative_counts) counts.push_back(number(c));
  return {
      {"upper_bounds", bounds}, {"cumulative_counts", counts}, {"sum", number(h->sum)}, {"count", number(h->count)}};
}

json families_json(const std::vector<MetricFamily>& families) {
  json out = json::array();
  for (const MetricFamily& f : families) {
    json samples = json::array();
    for (const MetricSample& s : f.samples) {
      samples.push_back({{"name", s.name},
                         {"labels", s.labels},
                         {"value", number(s.value)},
                         {"timestamp_ms", s.timestamp_ms ? json(*s.timestamp_ms) : json(nullptr)}});
    }
    out.push_back({{"name", f.name}, {"type", metric_type_name(f.type)}, {"help", f.help}, {"samples", samples}});
  }
  return out;
}

json snapshot_json(const ServerSnapshot& s) {
  return {{"kind", server_kind_name(s.kind)},
          {"num_requests_running", optional_number(s.num_requests_running)},
          {"num_requests_waiting", optional_number(s.num_requests_waiting)},
          {"kv_cache_usage", optional_number(s.kv_cache_usage)},
          {"num_preemptions", optional_number(s.num_preemptions)},
          {"prefix_cache_queries", optional_number(s.prefix_cache_queries)},
          {"prefix_cache_hits", optional_number(s.prefix_cache_hits)},
          {"prompt_tokens", optional_number(s.prompt_tokens)},
          {"generation_tokens", optional_number(s.generation_tokens)},
          {"num_requests_finished", optional_number(s.num_requests_finished)},
          {"spec_num_drafts", optional_number(s.spec_num_drafts)},
          {"spec_num_draft_tokens", optional_number(s.spec_num_draft_tokens)},
          {"spec_num_accepted_tokens", optional_number(s.spec_num_accepted_tokens)},
          {"spec_accepted_per_position", s.spec_accepted_per_position},
          {"time_to_first_token", histogram(s.time_to_first_token)},
          {"inter_token_latency", histogram(s.inter_token_latency)},
          {"e2e_request_latency", histogram(s.e2e_request_latency)}};
}

// The families of FILE, or prints the error and returns nullopt.
std::optional<std::vector<MetricFamily>> read_families(const char* path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    std::cout << json{{"error", std::string("cannot open ") + path}}.dump() << "\n";
    return std::nullopt;
  }
  std::stringstream text;
  text << in.rdbuf();
  auto parsed = parse_prometheus_text(text.str());
  if (!parsed) {
    std::cout << json{{"error", parsed.error_message()}}.dump(-1, ' ', false, json::error_handler_t::replace) << "\n";
    return std::nullopt;
  }
  return std::move(parsed).value();
}

}  // namespace

int main(int argc, char** argv) {
  const auto print = [](const json& j) {
    std::cout << j.dump(1, ' ', false, json::error_handler_t::replace) << "\n";
    return 0;
  };
  if (argc == 2) {
    const auto families = read_families(argv[1]);
    return families ? print(families_json(*families)) : 1;
  }
  if (argc == 3 && std::strcmp(argv[1], "--snapshot") == 0) {
    const auto families = read_families(argv[2]);
    return families ? print(snapshot_json(map_server_metrics(*families))) : 1;
  }
  if (argc == 4 && std::strcmp(argv[1], "--difference") == 0) {
    const auto before = read_families(argv[2]);
    const auto after = before ? read_families(argv[3]) : std::nullopt;
    if (!after) return 1;
    return print(snapshot_json(counter_difference(map_server_metrics(*before), map_server_metrics(*after))));
  }
  std::cerr << "usage: prom_dump FILE | prom_dump --snapshot FILE | prom_dump --difference BEFORE AFTER\n";
  return 2;
}
