// Serving metrics with the meanings vLLM gives them, under our own prefix `iwb:` (vLLM's is
// `vllm:`), rendered as Prometheus text exposition (format 0.0.4). Whoever steps the engine
// calls observe_step() after every step; GET /metrics renders. Thread-safe. docs/serving.md
// lists every metric.
#pragma once

#include "iwb/engine/runtime/engine.h"

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace iwb::serve {

// A Prometheus histogram: cumulative counts of observations at or below each upper bound.
class Histogram {
 public:
  explicit Histogram(std::vector<double> upper_bounds);
  void observe(double value);
  const std::vector<double>& upper_bounds() const { return m_bounds; }
  const std::vector<uint64_t>& counts() const { return m_counts; }  // per bucket, not cumulative; last: +Inf
  uint64_t count() const { return m_count; }
  double sum() const { return m_sum; }

 private:
  std::vector<double> m_bounds;
  std::vector<uint64_t> m_counts;
  uint64_t m_count = 0;
  double m_sum = 0;
};

// Plain values of every metric (tests and the application read these; /metrics renders them).
struct ServeMetricValues {
  int64_t num_requests_running = 0;   // after the last step
  int64_t num_requests_waiting = 0;
  double kv_cache_usage = 0;          // used blocks / all blocks, 0..1
  uint64_t prefix_cache_queries = 0;  // prompt tokens looked up in the prefix cache
  uint64_t prefix_cache_hits = 0;     // of them, found
  uint64_t prompt_tokens = 0;         // prompt tokens computed (cache hits excluded, recomputation included)
  uint64_t generation_tokens = 0;
  uint64_t num_preemptions = 0;
  std::map<std::string, uint64_t> requests_finished;  // by finished_reason: stop, length, abort, error
  uint64_t spec_num_drafts = 0;                        // sequence-steps that verified a draft
  uint64_t spec_num_draft_tokens = 0;
  uint64_t spec_num_accepted_tokens = 0;
  std::vector<uint64_t> spec_accepted_per_position;    // [position]
};

class ServeMetrics {
 public:
  ServeMetrics();

  // One engine step: gauges from its stats, counters from its tokens, and the latency
  // histograms from the requests it finished.
  void observe_step(const StepResult& step);

  ServeMetricValues values() const;
  // Every metric with label model_name="<model_name>", as vLLM labels them.
  std::string prometheus_text(const std::string& model_name) const;

 private:
  mutable std::mutex m_mutex;
  ServeMetricValues m_values;
  int64_t m_last_prefix_queries = 0;  // the engine's cumulative counters when last seen
  int64_t m_last_prefix_hits = 0;
  Histogram m_time_to_first_token;
  Histogram m_inter_token_latency;
  Histogram m_e2e_latency;
  Histogram m_queue_time;
};

// OpenAI's finish_reason for an engine FinishReason: "stop", "length", "abort" or "error".
const char* openai_finish_reason(FinishReason reason);

}  // namespace iwb::serve
