// Serving metrics: percentiles, latencies, rates and utilisation.
#include "iwb/engine/profile/metrics.h"

#include "iwb/engine/runtime/engine.h"

#include <algorithm>
#include <cmath>

namespace iwb {

double percentile(std::span<const double> values, double p) {
  if (values.empty()) return 0;
  std::vector<double> sorted(values.begin(), values.end());
  std::sort(sorted.begin(), sorted.end());
  const double h = static_cast<double>(sorted.size() - 1) * std::clamp(p, 0.0, 100.0) / 100.0;
  const auto lo = static_cast<size_t>(std::floor(h));
  if (lo + 1 >= sorted.size()) return sorted.back();
  return sorted[lo] + (h - static_cast<double>(lo)) * (sorted[lo + 1] - sorted[lo]);
}

LatencySummary summarize_latencies(std::span<const double> seconds) {
  LatencySummary s;
  if (seconds.empty()) return s;
  s.count = static_cast<int64_t>(seconds.size());
  double sum = 0;
  s.min = s.max = seconds[0];
  for (const double v : seconds) {
    sum += v;
    s.min = std::min(s.min, v);
    s.max = std::max(s.max, v);
  }
  s.mean = sum / static_cast<double>(seconds.size());
  s.p50 = percentile(seconds, 50);
  s.p90 = percentile(seconds, 90);
  s.p99 = percentile(seconds, 99);
  return s;
}

std::vector<double> inter_token_latencies(std::span<const double> token_seconds) {
  std::vector<double> out;
  for (size_t i = 1; i < token_seconds.size(); ++i) out.push_back(token_seconds[i] - token_seconds[i - 1]);
  return out;
}

Ceilings ceilings_from_probe(const ProbeResult& probe) {
  return {probe.bandwidth_bytes_per_s(), probe.peak_flops, probe.peak_int8_ops};
}

bool int8_dot_products_dominate(std::span<const KernelRecord> records) {
  double quantized_flops = 0, float_flops = 0;
  for (const KernelRecord& r : records) {
    if (r.kind != OpKind::Matmul && r.kind != OpKind::ExpertMatmul && r.kind != OpKind::Logits) continue;
    (ggml_type_traits(r.data_type).is_quantized ? quantized_flops : float_flops) += r.flops;
  }
  return quantized_flops > float_flops;
}

std::optional<double> model_bandwidth_utilization(double bytes_per_token, double tokens_per_s,
                                                  double bandwidth_bytes_per_s) {
  if (!(bandwidth_bytes_per_s > 0)) return std::nullopt;
  return bytes_per_token * tokens_per_s / bandwidth_bytes_per_s;
}

std::optional<double> bandwidth_above_roof(double bytes_per_step, double steps_per_s, double roof_bytes_per_s,
                                           uint64_t cache_bytes) {
  constexpr double kMargin = 1.05;  // timing noise of one run, not a low probe
  constexpr double kUnknownCacheBytes = 512.0 * 1024 * 1024;
  if (!(roof_bytes_per_s > 0)) return std::nullopt;
  const double cached = cache_bytes > 0 ? 2.0 * static_cast<double>(cache_bytes) : kUnknownCacheBytes;
  if (!(bytes_per_step > cached)) return std::nullopt;
  const double bandwidth = bytes_per_step * steps_per_s;
  if (!(bandwidth > kMargin * roof_bytes_per_s)) return std::nullopt;
  return bandwidth;
}

std::optional<double> model_flops_utilization(double flops_per_token, double tokens_per_s, double peak_flops) {
  if (!(peak_flops > 0)) return std::nullopt;
  return flops_per_token * tokens_per_s / peak_flops;
}

RequestTiming request_timing(const RequestFinished& f) {
  RequestTiming t;
  t.num_prompt_tokens = f.num_prompt_tokens - f.num_reused_prompt_tokens;
  t.queued_seconds = f.queued_seconds;
  t.prompt_seconds = f.prompt_seconds;
  t.token_seconds = f.token_seconds;
  return t;
}

RequestMetrics compute_request_metrics(const RequestTiming& t, const GenerationCost* cost, const Ceilings& ceilings) {
  RequestMetrics m;
  const auto num_generated = static_cast<int64_t>(t.token_seconds.size());
  m.ttft_seconds = num_generated > 0 ? t.token_seconds[0] : t.queued_seconds + t.prompt_seconds;
  const std::vector<double> gaps = inter_token_latencies(t.token_seconds);
  m.inter_token = summarize_latencies(gaps);
  if (t.prompt_seconds > 0) m.prompt_tokens_per_s = t.num_prompt_tokens / t.prompt_seconds;
  if (num_generated > 1) {
    const double span = t.token_seconds.back() - t.token_seconds.front();
    if (span > 0) m.generation_tokens_per_s = static_cast<double>(num_generated - 1) / span;
  }
  if (cost == nullptr) return m;
  // A quantized model's products on a CPU run as int8 dot products, several times the f32 FMA
  // rate: against peak_flops a prompt of the default model read 138% MFU on a Zen 3.
  const double peak = ceilings.compute_roof(cost->int8_dot_products);
  if (t.num_prompt_tokens > 0 && m.prompt_tokens_per_s > 0) {
    const double n = t.num_prompt_tokens;
    m.prefill_mfu = model_flops_utilization(cost->prefill.flops / n, m.prompt_tokens_per_s, peak);
    m.prefill_mbu = model_bandwidth_utilization(cost->prefill.bytes / n, m.prompt_tokens_per_s,
                                                ceilings.bandwidth_bytes_per_s);
  }
  if (cost->num_decode_steps > 0 && m.generation_tokens_per_s > 0) {
    const double n = static_cast<double>(cost->num_decode_steps);
    m.decode_bytes_per_token = cost->decode.bytes / n;
    m.decode_mbu = model_bandwidth_utilization(cost->decode.bytes / n, m.generation_tokens_per_s,
                                               ceilings.bandwidth_bytes_per_s);
    m.decode_mfu = model_flops_utilization(cost->decode.flops / n, m.generation_tokens_per_s, peak);
  }
  return m;
}

StepUtilization step_utilization(const ProfileBatch& batch, const Ceilings& ceilings) {
  StepUtilization u;
  u.step_seconds = batch.step_seconds;
  u.kernel_seconds = batch.kernel_seconds();
  double flops = 0, bytes = 0;
  for (const KernelRecord& r : batch.kernels) {
    flops += r.flops;
    bytes += r.bytes;
  }
  if (batch.step_seconds > 0) {
    u.flops_per_s = flops / batch.step_seconds;
    u.bytes_per_s = bytes / batch.step_seconds;
    // One step is one unit of work here: per-step work x steps/s.
    u.mbu = model_bandwidth_utilization(bytes, 1.0 / batch.step_seconds, ceilings.bandwidth_bytes_per_s);
    u.mfu = model_flops_utilization(flops, 1.0 / batch.step_seconds,
                                    ceilings.compute_roof(int8_dot_products_dominate(batch.kernels)));
  }
  return u;
}

}  // namespace iwb
