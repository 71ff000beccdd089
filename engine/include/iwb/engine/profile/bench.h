// llama-bench style throughput tests on a loaded engine: ppN (prefill N random tokens into a
// fresh context) and tgN (generate N tokens one at a time after a short prompt), repeated,
// as tokens/s mean and sample standard deviation, with MFU (pp) and MBU (tg) against the
// probed ceilings; each optionally at a context depth D ("pp512 @ d8192": the test runs after
// D tokens are already in the KV cache, llama-bench's -d). The results are rows of the results
// store.
#pragma once

#include "iwb/engine/profile/metrics.h"
#include "iwb/engine/status.h"

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace iwb {

class Engine;

// One test's result: a row of the results store's bench_runs table.
struct BenchResult {
  int64_t id = 0;                        // row id once stored
  std::string date;                      // ISO 8601 UTC
  std::string device_id;                 // "cpu"
  std::string device_name;
  std::string model_path;
  std::string model_name;
  std::string model_identity;            // model_identity(): file size and a hash of its first MiB
  std::string architecture;
  std::string file_type;                 // "Q4_K_M"
  uint64_t model_size_bytes = 0;
  uint64_t num_params = 0;
  // As llama-bench reports the model (not kept in the results store): llama_model_desc's
  // "qwen2 1.5B Q4_K - Medium" and the bytes of all tensors, where model_size_bytes is the file's.
  std::string llama_model_type;
  uint64_t tensor_bytes = 0;
  int num_threads = 0;
  std::string test;                      // "pp512", "tg128", "tg128 @ d8192"
  int64_t num_depth_tokens = 0;          // tokens already in the KV cache when the test ran
  int64_t num_prompt_tokens = 0;         // pp: the prompt; tg: the short prompt before generating
  int64_t num_generated_tokens = 0;      // tg: tokens timed; pp: 0
  int num_repetitions = 0;
  double tokens_per_s_mean = 0;
  double tokens_per_s_sd = 0;            // sample standard deviation (n - 1); 0 for one repetition
  std::vector<double> tokens_per_s;      // each repetition
  std::optional<double> mbu, mfu;        // empty without a probe of the device
  // The peak MFU divides by: the probe's int8 dot-product rate when the weights are quantized
  // (their matmuls run as 8-bit integer dot products on the CPU), else its float FMA rate.
  std::string mfu_peak_kind;
  double predicted_flops_per_token = 0;  // the cost model's work per token for this test
  double predicted_bytes_per_token = 0;
  std::string probe_date;                // the probe MBU/MFU were computed against; empty if none
  // tgN with BenchOptions::paired_read_probe: the read-only bandwidth (bytes/s) probed right
  // before each repetition, and the median of the repetitions' MBU, each against its own probe
  // (paired_mbus). Not kept in the results store.
  std::vector<double> paired_read_bytes_per_s;
  std::optional<double> mbu_paired;
  std::vector<double> paired_mbus() const;  // each repetition's, in order; empty when unpaired
};

struct BenchOptions {
  int64_t num_prompt_tokens = 512;       // ppN; 0 skips the test
  int64_t num_generated_tokens = 128;    // tgN; 0 skips the test
  int64_t tg_prompt_tokens = 4;          // the short prompt tg generates after
  // Context depths: every test runs once per depth, after that many random tokens were
  // prefilled (not timed) into the KV cache. {0}: an empty context, as without -d.
  std::vector<int64_t> depths = {0};
  int num_repetitions = 5;
  uint64_t seed = 1234;                  // the random prompts' token ids
  bool is_warmup = true;                 // one short untimed prefill and decode first
  // When set, called right before each tgN repetition for the read-only memory bandwidth of
  // that moment (bytes/s; ReadBandwidthProbe::measure, `iwb bench --paired-probe`): on a shared
  // host the bandwidth drifts within minutes, and a repetition divided by its own probe gives
  // an MBU that a stored probe of another minute cannot. 0 or less: that repetition unpaired.
  std::function<double()> paired_read_probe;
};

// Called before each timed repetition: test name, repetition (0-based), repetitions.
using BenchProgress = std::function<void(const std::string& test, int repetition, int num_repetitions)>;

// Runs the tests on `engine`, which must be idle (no request in progress) and hold a context
// of at least bench_context_length(options) tokens; at a depth it needs prefix caching (the
// depth's KV blocks are kept there between repetitions, as llama-bench keeps its depth state).
// `probe`, when given, is the device's ceilings for MBU and MFU. Profiling is switched off for
// the run and restored afterwards.
Result<std::vector<BenchResult>> run_bench(Engine& engine, const BenchOptions& options,
                                           const std::optional<ProbeResult>& probe, const BenchProgress& progress = {});

// The context the tests need: the deepest depth plus max(ppN, tg prompt + tgN + 1) tokens.
int64_t bench_context_length(const BenchOptions& options);

// "pp512", "tg128 @ d8192": llama-bench's names.
std::string bench_test_name(const char* kind, int64_t num_tokens, int64_t depth);

// "size=1117320768;fnv1a64-first-MiB=89ab...": the file's size and the 64-bit FNV-1a hash of
// its first MiB (header, metadata and the first tensors): cheap to compute on a multi-GiB file,
// and different for different conversions or quantizations of a model.
Result<std::string> model_identity(const std::string& path);

// Mean and sample standard deviation.
void mean_and_sd(const std::vector<double>& values, double* mean, double* sd);
// The middle value (the mean of the middle two for an even count); 0 for none.
double median(std::vector<double> values);

}  // namespace iwb
