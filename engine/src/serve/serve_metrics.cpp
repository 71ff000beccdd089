// ServeMetrics: counters and gauges folded from engine steps, histograms from finished
// requests' token times, and the Prometheus text format (one HELP and TYPE line per family,
// counters as <name>_total (in HELP and TYPE too, as prometheus_client writes them),
// histograms as cumulative _bucket{le=...}, _sum and _count).
#include "iwb/engine/serve/serve_metrics.h"

#include <algorithm>
#include <charconv>
#include <cmath>

namespace iwb::serve {
namespace {

// vLLM's buckets for the same histograms.
const std::vector<double> kTtftBuckets = {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1,  0.25, 0.5,
                                          0.75,  1.0,   2.5,  5.0,  7.5,  10.0, 20.0, 40.0, 80.0, 160.0};
const std::vector<double> kItlBuckets = {0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2,  0.3,  0.4, 0.5,
                                         0.75, 1.0,   2.5,  5.0,   7.5, 10.0, 20.0, 40.0, 80.0};
const std::vector<double> kRequestBuckets = {0.3,  0.5,  0.8,  1.0,  1.5,  2.0,   2.5,   5.0,   10.0,  15.0,
                                             20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0};

std::string number_text(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  char buffer[64];
  const auto [end, ec] = std::to_chars(buffer, buffer + sizeof buffer, v);
  return ec == std::errc() ? std::string(buffer, end) : "0";
}

// Label values escape backslash, double quote and newline.
std::string escape_label(const std::string& value) {
  std::string out;
  for (const char c : value) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '"')
      out += "\\\"";
    else if (c == '\n')
      out += "\\n";
    else
      out += c;
  }
  return out;
}

class Writer {
 public:
  explicit Writer(const std::string& model_name) : m_label("model_name=\"" + escape_label(model_name) + "\"") {}

  void family(const std::string& name, const char* type, const char* help) {
    m_text += "# HELP " + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
  }
  void sample(const std::string& name, double value, const std::string& extra_labels = {}) {
    m_text +=
        name + "{" + m_label + (extra_labels.empty() ? "" : "," + extra_labels) + "} " + number_text(value) + "\n";
  }
  void gauge(const std::string& name, const char* help, double value) {
    family(name, "gauge", help);
    sample(name, value);
  }
  // Counters are exposed as prometheus_client does in format 0.0.4: HELP, TYPE and the sample
  // all named <name>_total (its parser then calls the family <name>).
  void counter(const std::string& name, const char* help, double value) {
    family(name + "_total", "counter", help);
    sample(name + "_total", value);
  }
  void histogram(const std::string& name, const char* help, const Histogram& h) {
    family(name, "histogram", help);
    uint64_t cumulative = 0;
    for (size_t i = 0; i < h.counts().size(); ++i) {
      cumulative += h.counts()[i];
      const std::string le = i < h.upper_bounds().size() ? number_text(h.upper_bounds()[i]) : "+Inf";
      sample(name + "_bucket", static_cast<double>(cumulative), "le=\"" + le + "\"");
    }
    sample(name + "_sum", h.sum());
    sample(name + "_count", static_cast<double>(h.count()));
  }
  std::string take() { return std::move(m_text); }

 private:
  std::string m_label;
  std::string m_text;
};

// Growth of an engine's cumulative counter since it was last seen; a smaller value means a
// new engine (a model reload) whose count started again from zero.
uint64_t counter_delta(int64_t value, int64_t* last) {
  const int64_t delta = value >= *last ? value - *last : value;
  *last = value;
  return static_cast<uint64_t>(std::max<int64_t>(delta, 0));
}

}  // namespace

Histogram::Histogram(std::vector<double> upper_bounds)
    : m_bounds(std::move(upper_bounds)), m_counts(m_bounds.size() + 1) {}

void Histogram::observe(double value) {
  const auto it = std::lower_bound(m_bounds.begin(), m_bounds.end(), value);  // first bound >= value
  ++m_counts[static_cast<size_t>(it - m_bounds.begin())];
  ++m_count;
  m_sum += value;
}

const char* openai_finish_reason(FinishReason reason) {
  switch (reason) {
    case FinishReason::EndOfGeneration:
    case FinishReason::StopString: return "stop";
    case FinishReason::MaxTokens:
    case FinishReason::ContextFull: return "length";
    case FinishReason::Aborted: return "abort";
    case FinishReason::Error: return "error";
  }
  return "error";
}

ServeMetrics::ServeMetrics()
    : m_time_to_first_token(kTtftBuckets),
      m_inter_token_latency(kItlBuckets),
      m_e2e_latency(kRequestBuckets),
      m_queue_time(kRequestBuckets) {
  for (const char* reason : {"stop", "length", "abort", "error"}) m_values.requests_finished[reason] = 0;
}

void ServeMetrics::observe_step(const StepResult& step) {
  std::lock_guard lock(m_mutex);
  const StepStats& s = step.stats;
  m_values.num_requests_running = s.num_running;
  m_values.num_requests_waiting = s.num_waiting;
  m_values.kv_cache_usage = s.kv.num_blocks > 0 ? static_cast<double>(s.kv.num_used_blocks) / s.kv.num_blocks : 0.0;
  m_values.prefix_cache_queries += counter_delta(s.kv.num_prefix_query_tokens, &m_last_prefix_queries);
  m_values.prefix_cache_hits += counter_delta(s.kv.num_prefix_hit_tokens, &m_last_prefix_hits);
  m_values.prompt_tokens += static_cast<uint64_t>(std::max(s.num_prompt_tokens, 0));
  m_values.generation_tokens += step.tokens.size();
  m_values.num_preemptions += static_cast<uint64_t>(std::max(s.num_preemptions, 0));

  const spec::SpeculationStats& spec = s.speculation;
  m_values.spec_num_drafts += static_cast<uint64_t>(spec.num_verify_steps);
  m_values.spec_num_draft_tokens += static_cast<uint64_t>(spec.num_drafted);
  m_values.spec_num_accepted_tokens += static_cast<uint64_t>(spec.num_accepted);
  if (m_values.spec_accepted_per_position.size() < spec.accepted_per_position.size()) {
    m_values.spec_accepted_per_position.resize(spec.accepted_per_position.size());
  }
  for (size_t i = 0; i < spec.accepted_per_position.size(); ++i) {
    m_values.spec_accepted_per_position[i] += static_cast<uint64_t>(spec.accepted_per_position[i]);
  }

  for (const RequestFinished& f : step.finished) {
    ++m_values.requests_finished[openai_finish_reason(f.reason)];
    m_queue_time.observe(f.queued_seconds);
    if (!f.token_seconds.empty()) {
      m_time_to_first_token.observe(f.token_seconds.front());
      for (size_t i = 1; i < f.token_seconds.size(); ++i) {
        m_inter_token_latency.observe(f.token_seconds[i] - f.token_seconds[i - 1]);
      }
      m_e2e_latency.observe(f.token_seconds.back());
    } else {
      m_e2e_latency.observe(f.queued_seconds + f.prompt_seconds);
    }
  }
}

ServeMetricValues ServeMetrics::values() const {
  std::lock_guard lock(m_mutex);
  return m_values;
}

std::string ServeMetrics::prometheus_text(const std::string& model_name) const {
  std::lock_guard lock(m_mutex);
  const ServeMetricValues& v = m_values;
  Writer w(model_name);
  w.gauge("iwb:num_requests_running", "Requests whose sequences hold KV-cache blocks (prefilling or decoding).",
          static_cast<double>(v.num_requests_running));
  w.gauge("iwb:num_requests_waiting", "Requests waiting for admission (new, or preempted).",
          static_cast<double>(v.num_requests_waiting));
  w.gauge("iwb:kv_cache_usage_perc", "KV-cache usage: blocks owned by sequences over all blocks (1 = full).",
          v.kv_cache_usage);
  w.counter("iwb:prefix_cache_queries", "Prompt tokens looked up in the prefix cache.",
            static_cast<double>(v.prefix_cache_queries));
  w.counter("iwb:prefix_cache_hits", "Prompt tokens found in the prefix cache.",
            static_cast<double>(v.prefix_cache_hits));
  w.counter("iwb:prompt_tokens", "Prompt tokens computed (prefix-cache hits excluded, recomputation included).",
            static_cast<double>(v.prompt_tokens));
  w.counter("iwb:generation_tokens", "Tokens generated.", static_cast<double>(v.generation_tokens));
  w.counter("iwb:num_preemptions", "Sequences preempted (their KV blocks taken back, recomputed later).",
            static_cast<double>(v.num_preemptions));

  w.family("iwb:request_success_total", "counter", "Finished requests by finish reason (stop, length, abort, error).");
  for (const auto& [reason, count] : v.requests_finished) {
    w.sample("iwb:request_success_total", static_cast<double>(count), "finished_reason=\"" + reason + "\"");
  }

  w.counter("iwb:spec_decode_num_drafts", "Speculative decoding: drafts verified (one per sequence per step).",
            static_cast<double>(v.spec_num_drafts));
  w.counter("iwb:spec_decode_num_draft_tokens", "Speculative decoding: draft tokens verified.",
            static_cast<double>(v.spec_num_draft_tokens));
  w.counter("iwb:spec_decode_num_accepted_tokens", "Speculative decoding: draft tokens accepted.",
            static_cast<double>(v.spec_num_accepted_tokens));
  w.family("iwb:spec_decode_num_accepted_tokens_per_pos_total", "counter",
           "Speculative decoding: draft tokens accepted at each draft position (0 = the first guess).");
  for (size_t i = 0; i < v.spec_accepted_per_position.size(); ++i) {
    w.sample("iwb:spec_decode_num_accepted_tokens_per_pos_total", static_cast<double>(v.spec_accepted_per_position[i]),
             "position=\"" + std::to_string(i) + "\"");
  }

  w.histogram("iwb:time_to_first_token_seconds", "Time from the request's arrival to its first token.",
              m_time_to_first_token);
  w.histogram("iwb:inter_token_latency_seconds", "Time between consecutive generated tokens.", m_inter_token_latency);
  w.histogram("iwb:e2e_request_latency_seconds", "Time from the request's arrival to its last token.", m_e2e_latency);
  w.histogram("iwb:request_queue_time_seconds", "Time requests waited before their first step.", m_queue_time);
  return w.take();
}

}  // namespace iwb::serve
