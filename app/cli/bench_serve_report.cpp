// The tables of `iwb bench-serve`: the client's figures in vllm bench serve's layout and order
// (so the two outputs can be compared line by line), then what the server said it did.
#include "bench_serve_report.h"

#include <algorithm>
#include <string>

namespace iwb::cli {
namespace {

using namespace iwb::remote;

void title(std::FILE* out, const std::string& text, char fill) {
  const size_t width = 50;
  const std::string t = text.empty() ? std::string() : " " + text + " ";
  const size_t left = t.size() < width ? (width - t.size()) / 2 : 0;
  const size_t right = t.size() + left < width ? width - t.size() - left : 0;
  std::fprintf(out, "%s%s%s\n", std::string(left, fill).c_str(), t.c_str(), std::string(right, fill).c_str());
}

void row(std::FILE* out, const std::string& name, const std::string& value) {
  std::fprintf(out, "%-40s %-10s\n", name.c_str(), value.c_str());
}
void row(std::FILE* out, const std::string& name, double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%.2f", value);
  row(out, name, std::string(text));
}
void row(std::FILE* out, const std::string& name, int64_t value) { row(out, name, std::to_string(value)); }

void latency_block(std::FILE* out, const char* heading, const char* name, const LatencyStats& s) {
  title(out, heading, '-');
  row(out, std::string("Mean ") + name + " (ms):", s.mean);
  row(out, std::string("Median ") + name + " (ms):", s.median);
  row(out, std::string("P90 ") + name + " (ms):", s.p90);
  row(out, std::string("P99 ") + name + " (ms):", s.p99);
}

std::string percent(double v) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f", v * 100);
  return text;
}

// Max and mean of a gauge over the point's scrapes; "-" when the server does not export it.
std::string max_mean(const std::vector<ServerSnapshot>& series, std::optional<double> ServerSnapshot::*field,
                     bool as_percent) {
  double max = 0, sum = 0;
  int n = 0;
  for (const ServerSnapshot& s : series) {
    if (!(s.*field)) continue;
    max = n == 0 ? *(s.*field) : std::max(max, *(s.*field));
    sum += *(s.*field);
    ++n;
  }
  if (n == 0) return "-";
  char text[64];
  const double scale = as_percent ? 100 : 1;
  std::snprintf(text, sizeof text, "%.1f / %.1f", max * scale, sum / n * scale);
  return text;
}

std::string counter(const std::optional<double>& v) {
  if (!v) return "-";
  char text[32];
  std::snprintf(text, sizeof text, "%.0f", *v);
  return text;
}

void server_block(std::FILE* out, ServerKind kind, const BenchServePoint& p) {
  title(out, "Server view (/metrics)", '-');
  row(out, "Server:", server_kind_name(kind));
  if (!p.server_delta) {
    row(out, "Metrics:", "none (no /metrics, or not in a known format)");
    return;
  }
  const ServerSnapshot& d = *p.server_delta;
  row(out, "KV-cache usage max / mean (%):", max_mean(p.server_series, &ServerSnapshot::kv_cache_usage, true));
  row(out, "Requests running max / mean:", max_mean(p.server_series, &ServerSnapshot::num_requests_running, false));
  row(out, "Requests waiting max / mean:", max_mean(p.server_series, &ServerSnapshot::num_requests_waiting, false));
  row(out, "Requests finished (server):", counter(d.num_requests_finished));
  row(out, "Prompt tokens (server):", counter(d.prompt_tokens));
  row(out, "Generated tokens (server):", counter(d.generation_tokens));
  row(out, "Preemptions:", counter(d.num_preemptions));
  if (d.prefix_cache_queries && d.prefix_cache_hits && *d.prefix_cache_queries > 0) {
    row(out, "Prefix-cache hit rate (%):", percent(*d.prefix_cache_hits / *d.prefix_cache_queries));
  } else {
    row(out, "Prefix-cache hit rate (%):", "-");
  }
  if (d.spec_num_draft_tokens && d.spec_num_accepted_tokens && *d.spec_num_draft_tokens > 0) {
    row(out, "Spec. acceptance rate (%):", percent(*d.spec_num_accepted_tokens / *d.spec_num_draft_tokens));
    if (d.spec_num_drafts && *d.spec_num_drafts > 0) {
      row(out, "Spec. mean accepted length:", 1 + *d.spec_num_accepted_tokens / *d.spec_num_drafts);
      // vLLM's per-position figure: drafts whose token at this position was accepted.
      std::string positions;
      for (const double a : d.spec_accepted_per_position)
        positions += (positions.empty() ? "" : " ") + percent(a / *d.spec_num_drafts);
      if (!positions.empty()) row(out, "Acceptance per position (%):", positions);
    }
  }
}

}  // namespace

void print_bench_serve_point(std::FILE* out, const BenchServeResult& result, size_t index) {
  const BenchServePoint& p = result.points.at(index);
  std::string heading = "Serving Benchmark Result";
  if (result.points.size() > 1)
    heading += " (" + std::to_string(index + 1) + "/" + std::to_string(result.points.size()) + ")";
  title(out, heading, '=');
  row(out, "Successful requests:", p.num_completed);
  if (p.num_failed > 0) {
    std::string kinds;
    for (const auto& [kind, n] : p.errors_by_kind)
      kinds += (kinds.empty() ? "" : ", ") + kind + " " + std::to_string(n);
    row(out, "Failed requests:", std::to_string(p.num_failed) + " (" + kinds + ")");
  }
  row(out, "Maximum request concurrency:", p.max_concurrency > 0 ? std::to_string(p.max_concurrency) : "none");
  char rate[32];
  std::snprintf(rate, sizeof rate, "%g", p.request_rate);
  row(out, "Request rate (req/s):", p.request_rate > 0 ? std::string(rate) : "inf");
  row(out, "Benchmark duration (s):", p.duration_seconds);
  row(out, "Total input tokens:", p.total_input_tokens);
  row(out, "Total generated tokens:", p.total_output_tokens);
  row(out, "Request throughput (req/s):", p.request_throughput);
  const GoodputSlo& slo = result.config.goodput;
  if (slo.ttft_ms || slo.tpot_ms || slo.e2el_ms) row(out, "Request goodput (req/s):", p.goodput);
  row(out, "Output token throughput (tok/s):", p.output_throughput);
  row(out, "Total Token throughput (tok/s):", p.total_token_throughput);
  latency_block(out, "Time to First Token", "TTFT", p.ttft);
  latency_block(out, "Time per Output Token (excl. 1st token)", "TPOT", p.tpot);
  latency_block(out, "Inter-token Latency", "ITL", p.itl);
  latency_block(out, "End-to-end Latency", "E2EL", p.e2el);
  server_block(out, result.server_kind, p);
  title(out, "", '=');
}

void print_bench_serve_sweep(std::FILE* out, const BenchServeResult& result) {
  std::fprintf(out, "\n%11s %9s %11s %10s %10s %10s %10s %8s\n", "concurrency", "req/s", "out tok/s", "TTFT p50",
               "TTFT p99", "ITL p50", "ITL p99", "failed");
  for (const BenchServePoint& p : result.points) {
    std::fprintf(out, "%11lld %9.2f %11.2f %10.2f %10.2f %10.2f %10.2f %8lld\n",
                 static_cast<long long>(p.max_concurrency), p.request_throughput, p.output_throughput, p.ttft.median,
                 p.ttft.p99, p.itl.median, p.itl.p99, static_cast<long long>(p.num_failed));
  }
}

}  // namespace iwb::cli
