// `iwb bench-serve`: load on an OpenAI-compatible endpoint, measured from the client the way
// `vllm bench serve` measures it (TTFT of the first content token, TPOT, ITL, end-to-end;
// request, output-token and goodput throughput), with the server's own view scraped from its
// /metrics before, during and after the run. Open loop (Poisson or gamma arrivals at a request
// rate) or closed loop (a concurrency cap); a sweep runs one point per concurrency.
#pragma once

#include "iwb/engine/remote/openai_client.h"
#include "iwb/engine/remote/server_metrics.h"
#include "iwb/engine/status.h"

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace iwb::remote {

struct GoodputSlo {
  std::optional<double> ttft_ms;
  std::optional<double> tpot_ms;
  std::optional<double> e2el_ms;
};
// "ttft:500,tpot:50" (vLLM's --goodput keys ttft, tpot, e2el; values in ms).
Result<GoodputSlo> parse_goodput(const std::string& text);

struct BenchServeConfig {
  Endpoint endpoint;
  std::string model;
  std::string dataset = "random";  // random | chat | path of a file (JSONL prompts or ShareGPT JSON)
  int64_t input_len = 128;         // random: prompt tokens (approximate: words the tokenizer sees as ~1 token)
  int64_t output_len = 64;         // max_tokens, with ignore_eos so every request generates exactly this
  int64_t num_prompts = 100;
  double request_rate = 0;                 // requests/s; 0 = inf (all at once, limited by max_concurrency)
  double burstiness = 1.0;                 // gamma shape; 1 = Poisson
  int64_t max_concurrency = 0;             // 0 = no cap
  std::vector<int64_t> sweep_concurrency;  // non-empty: one run per value (closed loop, rate inf)
  int64_t shared_prefix_len = 0;           // tokens of a prefix all prompts share (prefix-cache test)
  GoodputSlo goodput;
  uint64_t seed = 0;
  // Requests sent one at a time before the first point and left out of every figure (vLLM's
  // --num-warmups): the first request a server sees pays for lazy set-up (allocations, kernel
  // choice, caches) and would otherwise stand as a latency outlier in the first point.
  int64_t num_warmups = 1;
  double scrape_interval_seconds = 1.0;  // /metrics during the run; 0 = only before and after
};

struct LatencyStats {  // milliseconds
  double mean = 0, median = 0, p90 = 0, p99 = 0, min = 0, max = 0;
  int64_t count = 0;
};
LatencyStats latency_stats(std::vector<double> values_ms);

struct RequestRecord {
  double start_seconds = 0;  // since the run began
  int64_t prompt_tokens = 0;
  int64_t output_tokens = 0;
  double ttft_ms = 0, e2e_ms = 0, tpot_ms = 0;
  std::vector<double> itl_ms;
  RemoteError error;
  std::optional<ServerTimings> server_timings;
};

// One load point: a run, or one concurrency of a sweep.
struct BenchServePoint {
  int64_t max_concurrency = 0;  // 0 = none
  double request_rate = 0;      // 0 = inf
  double duration_seconds = 0;
  int64_t num_completed = 0;
  int64_t num_failed = 0;
  std::map<std::string, int64_t> errors_by_kind;  // remote_error_kind_name → count
  int64_t total_input_tokens = 0;
  int64_t total_output_tokens = 0;
  double request_throughput = 0;      // completed requests/s
  double output_throughput = 0;       // output tokens/s
  double total_token_throughput = 0;  // (input + output) tokens/s
  double goodput = 0;                 // requests/s meeting every SLO given (0 when no SLO)
  LatencyStats ttft, tpot, itl, e2el;
  std::vector<RequestRecord> requests;
  std::vector<ServerSnapshot> server_series;   // scrapes during the point (seconds since it began)
  std::optional<ServerSnapshot> server_delta;  // after − before (counters); nullopt without /metrics
};

struct BenchServeResult {
  BenchServeConfig config;
  ServerKind server_kind = ServerKind::Unknown;
  std::string started_at;  // ISO 8601 UTC
  std::vector<BenchServePoint> points;
};

// Progress for live views: called after every finished request and scrape, on one of the load's
// threads (never two calls at once; the load waits for the call, so keep it short: copy and post).
struct BenchServeProgress {
  int point_index = 0;
  int num_points = 1;
  const BenchServePoint* point = nullptr;  // valid during the call only
};

// The whole result as JSON (what `iwb bench-serve --json` prints and the store keeps): the
// configuration without the API key, every point with its statistics, and, with_details, its
// requests and scraped series. from_json reads it back (unknown keys ignored).
std::string bench_serve_result_to_json(const BenchServeResult& result, bool with_details = true);
Result<BenchServeResult> bench_serve_result_from_json(const std::string& text);

// Runs the load (blocking). Fails only when nothing could be measured (endpoint unreachable
// before the first request, bad configuration); per-request failures are counted in points.
Result<BenchServeResult> run_bench_serve(const BenchServeConfig& config,
                                         const std::function<void(const BenchServeProgress&)>& on_progress = {},
                                         const std::atomic<bool>* cancel = nullptr);

}  // namespace iwb::remote
