// Serving metrics as pure functions of timings: time to first token, inter-token latency
// percentiles, prompt and generation rates, and utilisation of the probed ceilings (MBU for
// memory bandwidth, MFU for arithmetic). The GUI charts these per request and over time.
#pragma once

#include "iwb/engine/profile/cost_model.h"
#include "iwb/engine/profile/kernel_record.h"
#include "iwb/engine/profile/machine_probe.h"

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

namespace iwb {

struct RequestFinished;

// The p-th percentile (p in 0..100) by linear interpolation between closest ranks, NumPy's
// default (Hyndman & Fan type 7): sort, h = (n - 1) * p / 100, then
// x[floor(h)] + (h - floor(h)) * (x[floor(h) + 1] - x[floor(h)]). 0 for no values; p is
// clamped to 0..100.
double percentile(std::span<const double> values, double p);

struct LatencySummary {
  int64_t count = 0;
  double mean = 0, min = 0, max = 0;
  double p50 = 0, p90 = 0, p99 = 0;
};
LatencySummary summarize_latencies(std::span<const double> seconds);

// Gaps between consecutive token times: n times give n - 1 latencies.
std::vector<double> inter_token_latencies(std::span<const double> token_seconds);

// The roofs utilisation is measured against; zero when the device was never probed.
struct Ceilings {
  double bandwidth_bytes_per_s = 0;
  double peak_flops = 0;
  // The integer dot-product rate (the probe's peak_int8_ops): the roof of a CPU's kernels for
  // quantized weights. 0 where not measured (GPUs, older probes): MFU then uses peak_flops.
  double peak_int8_ops = 0;
  // Whether work whose matrix products run as int8 dot products (or not) is measured against
  // the int8 roof: only where one was probed.
  bool uses_int8_roof(bool int8_dot_products) const { return int8_dot_products && peak_int8_ops > 0; }
  // The compute roof of that work.
  double compute_roof(bool int8_dot_products) const {
    return uses_int8_roof(int8_dot_products) ? peak_int8_ops : peak_flops;
  }
};
Ceilings ceilings_from_probe(const ProbeResult& probe);
// True when most of the records' matrix-product FLOPs have quantized weights (which a CPU
// multiplies as int8 dot products, whose roof is Ceilings::peak_int8_ops).
bool int8_dot_products_dominate(std::span<const KernelRecord> records);

// bytes moved per token x tokens/s / bandwidth; nullopt when the bandwidth is unknown (<= 0).
std::optional<double> model_bandwidth_utilization(double bytes_per_token, double tokens_per_s,
                                                  double bandwidth_bytes_per_s);
// The bandwidth a run read at (bytes per step x steps/s) when it beat the memory roof it was
// measured against by more than 5% with more bytes a step than the caches hold (twice
// `cache_bytes`; 512 MiB when that is unknown), so they streamed from memory every step: the
// probe then ran at a slower moment than the run (a shared host's neighbours, a busy core) and
// MBU reads above 100%. nullopt otherwise, or when the roof is unknown (<= 0).
std::optional<double> bandwidth_above_roof(double bytes_per_step, double steps_per_s, double roof_bytes_per_s,
                                           uint64_t cache_bytes);
// FLOPs per token x tokens/s / peak; nullopt when the peak is unknown (<= 0).
std::optional<double> model_flops_utilization(double flops_per_token, double tokens_per_s, double peak_flops);

// One finished request's timings (RequestFinished carries them).
struct RequestTiming {
  int32_t num_prompt_tokens = 0;         // prompt tokens computed (a reused cached prefix excluded)
  double queued_seconds = 0;
  double prompt_seconds = 0;             // first step to first token
  std::vector<double> token_seconds;     // each generated token, seconds since the request was added
};
RequestTiming request_timing(const RequestFinished& finished);

struct RequestMetrics {
  double ttft_seconds = 0;               // request added -> first token (queue wait included)
  LatencySummary inter_token;            // between generated tokens
  double prompt_tokens_per_s = 0;        // computed prompt tokens / prompt_seconds
  double generation_tokens_per_s = 0;    // (n - 1) / (last - first token time): the first token
                                         // comes from the prefill, not a decode step
  std::optional<double> prefill_mfu, prefill_mbu;
  std::optional<double> decode_mbu, decode_mfu;
  double decode_bytes_per_token = 0;  // what decode_mbu counts a step reading; 0 without a cost
};
// `cost` (predict_generation for the same prompt and generated counts) gives the work per
// token; without it the utilisations stay empty, as they do for unknown ceilings.
RequestMetrics compute_request_metrics(const RequestTiming& timing, const GenerationCost* cost,
                                       const Ceilings& ceilings);

// One step's achieved rates from its kernel records, against the ceilings ("over time" charts).
struct StepUtilization {
  double step_seconds = 0;
  double kernel_seconds = 0;
  double flops_per_s = 0;                // the step's FLOPs over the whole step time
  double bytes_per_s = 0;
  std::optional<double> mbu, mfu;
};
StepUtilization step_utilization(const ProfileBatch& batch, const Ceilings& ceilings);

}  // namespace iwb
