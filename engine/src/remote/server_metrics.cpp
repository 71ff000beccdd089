// Each serving engine's metric names mapped onto ServerSnapshot (vLLM's meanings). The names
// come from the engines' own sources: vLLM vllm/v1/metrics/loggers.py and spec_decode/metrics.py,
// SGLang python/sglang/srt/metrics/collector.py, llama.cpp tools/server (server_task_result_metrics),
// ours engine/src/serve/serve_metrics.cpp. docs/remote.md has the table.
#include "iwb/engine/remote/server_metrics.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <map>
#include <string_view>
#include <unordered_map>

namespace iwb::remote {
namespace {

struct Prefix {
  ServerKind kind;
  std::string_view prefix;
};
constexpr Prefix kPrefixes[] = {
    {ServerKind::Iwb, "iwb:"},
    {ServerKind::Vllm, "vllm:"},
    {ServerKind::Sglang, "sglang:"},
    {ServerKind::LlamaCpp, "llamacpp:"},
};

double parse_bound(const std::string& le) {
  if (le == "+Inf" || le == "Inf" || le == "inf") return std::numeric_limits<double>::infinity();
  double v = std::numeric_limits<double>::quiet_NaN();
  std::from_chars(le.data(), le.data() + le.size(), v);
  return v;
}

// The samples of one scrape by sample name, whatever family they came in.
class Scrape {
 public:
  explicit Scrape(const std::vector<MetricFamily>& families) {
    for (const MetricFamily& f : families) {
      for (const MetricSample& s : f.samples) m_by_name[s.name].push_back(&s);
    }
  }

  // The sum over label sets of the samples named `name`; nullopt when there are none.
  std::optional<double> sum(const std::string& name) const {
    const auto it = m_by_name.find(name);
    if (it == m_by_name.end()) return std::nullopt;
    double total = 0;
    for (const MetricSample* s : it->second) total += s->value;
    return total;
  }

  // A ratio gauge (KV-cache usage): several engines' fractions average, they do not add up.
  std::optional<double> mean(const std::string& name) const {
    const auto it = m_by_name.find(name);
    if (it == m_by_name.end() || it->second.empty()) return std::nullopt;
    return *sum(name) / static_cast<double>(it->second.size());
  }

  // A counter as prometheus_client writes it (base_total) or as written by hand without _total.
  std::optional<double> counter(const std::string& base) const {
    if (auto v = sum(base + "_total")) return v;
    return sum(base);
  }

  // Summed per value of one label (spec decoding's position), in the label's numeric order.
  std::vector<double> by_position(const std::string& name) const {
    std::vector<double> out;
    const auto it = m_by_name.find(name);
    if (it == m_by_name.end()) return out;
    for (const MetricSample* s : it->second) {
      const auto pos = s->labels.find("position");
      if (pos == s->labels.end()) continue;
      size_t index = 0;
      const auto [end, ec] = std::from_chars(pos->second.data(), pos->second.data() + pos->second.size(), index);
      if (ec != std::errc() || end != pos->second.data() + pos->second.size() || index > 4096) continue;
      if (out.size() <= index) out.resize(index + 1, 0.0);
      out[index] += s->value;
    }
    return out;
  }

  // base_bucket{le=...}, base_sum and base_count summed over label sets. Series (label sets
  // without le) may have different bounds; only the bounds all of them have are kept, so the
  // cumulative counts stay cumulative.
  std::optional<ScrapedHistogram> histogram(const std::string& base) const {
    const auto buckets = m_by_name.find(base + "_bucket");
    if (buckets == m_by_name.end()) return std::nullopt;
    std::map<std::map<std::string, std::string>, std::map<double, double>> series;
    for (const MetricSample* s : buckets->second) {
      const auto le = s->labels.find("le");
      if (le == s->labels.end()) continue;
      const double bound = parse_bound(le->second);
      if (std::isnan(bound)) continue;
      std::map<std::string, std::string> key = s->labels;
      key.erase("le");
      series[key][bound] += s->value;
    }
    if (series.empty()) return std::nullopt;
    std::map<double, double> merged = series.begin()->second;
    for (auto it = std::next(series.begin()); it != series.end(); ++it) {
      for (auto m = merged.begin(); m != merged.end();) {
        const auto found = it->second.find(m->first);
        if (found == it->second.end()) {
          m = merged.erase(m);
        } else {
          m->second += found->second;
          ++m;
        }
      }
    }
    ScrapedHistogram h;
    h.sum = sum(base + "_sum").value_or(0.0);
    h.count = sum(base + "_count").value_or(0.0);
    for (const auto& [bound, count] : merged) {
      h.upper_bounds.push_back(bound);
      h.cumulative_counts.push_back(count);
    }
    if (h.upper_bounds.empty() || !std::isinf(h.upper_bounds.back())) {
      h.upper_bounds.push_back(std::numeric_limits<double>::infinity());
      h.cumulative_counts.push_back(h.count);
    }
    return h;
  }

 private:
  std::unordered_map<std::string, std::vector<const MetricSample*>> m_by_name;
};

template <typename T>
std::optional<T> first_of(std::optional<T> a, std::optional<T> b) {
  return a ? a : b;
}

// vLLM's names, which `iwb serve` uses too under its own prefix.
void map_vllm_like(const Scrape& m, const std::string& p, ServerSnapshot* s) {
  s->num_requests_running = m.sum(p + "num_requests_running");
  s->num_requests_waiting = m.sum(p + "num_requests_waiting");
  s->kv_cache_usage = first_of(m.mean(p + "kv_cache_usage_perc"), m.mean(p + "gpu_cache_usage_perc"));  // < 0.10
  s->num_preemptions = m.counter(p + "num_preemptions");
  s->prefix_cache_queries = first_of(m.counter(p + "prefix_cache_queries"), m.counter(p + "gpu_prefix_cache_queries"));
  s->prefix_cache_hits = first_of(m.counter(p + "prefix_cache_hits"), m.counter(p + "gpu_prefix_cache_hits"));
  s->prompt_tokens = m.counter(p + "prompt_tokens");
  s->generation_tokens = m.counter(p + "generation_tokens");
  s->num_requests_finished = m.counter(p + "request_success");  // every finished_reason
  s->spec_num_drafts = m.counter(p + "spec_decode_num_drafts");
  s->spec_num_draft_tokens = m.counter(p + "spec_decode_num_draft_tokens");
  s->spec_num_accepted_tokens = m.counter(p + "spec_decode_num_accepted_tokens");
  s->spec_accepted_per_position = m.by_position(p + "spec_decode_num_accepted_tokens_per_pos_total");
  if (s->spec_accepted_per_position.empty()) {
    s->spec_accepted_per_position = m.by_position(p + "spec_decode_num_accepted_tokens_per_pos");
  }
  s->time_to_first_token = m.histogram(p + "time_to_first_token_seconds");
  s->inter_token_latency =
      first_of(m.histogram(p + "inter_token_latency_seconds"), m.histogram(p + "time_per_output_token_seconds"));
  s->e2e_request_latency = m.histogram(p + "e2e_request_latency_seconds");
}

// SGLang (python/sglang/srt/metrics/collector.py). Its prefix-cache figure is the gauge
// sglang:cache_hit_rate, a hit ratio over recent batches that cannot be turned into counters; the
// counters come from sglang:cached_tokens_total (cached prompt tokens) over
// sglang:prompt_tokens_total (all prompt tokens) where the server has the former, else stay empty.
// Speculative decoding is only gauges there (spec_accept_length, spec_accept_rate): no counters.
void map_sglang(const Scrape& m, ServerSnapshot* s) {
  s->num_requests_running = m.sum("sglang:num_running_reqs");
  s->num_requests_waiting = m.sum("sglang:num_queue_reqs");
  s->kv_cache_usage = m.mean("sglang:token_usage");
  s->num_preemptions = m.counter("sglang:num_retracted_requests");  // retraction is SGLang's preemption
  s->prefix_cache_hits = m.counter("sglang:cached_tokens");
  if (s->prefix_cache_hits) s->prefix_cache_queries = m.counter("sglang:prompt_tokens");
  s->prompt_tokens = m.counter("sglang:prompt_tokens");
  s->generation_tokens = m.counter("sglang:generation_tokens");
  s->num_requests_finished = m.counter("sglang:num_requests");
  s->time_to_first_token = m.histogram("sglang:time_to_first_token_seconds");
  s->inter_token_latency =
      first_of(m.histogram("sglang:inter_token_latency_seconds"), m.histogram("sglang:time_per_output_token_seconds"));
  s->e2e_request_latency = m.histogram("sglang:e2e_request_latency_seconds");
}

// llama-server (tools/server, /metrics with --metrics): no histograms and no finished-request
// counter. Its prompt_tokens_total leaves out the tokens reused from the cache
// (prompt_tokens_cached_total), so the prefix-cache queries are the two together.
void map_llamacpp(const Scrape& m, ServerSnapshot* s) {
  s->num_requests_running = m.sum("llamacpp:requests_processing");
  s->num_requests_waiting = m.sum("llamacpp:requests_deferred");
  s->kv_cache_usage = m.mean("llamacpp:kv_cache_usage_ratio");  // builds before the unified KV cache
  s->prompt_tokens = m.counter("llamacpp:prompt_tokens");
  s->prefix_cache_hits = m.counter("llamacpp:prompt_tokens_cached");
  if (s->prefix_cache_hits && s->prompt_tokens) s->prefix_cache_queries = *s->prompt_tokens + *s->prefix_cache_hits;
  s->generation_tokens = m.counter("llamacpp:tokens_predicted");
  s->spec_num_drafts = m.counter("llamacpp:spec_decode_num_drafts");
  // Older builds: tokens_drafted_total and tokens_drafted_accepted_total.
  s->spec_num_draft_tokens =
      first_of(m.counter("llamacpp:spec_decode_num_draft_tokens"), m.counter("llamacpp:tokens_drafted"));
  s->spec_num_accepted_tokens =
      first_of(m.counter("llamacpp:spec_decode_num_accepted_tokens"), m.counter("llamacpp:tokens_drafted_accepted"));
  s->spec_accepted_per_position = m.by_position("llamacpp:spec_decode_num_accepted_tokens_per_pos_total");
}

// b − a; a decrease means the server restarted, and the count since is b.
double grown(double a, double b) { return b >= a ? b - a : b; }

std::optional<double> counter_grown(const std::optional<double>& a, const std::optional<double>& b) {
  if (!b) return std::nullopt;
  if (!a) return b;  // not exported before (labelled series appear with their first event)
  return grown(*a, *b);
}

std::optional<ScrapedHistogram> histogram_grown(const std::optional<ScrapedHistogram>& a,
                                                const std::optional<ScrapedHistogram>& b) {
  if (!b) return std::nullopt;
  if (!a || a->upper_bounds != b->upper_bounds || b->count < a->count) return b;
  ScrapedHistogram d = *b;
  for (size_t i = 0; i < d.cumulative_counts.size(); ++i) {
    d.cumulative_counts[i] = std::max(0.0, b->cumulative_counts[i] - a->cumulative_counts[i]);
  }
  d.sum = b->sum - a->sum;
  d.count = b->count - a->count;
  return d;
}

}  // namespace

const char* server_kind_name(ServerKind kind) {
  switch (kind) {
    case ServerKind::Unknown: return "unknown";
    case ServerKind::Iwb: return "iwb serve";
    case ServerKind::Vllm: return "vLLM";
    case ServerKind::Sglang: return "SGLang";
    case ServerKind::LlamaCpp: return "llama-server";
    case ServerKind::OpenAiNoMetrics: return "OpenAI-compatible, no metrics";
  }
  return "unknown";
}

// The prefix most families carry (a server also exports process_*, python_gc_*, http_* ...).
ServerKind detect_server_kind(const std::vector<MetricFamily>& families) {
  size_t counts[std::size(kPrefixes)] = {};
  for (const MetricFamily& f : families) {
    for (size_t i = 0; i < std::size(kPrefixes); ++i) {
      if (std::string_view(f.name).substr(0, kPrefixes[i].prefix.size()) == kPrefixes[i].prefix) ++counts[i];
    }
  }
  size_t best = 0;
  for (size_t i = 1; i < std::size(kPrefixes); ++i) {
    if (counts[i] > counts[best]) best = i;
  }
  return counts[best] > 0 ? kPrefixes[best].kind : ServerKind::OpenAiNoMetrics;
}

ServerSnapshot map_server_metrics(const std::vector<MetricFamily>& families) {
  ServerSnapshot s;
  s.kind = detect_server_kind(families);
  const Scrape m(families);
  switch (s.kind) {
    case ServerKind::Iwb: map_vllm_like(m, "iwb:", &s); break;
    case ServerKind::Vllm: map_vllm_like(m, "vllm:", &s); break;
    case ServerKind::Sglang: map_sglang(m, &s); break;
    case ServerKind::LlamaCpp: map_llamacpp(m, &s); break;
    case ServerKind::Unknown:
    case ServerKind::OpenAiNoMetrics: break;
  }
  return s;
}

ServerSnapshot counter_difference(const ServerSnapshot& a, const ServerSnapshot& b) {
  ServerSnapshot d = b;  // gauges, kind and time: b's
  d.num_preemptions = counter_grown(a.num_preemptions, b.num_preemptions);
  d.prefix_cache_queries = counter_grown(a.prefix_cache_queries, b.prefix_cache_queries);
  d.prefix_cache_hits = counter_grown(a.prefix_cache_hits, b.prefix_cache_hits);
  d.prompt_tokens = counter_grown(a.prompt_tokens, b.prompt_tokens);
  d.generation_tokens = counter_grown(a.generation_tokens, b.generation_tokens);
  d.num_requests_finished = counter_grown(a.num_requests_finished, b.num_requests_finished);
  d.spec_num_drafts = counter_grown(a.spec_num_drafts, b.spec_num_drafts);
  d.spec_num_draft_tokens = counter_grown(a.spec_num_draft_tokens, b.spec_num_draft_tokens);
  d.spec_num_accepted_tokens = counter_grown(a.spec_num_accepted_tokens, b.spec_num_accepted_tokens);
  for (size_t i = 0; i < d.spec_accepted_per_position.size(); ++i) {
    const double before = i < a.spec_accepted_per_position.size() ? a.spec_accepted_per_position[i] : 0.0;
    d.spec_accepted_per_position[i] = grown(before, b.spec_accepted_per_position[i]);
  }
  d.time_to_first_token = histogram_grown(a.time_to_first_token, b.time_to_first_token);
  d.inter_token_latency = histogram_grown(a.inter_token_latency, b.inter_token_latency);
  d.e2e_request_latency = histogram_grown(a.e2e_request_latency, b.e2e_request_latency);
  return d;
}

}  // namespace iwb::remote
