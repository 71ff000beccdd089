// What a serving engine's /metrics says, mapped from each engine's own names onto one set of
// meanings (vLLM's): `iwb serve` (iwb:), vLLM (vllm:), SGLang (sglang:) and llama-server
// (llamacpp:). docs/remote.md lists the mapping. A metric the server does not export stays
// empty (nullopt), never 0: "not reported" and "zero" look different in the panels.
#pragma once

#include "iwb/engine/remote/prometheus_text.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace iwb::remote {

enum class ServerKind {
  Unknown,          // not probed yet
  Iwb,              // iwb:*
  Vllm,             // vllm:*
  Sglang,           // sglang:*
  LlamaCpp,         // llamacpp:*
  OpenAiNoMetrics,  // answers /v1/models but has no (recognisable) /metrics
};

const char* server_kind_name(ServerKind kind);  // "iwb serve", "vLLM", "SGLang", "llama-server", ...
// From the metric names' prefixes; OpenAiNoMetrics when none is recognised.
ServerKind detect_server_kind(const std::vector<MetricFamily>& families);

// A cumulative histogram as scraped: bucket upper bounds (the last is +Inf) and cumulative counts.
struct ScrapedHistogram {
  std::vector<double> upper_bounds;
  std::vector<double> cumulative_counts;
  double sum = 0;
  double count = 0;
};

// One scrape, summed over label sets (several models or engines behind one server add up).
// Counters are cumulative since the server started; subtract two snapshots for a run's share.
struct ServerSnapshot {
  double seconds = 0;  // when scraped, seconds since the scraper started (set by the caller)
  ServerKind kind = ServerKind::Unknown;
  std::optional<double> num_requests_running;
  std::optional<double> num_requests_waiting;
  std::optional<double> kv_cache_usage;                 // 0..1
  std::optional<double> num_preemptions;                // counter
  std::optional<double> prefix_cache_queries;           // counter, tokens
  std::optional<double> prefix_cache_hits;              // counter, tokens
  std::optional<double> prompt_tokens;                  // counter
  std::optional<double> generation_tokens;              // counter
  std::optional<double> num_requests_finished;          // counter, all finish reasons
  std::optional<double> spec_num_drafts;                // counter
  std::optional<double> spec_num_draft_tokens;          // counter
  std::optional<double> spec_num_accepted_tokens;       // counter
  std::vector<double> spec_accepted_per_position;       // counters [position]; empty when not exported
  std::optional<ScrapedHistogram> time_to_first_token;  // seconds
  std::optional<ScrapedHistogram> inter_token_latency;  // seconds (vLLM's time_per_output_token too)
  std::optional<ScrapedHistogram> e2e_request_latency;  // seconds
};

ServerSnapshot map_server_metrics(const std::vector<MetricFamily>& families);

// b − a for every counter and histogram both have (gauges: b's value). For a run's share.
// A counter only b has counts from zero (servers add a labelled series with its first event); one
// that went down (a restarted server) counts from zero too: b. A histogram whose bounds changed: b.
ServerSnapshot counter_difference(const ServerSnapshot& a, const ServerSnapshot& b);

}  // namespace iwb::remote
