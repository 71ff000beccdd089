// evaluate(): perplexity over chunks (llama-perplexity's method), and the comparison with the
// base model's cached distributions (KL divergence, top-1 agreement, right-token probability).
#include "iwb/engine/quant/evaluation.h"

#include "iwb/engine/model/model_info.h"
#include "iwb/engine/profile/bench.h"
#include "iwb/engine/quant/logits_cache.h"
#include "iwb/engine/quant/quant_run.h"
#include "iwb/engine/tokenizer/tokenizer.h"
#include "iwb/kernels/reduce.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>

namespace iwb::quant {
namespace {

struct LogSoftmax {
  double lse = 0;  // log sum exp of the logits
  int32_t argmax = 0;
};

LogSoftmax log_softmax(std::span<const float> z) {
  const auto best = static_cast<int32_t>(argmax_f32(z.data(), static_cast<int64_t>(z.size())));
  const double max = z[static_cast<size_t>(best)];
  double sum = 0;  // every term in double (perplexity), not sum_exp_f32's f32 terms
  for (const float v : z) sum += std::exp(static_cast<double>(v) - max);
  return {max + std::log(sum), best};
}

Status cancelled(const EvalOptions& o) {
  if (o.cancel != nullptr && o.cancel->load()) return make_error(ErrorCode::InvalidArgument, "evaluation cancelled");
  return {};
}

// Runs every chunk of the plan through `engine`, handing each scored row to `score`:
// (logits, the token it predicts).
Status run_chunks(Engine& engine, const std::vector<int32_t>& tokens, const ChunkPlan& plan, const EvalOptions& o,
                  const std::string& stage, const std::function<Status(std::span<const float>, int32_t)>& score) {
  const int64_t context = o.context;
  const int32_t bos = engine.tokenizer().bos();
  const bool add_bos = engine.tokenizer().vocab().add_bos && bos >= 0;
  for (size_t c = 0; c < plan.starts.size(); ++c) {
    IWB_RETURN_IF_ERROR(cancelled(o));
    if (o.progress) o.progress({stage, static_cast<int64_t>(c), static_cast<int64_t>(plan.starts.size())});
    const int64_t start = plan.starts[c];
    // The last position predicts nothing that is scored: run context - 1 tokens (causal
    // attention gives the same logits for the rest).
    std::vector<int32_t> chunk(tokens.begin() + start, tokens.begin() + start + context - 1);
    if (o.stride == 0 && add_bos) chunk[0] = bos;  // llama-perplexity: each chunk starts with BOS
    IWB_RETURN_IF_ERROR(engine.logits_for_positions(
        chunk, plan.first_scored,
        [&](int64_t pos, std::span<const float> z) { return score(z, tokens[static_cast<size_t>(start + pos + 1)]); }));
  }
  if (o.progress)
    o.progress({stage, static_cast<int64_t>(plan.starts.size()), static_cast<int64_t>(plan.starts.size())});
  return {};
}

double percentile(std::vector<float> values, double q) {
  if (values.empty()) return 0;
  const auto k = static_cast<size_t>(std::min<double>(static_cast<double>(values.size() - 1),
                                                      std::floor(q * static_cast<double>(values.size() - 1) + 0.5)));
  std::nth_element(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(k), values.end());
  return values[k];
}

// Decode speed after `gen_depth` tokens in the cache (iwb bench -d's tgN @ dD, one run), on an
// engine of its own: the evaluation's holds one chunk's context and no prefix cache, while the
// depth test needs a context past the depth and prefix caching (bench keeps the depth's blocks
// there). The depth is cut so depth + the test fit the trained context.
struct DepthSpeed {
  int64_t depth = 0;
  double tokens_per_s = 0;
};

Result<DepthSpeed> measure_depth_speed(const EvalOptions& o, int64_t trained_context) {
  BenchOptions bench;
  bench.num_prompt_tokens = 0;
  bench.num_generated_tokens = o.num_gen_tokens;
  bench.num_repetitions = 1;
  const int64_t test = bench.tg_prompt_tokens + bench.num_generated_tokens + 1;
  const int64_t limit = trained_context > 0 ? trained_context : o.gen_depth + test;
  DepthSpeed out;
  out.depth = std::min(o.gen_depth, limit - test);
  if (out.depth < 1) {
    return make_error(ErrorCode::InvalidArgument, "the model's context (" + std::to_string(limit) +
                                                      " tokens) leaves no room for a generation test at depth");
  }
  bench.depths = {out.depth};
  Result<EngineOptions> options =
      eval_engine_options(bench_context_length(bench), o.num_threads, o.kv_cache_type, o.device);
  if (!options) return options.status();
  options->enable_prefix_caching = true;
  options->load_mode = o.load_mode;
  Result<std::unique_ptr<Engine>> engine = Engine::load(o.model_path, *options);
  if (!engine) return engine.status();
  Result<std::vector<BenchResult>> speed = run_bench(**engine, bench, std::nullopt);
  if (!speed) return speed.status();
  if (!speed->empty()) out.tokens_per_s = speed->front().tokens_per_s_mean;
  return out;
}

}  // namespace

Result<EngineOptions> eval_engine_options(int64_t context, int num_threads, const std::string& kv_type,
                                          const std::string& device) {
  EngineOptions e;
  e.device = device;
  Result<KvCacheTypes> types = parse_kv_cache_types(kv_type);
  if (!types) return types.status();
  e.kv_cache_type = *types;
  e.context_length = context;
  e.num_threads = num_threads;
  e.enable_prefix_caching = false;  // every chunk is computed, never served from earlier ones
  e.max_running_sequences = 1;
  return e;
}

Result<ChunkPlan> plan_chunks(int64_t n, int64_t context, int64_t stride, int64_t max_chunks) {
  if (context < 8) return make_error(ErrorCode::InvalidArgument, "the context must be at least 8 tokens");
  ChunkPlan plan;
  int64_t count = 0;
  if (stride == 0) {
    count = n / context;
    if (count < 1) {
      return make_error(ErrorCode::InvalidArgument, "the text is " + std::to_string(n) + " tokens; a context of " +
                                                        std::to_string(context) + " needs at least that many");
    }
    plan.first_scored = context / 2;
  } else {
    if (stride < 1 || stride >= context) {
      return make_error(ErrorCode::InvalidArgument, "the stride must be between 1 and the context - 1");
    }
    if (n <= context) {
      return make_error(ErrorCode::InvalidArgument, "the text is " + std::to_string(n) +
                                                        " tokens; strided windows need more than the context (" +
                                                        std::to_string(context) + ")");
    }
    count = (n - context + stride - 1) / stride;
    plan.first_scored = context - stride - 1;
  }
  if (max_chunks > 0) count = std::min(count, max_chunks);
  for (int64_t i = 0; i < count; ++i) plan.starts.push_back(i * (stride == 0 ? context : stride));
  return plan;
}

double log_probability(std::span<const float> logits, int32_t token) {
  return static_cast<double>(logits[static_cast<size_t>(token)]) - log_softmax(logits).lse;
}

PerplexityEstimate estimate_perplexity(double nll_sum, double nll_squares, int64_t num_scored) {
  if (num_scored <= 0) return {};
  const auto n = static_cast<double>(num_scored);
  const double mean = nll_sum / n;
  PerplexityEstimate e;
  e.perplexity = std::exp(mean);
  if (num_scored > 1) e.error = e.perplexity * std::sqrt(std::max(0.0, nll_squares / n - mean * mean) / (n - 1));
  return e;
}

Result<EvalResult> evaluate(const EvalOptions& o) {
  const auto t0 = std::chrono::steady_clock::now();
  if (o.text.empty()) return make_error(ErrorCode::InvalidArgument, "the evaluation text is empty");
  EvalResult result;

  // The model first: its tokenizer decides the tokens (the base must tokenize alike).
  Result<EngineOptions> model_options = eval_engine_options(o.context, o.num_threads, o.kv_cache_type, o.device);
  if (!model_options) return model_options.status();
  model_options->load_mode = o.load_mode;
  Result<std::unique_ptr<Engine>> model = Engine::load(o.model_path, *model_options);
  if (!model) return model.status();
  const std::vector<int32_t> tokens = (*model)->tokenizer().encode(o.text);
  result.num_text_tokens = static_cast<int64_t>(tokens.size());
  Result<ChunkPlan> plan = plan_chunks(result.num_text_tokens, o.context, o.stride, o.num_chunks);
  if (!plan) return plan.status();
  result.num_chunks = static_cast<int64_t>(plan->starts.size());
  const int64_t rows_per_chunk = o.context - 1 - plan->first_scored;
  const int64_t expected_rows = rows_per_chunk * result.num_chunks;
  const int64_t vocab = (*model)->config().vocab_size;

  std::unique_ptr<LogitsCacheReader> base;
  if (!o.base_path.empty()) {
    Result<std::string> identity = file_identity(o.base_path);
    if (!identity) return identity.status();
    result.has_base = true;
    result.base_identity = *identity;
    const std::string key = logits_cache_key(*identity, hash_text(o.text), o.context, o.stride, result.num_chunks);
    const std::string path = o.cache_path.empty() ? logits_cache_path(key) : o.cache_path;
    Result<LogitsCacheReader> cached = o.use_cache ? LogitsCacheReader::open(path, key)
                                                   : Result<LogitsCacheReader>(make_error(ErrorCode::NotFound, ""));
    if (cached && cached->num_rows() == expected_rows && cached->vocab_size() == vocab) {
      result.was_base_cached = true;
    } else {
      // Run the base once (the model under test waits, loaded: both fit where one does, as
      // weights are mapped from disk) and store its distributions.
      // (Read into memory instead where load_mode asks and the memory allows: the rule weighs
      // each file against the memory available when it loads.)
      EngineOptions base_options = *eval_engine_options(o.context, o.num_threads, "f16", o.device);
      base_options.load_mode = o.load_mode;
      Result<std::unique_ptr<Engine>> base_engine = Engine::load(o.base_path, base_options);
      if (!base_engine) return base_engine.status();
      if ((*base_engine)->config().vocab_size != vocab) {
        return make_error(ErrorCode::InvalidArgument, "the base model's vocabulary (" +
                                                          std::to_string((*base_engine)->config().vocab_size) +
                                                          ") differs from the model's (" + std::to_string(vocab) + ")");
      }
      Result<LogitsCacheWriter> writer = LogitsCacheWriter::create(path, key, vocab);
      if (!writer) return writer.status();
      IWB_RETURN_IF_ERROR(run_chunks(**base_engine, tokens, *plan, o, "base model",
                                     [&](std::span<const float> z, int32_t next) { return writer->add(z, next); }));
      IWB_RETURN_IF_ERROR(writer->finish());
      cached = LogitsCacheReader::open(path, key);
      if (!cached) return cached.status();
    }
    base = std::make_unique<LogitsCacheReader>(std::move(*cached));
  }

  const ModelSummary& summary = (*model)->model();
  result.model_name = summary.name;
  result.device = summary.device;
  result.file_type = summary.file_type;
  result.num_parameters = summary.num_params;
  const MemoryReport memory = (*model)->memory_report();
  result.file_bytes = memory.file_bytes;
  result.memory_bytes = memory.weights_bytes + memory.kv_pool_bytes + memory.scratch_bytes;
  result.kv_bytes_per_token = memory.kv_bytes_per_position;
  result.weights_bytes = memory.weights_bytes;
  result.kv_block_size = memory.kv_block_size;
  if (Result<std::string> id = file_identity(o.model_path)) result.model_identity = *id;

  double nll_sum = 0, nll_sq = 0, base_nll = 0, dp_sum = 0, dp_sq = 0, ln_ratio_sq = 0;
  result.chunk_mean_nll.assign(static_cast<size_t>(result.num_chunks), 0.0);
  if (base) result.base_chunk_mean_nll.assign(static_cast<size_t>(result.num_chunks), 0.0);
  const auto model_start = std::chrono::steady_clock::now();
  int64_t agree = 0;
  BaseRow row;
  std::vector<double> log_q;
  IWB_RETURN_IF_ERROR(
      run_chunks(**model, tokens, *plan, o, "model", [&](std::span<const float> z, int32_t next) -> Status {
        const LogSoftmax ls = log_softmax(z);
        const double lp = static_cast<double>(z[static_cast<size_t>(next)]) - ls.lse;
        nll_sum -= lp;
        nll_sq += lp * lp;
        const auto chunk = static_cast<size_t>(result.num_scored / rows_per_chunk);
        result.chunk_mean_nll[chunk] -= lp / static_cast<double>(rows_per_chunk);
        ++result.num_scored;
        if (!base) return {};
        IWB_RETURN_IF_ERROR(base->next(&row));
        double kl = 0;
        for (size_t i = 0; i < z.size(); ++i) {
          const double lb = row.log_probs[i];
          kl += std::exp(lb) * (lb - (static_cast<double>(z[i]) - ls.lse));
        }
        result.kl_values.push_back(static_cast<float>(std::max(0.0, kl)));
        agree += ls.argmax == row.argmax;
        const double dp = std::exp(lp) - std::exp(static_cast<double>(row.log_prob_next));
        dp_sum += dp;
        dp_sq += dp * dp;
        base_nll -= row.log_prob_next;
        result.base_chunk_mean_nll[chunk] -= row.log_prob_next / static_cast<double>(rows_per_chunk);
        const double ln_ratio = static_cast<double>(row.log_prob_next) - lp;  // nll(model) - nll(base)
        ln_ratio_sq += ln_ratio * ln_ratio;
        return {};
      }));

  const double model_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - model_start).count();
  result.prompt_tokens_per_s = static_cast<double>(result.num_chunks * (o.context - 1)) / model_seconds;
  if (o.num_gen_tokens > 0) {
    IWB_RETURN_IF_ERROR(cancelled(o));
    if (o.progress) o.progress({"generation speed", 0, 1});
    BenchOptions bench;
    bench.num_prompt_tokens = 0;
    bench.num_generated_tokens = std::min<int64_t>(o.num_gen_tokens, o.context - bench.tg_prompt_tokens - 1);
    bench.num_repetitions = 1;
    Result<std::vector<BenchResult>> speed = run_bench(**model, bench, std::nullopt);
    if (!speed) return speed.status();
    if (!speed->empty()) result.gen_tokens_per_s = speed->front().tokens_per_s_mean;
  }
  if (o.num_gen_tokens > 0 && o.gen_depth > 0) {
    IWB_RETURN_IF_ERROR(cancelled(o));
    if (o.progress) o.progress({"generation speed at depth", 0, 1});
    Result<DepthSpeed> deep = measure_depth_speed(o, (*model)->model().hparams.context_length);
    if (!deep) return deep.status();
    result.gen_depth = deep->depth;
    result.depth_gen_tokens_per_s = deep->tokens_per_s;
  }

  const auto n = static_cast<double>(result.num_scored);
  result.mean_nll = nll_sum / n;
  const PerplexityEstimate estimate = estimate_perplexity(nll_sum, nll_sq, result.num_scored);
  result.perplexity = estimate.perplexity;
  result.perplexity_error = estimate.error;
  if (base) {
    double kl_sum = 0;
    for (const float v : result.kl_values) {
      kl_sum += v;
      result.kl_max = std::max<double>(result.kl_max, v);
    }
    result.kl_mean = kl_sum / n;
    result.kl_median = percentile(result.kl_values, 0.5);
    result.kl_p99 = percentile(result.kl_values, 0.99);
    result.top1_agreement = static_cast<double>(agree) / n;
    result.delta_p_mean = dp_sum / n;
    result.delta_p_rms = std::sqrt(dp_sq / n);
    result.base_perplexity = std::exp(base_nll / n);
    result.ln_ppl_ratio = result.mean_nll - base_nll / n;
    if (result.num_scored > 1) {
      const double variance = std::max(0.0, ln_ratio_sq / n - result.ln_ppl_ratio * result.ln_ppl_ratio);
      result.ln_ppl_ratio_error = std::sqrt(variance / (n - 1));
    }
    result.ppl_ratio = std::exp(result.ln_ppl_ratio);
    result.ppl_ratio_error = result.ppl_ratio * result.ln_ppl_ratio_error;
  }
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return result;
}

}  // namespace iwb::quant
