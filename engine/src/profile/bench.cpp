// run_bench: timed prefill (logits_for over a fresh context, or a request on top of a depth the
// prefix cache holds) and timed decode steps through the ordinary request path, priced by the
// cost model for MBU and MFU.
#include "iwb/engine/profile/bench.h"

#include "iwb/engine/backend/device_info.h"
#include "iwb/engine/model/llama_model_desc.h"
#include "iwb/engine/profile/cost_model.h"
#include "iwb/engine/runtime/engine.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
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

// Seconds of one prefill of `tokens` into an empty cache.
Result<double> time_prefill(Engine& engine, const std::vector<int32_t>& tokens) {
  const Clock::time_point start = Clock::now();
  Result<std::vector<float>> logits = engine.logits_for(tokens);
  if (!logits) return logits.status();
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// A prefill through the request path: one request that stops at its first token (which comes
// out of the prefill), so the prefix cache both serves the prompt's cached blocks and keeps
// its new ones for the next request.
struct RequestPrefill {
  double seconds = 0;
  int64_t num_computed_tokens = 0;  // prompt tokens the steps computed
  int64_t num_reused_tokens = 0;    // served by the prefix cache
};

Result<RequestPrefill> run_prefill_request(Engine& engine, std::vector<int32_t> prompt) {
  GenerationRequest request;
  request.prompt_tokens = std::move(prompt);
  request.sampling.temperature = 0.0f;
  request.sampling.repeat_penalty = 1.0f;
  request.max_new_tokens = 1;
  request.stop_at_end_of_generation = false;
  RequestPrefill r;
  const Clock::time_point start = Clock::now();
  Result<RequestId> id = engine.add_request(std::move(request));
  if (!id) return id.status();
  while (engine.has_unfinished_requests()) {
    Result<StepResult> step = engine.step();
    if (!step) return step.status();
    r.num_computed_tokens += step->stats.num_prompt_tokens;
    for (const RequestFinished& f : step->finished) {
      if (f.reason == FinishReason::Error) return make_error(ErrorCode::InvalidArgument, "prefill failed: " + f.error);
      r.num_reused_tokens = f.num_reused_prompt_tokens;
    }
  }
  r.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return r;
}

// Seconds of `num_decode` decode steps after prefilling `prompt` (greedy, no stop rules).
Result<double> time_decode(Engine& engine, std::vector<int32_t> prompt, int64_t num_decode) {
  GenerationRequest request;
  request.prompt_tokens = std::move(prompt);
  request.sampling.temperature = 0.0f;
  request.sampling.repeat_penalty = 1.0f;
  request.max_new_tokens = static_cast<int32_t>(num_decode + 1);  // the first comes from the prefill
  request.stop_at_end_of_generation = false;
  Result<RequestId> id = engine.add_request(std::move(request));
  if (!id) return id.status();
  double seconds = 0;
  int64_t num_steps = 0;
  while (engine.has_unfinished_requests()) {
    Result<StepResult> step = engine.step();
    if (!step) return step.status();
    if (step->stats.num_prompt_tokens == 0 && step->stats.num_decode_tokens > 0) {
      seconds += step->stats.seconds;
      ++num_steps;
    }
    for (const RequestFinished& f : step->finished) {
      if (f.reason == FinishReason::Error)
        return make_error(ErrorCode::InvalidArgument, "generation failed: " + f.error);
    }
  }
  if (num_steps != num_decode) {
    return make_error(ErrorCode::InvalidArgument, "the generation ran " + std::to_string(num_steps) +
                                                      " decode steps instead of " + std::to_string(num_decode));
  }
  return seconds;
}

BenchResult describe(const Engine& engine, const std::string& identity, const std::optional<ProbeResult>& probe) {
  BenchResult r;
  const ModelSummary& m = engine.model();
  r.date = current_utc_iso8601();
  if (m.device.empty() || m.device == "cpu") {
    const ComputeDeviceInfo cpu = describe_cpu_device();
    r.device_id = cpu.id.empty() ? "cpu" : cpu.id;
    r.device_name = cpu.name;
  } else {
    r.device_id = m.device;  // "cuda:N": the GPU's name from the runtime
    if (Result<std::vector<ComputeDeviceInfo>> gpus = list_cuda_devices(); gpus) {
      for (const ComputeDeviceInfo& d : *gpus) {
        if (d.id == m.device) r.device_name = d.name;
      }
    }
  }
  std::error_code ec;
  const std::filesystem::path absolute = std::filesystem::absolute(m.path, ec);
  r.model_path = ec ? m.path : absolute.string();  // the GUI lists runs from any working folder
  r.model_name = m.name;
  r.model_identity = identity;
  r.architecture = m.architecture;
  r.file_type = m.file_type;
  r.model_size_bytes = m.file_size;
  r.num_params = m.num_params;
  r.llama_model_type = llama_model_description(m);
  r.tensor_bytes = m.tensor_bytes;
  r.num_threads = engine.num_threads();
  if (probe) r.probe_date = probe->date;
  return r;
}

void finish_result(BenchResult* r, const std::vector<double>& rates, const StepCost& per_token,
                   const std::optional<ProbeResult>& probe, bool int8_dot_products) {
  r->num_repetitions = static_cast<int>(rates.size());
  r->tokens_per_s = rates;
  mean_and_sd(rates, &r->tokens_per_s_mean, &r->tokens_per_s_sd);
  r->predicted_flops_per_token = per_token.flops;
  r->predicted_bytes_per_token = per_token.bytes;
  if (probe) {
    const Ceilings c = ceilings_from_probe(*probe);
    r->mbu = model_bandwidth_utilization(per_token.bytes, r->tokens_per_s_mean, c.bandwidth_bytes_per_s);
    // Quantized weights multiply as int8 dot products on a CPU: against the f32 FMA rate a
    // quantized prefill would show an MFU above 100%.
    r->mfu = model_flops_utilization(per_token.flops, r->tokens_per_s_mean, c.compute_roof(int8_dot_products));
    r->mfu_peak_kind = c.uses_int8_roof(int8_dot_products) ? probe->peak_int8_kind : probe->peak_flops_kind;
  }
}

std::vector<int32_t> concatenated(const std::vector<int32_t>& a, const std::vector<int32_t>& b) {
  std::vector<int32_t> out = a;
  out.insert(out.end(), b.begin(), b.end());
  return out;
}

}  // namespace

std::vector<double> BenchResult::paired_mbus() const {
  std::vector<double> mbus;
  if (paired_read_bytes_per_s.size() != tokens_per_s.size()) return mbus;
  for (size_t i = 0; i < tokens_per_s.size(); ++i) {
    if (paired_read_bytes_per_s[i] <= 0) continue;
    if (std::optional<double> m =
            model_bandwidth_utilization(predicted_bytes_per_token, tokens_per_s[i], paired_read_bytes_per_s[i])) {
      mbus.push_back(*m);
    }
  }
  return mbus;
}

int64_t bench_context_length(const BenchOptions& o) {
  int64_t deepest = 0;
  for (const int64_t d : o.depths) deepest = std::max(deepest, d);
  return deepest + std::max<int64_t>({o.num_prompt_tokens, o.tg_prompt_tokens + o.num_generated_tokens + 1, 1});
}

std::string bench_test_name(const char* kind, int64_t num_tokens, int64_t depth) {
  std::string name = kind + std::to_string(num_tokens);
  if (depth > 0) name += " @ d" + std::to_string(depth);
  return name;
}

double median(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const size_t half = values.size() / 2;
  return values.size() % 2 == 1 ? values[half] : 0.5 * (values[half - 1] + values[half]);
}

void mean_and_sd(const std::vector<double>& values, double* mean, double* sd) {
  *mean = 0;
  *sd = 0;
  if (values.empty()) return;
  for (const double v : values) *mean += v;
  *mean /= static_cast<double>(values.size());
  if (values.size() < 2) return;
  double squares = 0;
  for (const double v : values) squares += (v - *mean) * (v - *mean);
  *sd = std::sqrt(squares / static_cast<double>(values.size() - 1));
}

Result<std::string> model_identity(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return make_error(ErrorCode::IoError, "cannot read '" + path + "'");
  in.seekg(0, std::ios::end);
  const auto size = static_cast<uint64_t>(in.tellg());
  in.seekg(0);
  std::vector<char> head(static_cast<size_t>(std::min<uint64_t>(size, 1u << 20)));
  if (!in.read(head.data(), static_cast<std::streamsize>(head.size()))) {
    return make_error(ErrorCode::IoError, "cannot read the start of '" + path + "'");
  }
  uint64_t hash = 0xcbf29ce484222325ull;  // FNV-1a 64 offset basis
  for (const char c : head) {
    hash ^= static_cast<uint8_t>(c);
    hash *= 0x100000001b3ull;  // FNV 64-bit prime
  }
  char text[96];
  std::snprintf(text, sizeof text, "size=%llu;fnv1a64-first-MiB=%016llx", static_cast<unsigned long long>(size),
                static_cast<unsigned long long>(hash));
  return std::string(text);
}

Result<std::vector<BenchResult>> run_bench(Engine& engine, const BenchOptions& o,
                                           const std::optional<ProbeResult>& probe, const BenchProgress& progress) {
  if (o.num_repetitions < 1) return make_error(ErrorCode::InvalidArgument, "the repetition count must be at least 1");
  if (o.num_prompt_tokens < 0 || o.num_generated_tokens < 0 || o.tg_prompt_tokens < 1) {
    return make_error(ErrorCode::InvalidArgument, "token counts cannot be negative, and tg needs a prompt token");
  }
  if (engine.has_unfinished_requests()) {
    return make_error(ErrorCode::InvalidArgument, "the engine is busy with a request; benchmark an idle engine");
  }
  if (o.depths.empty()) return make_error(ErrorCode::InvalidArgument, "no context depth given");
  const int64_t context = engine.context_length();
  for (const int64_t depth : o.depths) {
    if (depth < 0) return make_error(ErrorCode::InvalidArgument, "a context depth cannot be negative");
    const auto refuse = [&](const std::string& test, int64_t needed) {
      return make_error(ErrorCode::InvalidArgument, test + " needs a context of " + std::to_string(needed) +
                                                        " tokens; the engine holds " + std::to_string(context));
    };
    if (o.num_prompt_tokens > 0 && depth + o.num_prompt_tokens > context) {
      return refuse(bench_test_name("pp", o.num_prompt_tokens, depth), depth + o.num_prompt_tokens);
    }
    const int64_t tg_needed = depth + o.tg_prompt_tokens + o.num_generated_tokens + 1;
    if (o.num_generated_tokens > 0 && tg_needed > context) {
      return refuse(bench_test_name("tg", o.num_generated_tokens, depth), tg_needed);
    }
  }
  const std::string& path = engine.model().path;
  Result<ModelShape> shape = model_shape_from_gguf(path);
  if (!shape) return shape.status();
  Result<std::string> identity = model_identity(path);
  if (!identity) return identity.status();

  const bool was_profiling = engine.is_profiling();
  engine.set_profiling(false);
  struct Restore {
    Engine& e;
    bool on;
    ~Restore() { e.set_profiling(on); }
  } restore{engine, was_profiling};

  std::mt19937_64 rng(o.seed);
  const int64_t vocab = engine.config().vocab_size;
  if (o.is_warmup) {
    const int64_t warm = std::max<int64_t>(1, std::min<int64_t>(32, std::max(o.num_prompt_tokens, o.tg_prompt_tokens)));
    if (Result<double> s = time_prefill(engine, random_tokens(rng, vocab, std::min(warm, context))); !s)
      return s.status();
    if (o.num_generated_tokens > 0) {
      if (Result<double> s = time_decode(engine, random_tokens(rng, vocab, o.tg_prompt_tokens), 2); !s)
        return s.status();
    }
  }

  std::vector<BenchResult> results;
  const int64_t block_size = std::max<int64_t>(1, engine.memory_report().kv_block_size);
  for (const int64_t depth : o.depths) {
    // One set of depth tokens per depth, prefilled once (untimed): its full KV blocks stay in
    // the prefix cache, and every test at this depth starts with them, as llama-bench restores
    // its saved depth state instead of prefilling it again for each repetition.
    const std::vector<int32_t> depth_tokens = random_tokens(rng, vocab, depth);
    if (depth > 0) {
      if (progress) progress(bench_test_name("depth ", depth, 0), 0, 1);
      if (Result<RequestPrefill> p = run_prefill_request(engine, depth_tokens); !p) return p.status();
    }
    if (o.num_prompt_tokens > 0) {
      BenchResult r = describe(engine, *identity, probe);
      r.test = bench_test_name("pp", o.num_prompt_tokens, depth);
      r.num_depth_tokens = depth;
      r.num_prompt_tokens = o.num_prompt_tokens;
      std::vector<double> rates;
      for (int rep = 0; rep < o.num_repetitions; ++rep) {
        if (progress) progress(r.test, rep, o.num_repetitions);
        const std::vector<int32_t> prompt = random_tokens(rng, vocab, o.num_prompt_tokens);
        if (depth == 0) {
          Result<double> s = time_prefill(engine, prompt);
          if (!s) return s.status();
          rates.push_back(static_cast<double>(o.num_prompt_tokens) / *s);
          continue;
        }
        // The depth's full blocks come from the prefix cache; a depth that ends inside a block
        // recomputes that block's tokens with the test's, and the rate counts every token computed.
        Result<RequestPrefill> p = run_prefill_request(engine, concatenated(depth_tokens, prompt));
        if (!p) return p.status();
        const int64_t expected_reused = depth / block_size * block_size;
        if (p->num_reused_tokens < expected_reused) {
          return make_error(ErrorCode::InvalidArgument,
                            r.test + ": the prefix cache served " + std::to_string(p->num_reused_tokens) + " of the " +
                                std::to_string(depth) +
                                " depth tokens (is prefix caching off, the KV pool too small, or for a model with "
                                "recurrent layers, are state checkpoints off?)");
        }
        rates.push_back(static_cast<double>(p->num_computed_tokens) / p->seconds);
      }
      Result<std::vector<KernelRecord>> predicted =
          predict_step(*shape, {Phase::Prefill, o.num_prompt_tokens, depth, engine.max_batch_tokens(), true});
      if (!predicted) return predicted.status();
      StepCost per_token = total_cost(*predicted);
      per_token.flops /= static_cast<double>(o.num_prompt_tokens);
      per_token.bytes /= static_cast<double>(o.num_prompt_tokens);
      finish_result(&r, rates, per_token, probe, int8_dot_products_dominate(*predicted));
      results.push_back(std::move(r));
    }
    if (o.num_generated_tokens > 0) {
      BenchResult r = describe(engine, *identity, probe);
      r.test = bench_test_name("tg", o.num_generated_tokens, depth);
      r.num_depth_tokens = depth;
      r.num_prompt_tokens = o.tg_prompt_tokens;
      r.num_generated_tokens = o.num_generated_tokens;
      std::vector<double> rates;
      for (int rep = 0; rep < o.num_repetitions; ++rep) {
        if (progress) progress(r.test, rep, o.num_repetitions);
        // Only the decode steps are timed: the prefill of the depth (from the prefix cache) and of
        // the short prompt is not; nor is the paired probe, which runs last before the timed steps.
        const std::vector<int32_t> prompt = concatenated(depth_tokens, random_tokens(rng, vocab, o.tg_prompt_tokens));
        if (o.paired_read_probe) r.paired_read_bytes_per_s.push_back(o.paired_read_probe());
        Result<double> s = time_decode(engine, prompt, o.num_generated_tokens);
        if (!s) return s.status();
        rates.push_back(static_cast<double>(o.num_generated_tokens) / *s);
      }
      Result<GenerationCost> predicted =
          predict_generation(*shape, depth + o.tg_prompt_tokens, o.num_generated_tokens + 1, engine.max_batch_tokens());
      if (!predicted) return predicted.status();
      StepCost per_token = predicted->decode;
      per_token.flops /= static_cast<double>(predicted->num_decode_steps);
      per_token.bytes /= static_cast<double>(predicted->num_decode_steps);
      finish_result(&r, rates, per_token, probe, predicted->int8_dot_products);
      if (const std::vector<double> mbus = r.paired_mbus(); !mbus.empty()) r.mbu_paired = median(mbus);
      results.push_back(std::move(r));
    }
  }
  return results;
}

}  // namespace iwb
