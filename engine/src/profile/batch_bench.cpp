// run_batch_bench: parallel greedy generations through the engine's continuous batching, with
// the KV pool's use read from every step's statistics (see batch_bench.h).
#include "iwb/engine/profile/batch_bench.h"

#include "iwb/engine/paged/paged_kv_storage.h"
#include "iwb/engine/runtime/engine.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <random>

namespace iwb {
namespace {

using Clock = std::chrono::steady_clock;

std::vector<int32_t> random_tokens(std::mt19937_64& rng, int64_t vocab, int64_t n) {
  std::uniform_int_distribution<int32_t> pick(0, static_cast<int32_t>(vocab - 1));
  std::vector<int32_t> tokens(static_cast<size_t>(n));
  for (int32_t& t : tokens) t = pick(rng);
  return tokens;
}

GenerationRequest greedy(std::vector<int32_t> prompt, int64_t num_generated) {
  GenerationRequest r;
  r.prompt_tokens = std::move(prompt);
  r.sampling.temperature = 0.0f;
  r.sampling.repeat_penalty = 1.0f;
  r.max_new_tokens = static_cast<int32_t>(num_generated);
  r.stop_at_end_of_generation = false;  // every request generates exactly its count
  return r;
}

std::vector<int32_t> concat(const std::vector<int32_t>& a, const std::vector<int32_t>& b) {
  std::vector<int32_t> out = a;
  out.insert(out.end(), b.begin(), b.end());
  return out;
}

// Runs one request alone to its end.
Result<RequestFinished> run_alone(Engine& engine, GenerationRequest request) {
  Result<RequestId> id = engine.add_request(std::move(request));
  if (!id) return id.status();
  RequestFinished finished;
  while (engine.has_unfinished_requests()) {
    Result<StepResult> step = engine.step();
    if (!step) return step.status();
    for (const RequestFinished& f : step->finished) {
      if (f.request == *id) finished = f;
    }
  }
  if (finished.reason == FinishReason::Error)
    return make_error(ErrorCode::InvalidArgument, "generation failed: " + finished.error);
  return finished;
}

Result<BatchRun> run_parallel(Engine& engine, int parallel, const std::vector<int32_t>& prefix,
                              const BatchBenchOptions& o, std::mt19937_64& rng) {
  BatchRun run;
  run.parallel = parallel;
  const int64_t vocab = engine.config().vocab_size;
  const BlockManagerStats before = engine.kv_snapshot().cache.stats;
  std::map<RequestId, RequestFinished> finished;
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < parallel; ++i) prompts.push_back(concat(prefix, random_tokens(rng, vocab, o.num_prompt_tokens)));
  const Clock::time_point start = Clock::now();
  for (std::vector<int32_t>& p : prompts) {
    Result<RequestId> id = engine.add_request(greedy(std::move(p), o.num_generated_tokens));
    if (!id) return id.status();
    finished[*id] = {};
  }
  double allocated_slots = 0, unused_slots = 0, decode_seconds = 0;
  int64_t num_decode_tokens = 0;
  const int64_t block_size = before.block_size;
  while (engine.has_unfinished_requests()) {
    Result<StepResult> step = engine.step();
    if (!step) return step.status();
    const StepStats& s = step->stats;
    ++run.num_steps;
    const int64_t allocated = s.kv.num_used_blocks * block_size;
    allocated_slots += static_cast<double>(allocated);
    unused_slots += static_cast<double>(allocated - s.kv.num_used_slots);
    if (s.kv.num_used_blocks > run.peak_used_blocks) {
      run.peak_used_blocks = s.kv.num_used_blocks;
      run.waste_at_peak = 1.0 - static_cast<double>(s.kv.num_used_slots) / static_cast<double>(allocated);
    }
    if (s.num_prompt_tokens == 0 && s.num_decode_tokens > 0) {
      num_decode_tokens += s.num_decode_tokens;
      decode_seconds += s.seconds;
    }
    run.num_preemptions += s.num_preemptions;
    for (const RequestFinished& f : step->finished) {
      if (f.reason == FinishReason::Error)
        return make_error(ErrorCode::InvalidArgument, "generation failed: " + f.error);
      if (finished.count(f.request) != 0) finished[f.request] = f;
    }
  }
  run.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  const BlockManagerStats after = engine.kv_snapshot().cache.stats;

  double rate_sum = 0;
  for (const auto& [id, f] : finished) {
    run.num_generated_tokens += f.num_generated_tokens;
    const double ttft = f.token_seconds.empty() ? 0.0 : f.token_seconds.front();
    run.mean_ttft_s += ttft;
    run.max_ttft_s = std::max(run.max_ttft_s, ttft);
    if (f.generation_seconds > 0) rate_sum += static_cast<double>(f.num_generated_tokens - 1) / f.generation_seconds;
  }
  run.mean_ttft_s /= parallel;
  run.per_sequence_tokens_per_s = rate_sum / parallel;
  run.aggregate_tokens_per_s = static_cast<double>(run.num_generated_tokens) / run.seconds;
  run.decode_tokens_per_s = decode_seconds > 0 ? static_cast<double>(num_decode_tokens) / decode_seconds : 0.0;
  run.waste = allocated_slots > 0 ? unused_slots / allocated_slots : 0.0;
  const int64_t queried = after.num_prefix_query_tokens - before.num_prefix_query_tokens;
  const int64_t hits = after.num_prefix_hit_tokens - before.num_prefix_hit_tokens;
  run.prefix_hit_rate = queried > 0 ? static_cast<double>(hits) / static_cast<double>(queried) : 0.0;

  ContiguousComparison& c = run.contiguous;
  c.max_context = engine.context_length();
  const MemoryReport memory = engine.memory_report();
  run.peak_kv_bytes = static_cast<uint64_t>(run.peak_used_blocks) * memory.kv_bytes_per_position * memory.kv_block_size;
  const uint64_t per_sequence = static_cast<uint64_t>(c.max_context) * memory.kv_bytes_per_position;
  c.num_fit_in_peak = static_cast<int64_t>(run.peak_kv_bytes / per_sequence);
  c.num_fit_in_pool = static_cast<int64_t>(memory.kv_pool_bytes / per_sequence);
  // Each sequence ends holding prompt + generated - 1 positions (the last token is never run).
  const int64_t final_length = static_cast<int64_t>(prefix.size()) + o.num_prompt_tokens + o.num_generated_tokens - 1;
  c.waste = static_cast<double>(c.max_context - final_length) / static_cast<double>(c.max_context);
  return run;
}

}  // namespace

uint64_t batch_bench_kv_bytes(const ModelConfig& c, const BatchBenchOptions& o, int32_t block_size,
                              KvCacheTypes types) {
  const int parallel = o.parallel.empty() ? 1 : *std::max_element(o.parallel.begin(), o.parallel.end());
  const int64_t length = o.shared_prefix_tokens + o.num_prompt_tokens + o.num_generated_tokens;
  const int64_t blocks_per_sequence = (length + block_size - 1) / block_size + 1;
  const KvCacheShape shape = kv_cache_shape(c);
  return PagedKvStorage::bytes_per_block(shape, block_size, types) *
         static_cast<uint64_t>(parallel * blocks_per_sequence);
}

Result<BatchBenchResult> run_batch_bench(Engine& engine, const BatchBenchOptions& o,
                                         const BatchBenchProgress& progress) {
  if (o.parallel.empty()) return make_error(ErrorCode::InvalidArgument, "no parallelism to measure");
  for (const int p : o.parallel) {
    if (p < 1) return make_error(ErrorCode::InvalidArgument, "a parallelism of " + std::to_string(p) + " runs nothing");
  }
  if (o.num_prompt_tokens < 1 || o.num_generated_tokens < 1 || o.shared_prefix_tokens < 0) {
    return make_error(ErrorCode::InvalidArgument, "each request needs a prompt token and a generated token");
  }
  if (engine.has_unfinished_requests()) {
    return make_error(ErrorCode::InvalidArgument, "the engine is busy with a request; benchmark an idle engine");
  }
  const int64_t length = o.shared_prefix_tokens + o.num_prompt_tokens + o.num_generated_tokens;
  if (length > engine.context_length()) {
    return make_error(ErrorCode::InvalidArgument, "a request of " + std::to_string(length) +
                                                      " tokens needs a context of " + std::to_string(length) +
                                                      "; the engine holds " + std::to_string(engine.context_length()));
  }
  const bool was_profiling = engine.is_profiling();
  engine.set_profiling(false);
  struct Restore {
    Engine& e;
    bool on;
    ~Restore() { e.set_profiling(on); }
  } restore{engine, was_profiling};

  BatchBenchResult result;
  const MemoryReport memory = engine.memory_report();
  result.context = engine.context_length();
  result.block_size = memory.kv_block_size;
  result.num_blocks = memory.kv_num_blocks;
  result.bytes_per_block = memory.kv_bytes_per_position * static_cast<uint64_t>(memory.kv_block_size);
  result.kv_pool_bytes = memory.kv_pool_bytes;

  std::mt19937_64 rng(o.seed);
  const int64_t vocab = engine.config().vocab_size;
  if (o.is_warmup) {
    if (progress) progress("warm-up");
    Result<RequestFinished> warm = run_alone(engine, greedy(random_tokens(rng, vocab, 8), 2));
    if (!warm) return warm.status();
  }
  const std::vector<int32_t> prefix = random_tokens(rng, vocab, o.shared_prefix_tokens);
  if (!prefix.empty()) {
    // The same prefix twice with different suffixes: first computed, then found in the cache.
    if (progress) progress("prefix cache");
    PrefixCacheProbe probe;
    probe.prefix_tokens = o.shared_prefix_tokens;
    probe.prompt_tokens = o.shared_prefix_tokens + o.num_prompt_tokens;
    Result<RequestFinished> cold =
        run_alone(engine, greedy(concat(prefix, random_tokens(rng, vocab, o.num_prompt_tokens)), 1));
    if (!cold) return cold.status();
    Result<RequestFinished> warm =
        run_alone(engine, greedy(concat(prefix, random_tokens(rng, vocab, o.num_prompt_tokens)), 1));
    if (!warm) return warm.status();
    probe.cold_ttft_s = cold->token_seconds.front();
    probe.warm_ttft_s = warm->token_seconds.front();
    probe.ttft_cut = 1.0 - probe.warm_ttft_s / probe.cold_ttft_s;
    probe.num_reused_tokens = warm->num_reused_prompt_tokens;
    result.prefix = probe;
  }
  for (const int parallel : o.parallel) {
    if (progress) progress("P=" + std::to_string(parallel));
    Result<BatchRun> run = run_parallel(engine, parallel, prefix, o, rng);
    if (!run) return run.status();
    result.runs.push_back(*run);
  }
  return result;
}

}  // namespace iwb
