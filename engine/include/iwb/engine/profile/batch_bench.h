// Continuous-batching throughput on a loaded engine: for each parallelism P, P requests of
// random prompts (optionally behind one shared prefix) generate together; measured are
// aggregate and per-sequence generation rates, time to first token, the KV blocks the paged
// cache used at its peak and the slots it wasted, against what a contiguous max-context
// allocation per sequence would have needed. With a shared prefix, also the time to first
// token of a prompt whose prefix is not cached against one whose prefix is.
#pragma once

#include "iwb/engine/model/model_config.h"
#include "iwb/engine/paged/kv_cache_types.h"
#include "iwb/engine/status.h"

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace iwb {

class Engine;

struct BatchBenchOptions {
  std::vector<int> parallel = {1, 2, 4, 8, 16};
  int64_t num_prompt_tokens = 128;     // random tokens of each prompt (after the shared prefix)
  int64_t num_generated_tokens = 128;  // per request
  int64_t shared_prefix_tokens = 0;    // one random prefix every prompt starts with
  uint64_t seed = 1234;
  bool is_warmup = true;               // one short untimed request first
};

// What contiguous allocation (one max-context slab per sequence) would do with the same run.
struct ContiguousComparison {
  int64_t max_context = 0;          // positions each sequence would reserve
  int64_t num_fit_in_peak = 0;      // sequences that fit the memory the paged cache used at its peak
  int64_t num_fit_in_pool = 0;      // sequences that fit the whole paged pool
  double waste = 0;                 // mean (max_context - final length) / max_context
};

struct BatchRun {
  int parallel = 0;
  int64_t num_steps = 0;
  double seconds = 0;                     // first request added to last request finished
  int64_t num_generated_tokens = 0;       // all requests
  double aggregate_tokens_per_s = 0;      // generated tokens / seconds (prefill time included)
  double decode_tokens_per_s = 0;         // tokens of steps without prompt tokens / their time
  double per_sequence_tokens_per_s = 0;   // mean over requests of (generated - 1) / their generation time
  double mean_ttft_s = 0;                 // add_request() to first token, mean over requests
  double max_ttft_s = 0;
  int64_t peak_used_blocks = 0;
  uint64_t peak_kv_bytes = 0;             // peak_used_blocks * bytes per block
  // Unused slots of allocated blocks / allocated slots, summed over steps (time-weighted), and
  // at the step with the most blocks.
  double waste = 0;
  double waste_at_peak = 0;
  int64_t num_preemptions = 0;
  double prefix_hit_rate = 0;             // prompt tokens found in the prefix cache / looked up
  ContiguousComparison contiguous;
};

struct PrefixCacheProbe {
  int64_t prefix_tokens = 0;
  int64_t prompt_tokens = 0;       // prefix + suffix
  double cold_ttft_s = 0;          // the prefix not cached
  double warm_ttft_s = 0;          // the same prefix, another suffix, served from the cache
  double ttft_cut = 0;             // 1 - warm / cold
  int32_t num_reused_tokens = 0;   // of the warm prompt
};

struct BatchBenchResult {
  int64_t context = 0;             // the engine's per-sequence context
  int32_t block_size = 0;
  int64_t num_blocks = 0;
  uint64_t bytes_per_block = 0;
  uint64_t kv_pool_bytes = 0;
  std::optional<PrefixCacheProbe> prefix;
  std::vector<BatchRun> runs;
};

// Progress text before each part ("P=8").
using BatchBenchProgress = std::function<void(const std::string& what)>;

// Runs the measurements on an idle engine whose context holds prefix + prompt + generated
// tokens and whose pool holds the largest parallelism (else sequences are preempted, which
// the results show). Profiling is switched off for the run and restored afterwards.
Result<BatchBenchResult> run_batch_bench(Engine& engine, const BatchBenchOptions& options,
                                         const BatchBenchProgress& progress = {});

// A KV budget that holds the largest parallelism's sequences whole (one spare block each, for
// the scheduler's reserve), in bytes.
uint64_t batch_bench_kv_bytes(const ModelConfig& config, const BatchBenchOptions& options, int32_t block_size,
                              KvCacheTypes types = {});

}  // namespace iwb
