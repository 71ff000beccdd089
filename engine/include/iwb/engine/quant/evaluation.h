// `iwb eval`: perplexity of a model over a text with llama-perplexity's method, and, against a
// base model, the KL divergence of the output distributions, top-1 agreement and the change of
// the right token's probability. The base's distributions are computed once and cached on disk
// (logits_cache.h).
//
// Method (llama.cpp examples/perplexity, stride 0): the text is tokenized once (with BOS when the
// vocabulary asks for it); non-overlapping chunks of `context` tokens are run from an empty
// cache, each chunk's first token replaced by BOS when the model adds one; the logits of
// positions context/2 .. context-2 score the token after each, so every chunk scores
// context - 1 - context/2 tokens. With stride > 0 (llama-perplexity --ppl-stride), windows of
// `context` tokens start every `stride` tokens and score their last `stride` tokens.
#pragma once

#include "iwb/engine/runtime/engine.h"
#include "iwb/engine/status.h"

#include <atomic>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

namespace iwb::quant {

// A few thousand words of plain English prose compiled into the program: the default text.
const std::string& builtin_eval_text();

struct EvalProgress {
  std::string stage;  // "base model", "model"
  int64_t chunk = 0;  // chunks done
  int64_t num_chunks = 0;
};

struct EvalOptions {
  std::string model_path;
  std::string base_path;  // empty: perplexity only
  std::string text;       // the evaluation text
  std::string text_name = "built-in";
  int64_t context = 512;
  int64_t stride = 0;      // 0: llama-perplexity's chunks (see above)
  int64_t num_chunks = 0;  // 0: as many as the text holds
  int num_threads = 0;
  std::string cache_path;             // base logits cache; empty: logits_cache_path(key)
  bool use_cache = true;              // false: always run the base model (and rewrite the cache)
  std::string kv_cache_type = "f16";  // the model's KV cache: "q8_0", or keys/values "q8_0/q4_0" (the base always f16)
  int64_t num_gen_tokens = 32;        // generation speed test (iwb bench's tgN, one run); 0: skip
  // The same test after this many tokens already in the KV cache (iwb bench -d), on an engine
  // of its own with a context that holds them; capped so the whole test fits the model's
  // trained context. 0: skip.
  int64_t gen_depth = 0;
  std::string device = "auto";  // EngineOptions::device for the model and the base
  std::string load_mode = "auto";  // EngineOptions::load_mode for both
  std::function<void(const EvalProgress&)> progress;
  const std::atomic<bool>* cancel = nullptr;
};

struct EvalResult {
  int64_t num_text_tokens = 0;
  int64_t num_chunks = 0;
  int64_t num_scored = 0;  // predictions scored
  double perplexity = 0;
  double perplexity_error = 0;  // ppl * standard error of the mean negative log-likelihood
  double mean_nll = 0;
  std::vector<double> chunk_mean_nll;  // per chunk (window), in order: what llama-perplexity's [i] lines accumulate
  double seconds = 0;
  // The model file and its speed: prompt tokens/s from the chunks' prefill, generation tokens/s
  // from a tgN run on the same engine.
  std::string model_identity, model_name, file_type;
  uint64_t file_bytes = 0, memory_bytes = 0, num_parameters = 0;
  uint64_t kv_bytes_per_token = 0;  // K and V of every layer for one position, in the cache's types
  uint64_t weights_bytes = 0;       // the model's tensors as stored
  int64_t kv_block_size = 0;        // positions per block of the paged pool
  double prompt_tokens_per_s = 0, gen_tokens_per_s = 0;
  int64_t gen_depth = 0;  // the depth the long-context test ran at (after the cap); 0: not run
  double depth_gen_tokens_per_s = 0;
  std::string device;  // where the model ran: "cpu", "cuda:0"
  // Against the base (has_base).
  bool has_base = false;
  bool was_base_cached = false;  // the base's distributions came from the cache
  std::string base_identity;
  double base_perplexity = 0;  // from the cached exact log p of the right tokens
  std::vector<double> base_chunk_mean_nll;
  // llama-perplexity --kl-divergence's "Mean ln(PPL(Q)/PPL(base))" and "Mean PPL(Q)/PPL(base)":
  // the mean of the per-token differences of the negative log-likelihoods, with the standard
  // error of that mean. Paired token by token, so it resolves far smaller costs than the two
  // perplexities' own errors would.
  double ln_ppl_ratio = 0, ln_ppl_ratio_error = 0;
  double ppl_ratio = 0, ppl_ratio_error = 0;
  double kl_mean = 0, kl_median = 0, kl_p99 = 0, kl_max = 0;
  double top1_agreement = 0;                 // fraction of positions where both models' argmax agree
  double delta_p_mean = 0, delta_p_rms = 0;  // p_model(right) - p_base(right)
  std::vector<float> kl_values;              // per scored position, in order
};

// The positions evaluate scores for `num_tokens` tokens: each chunk's first token index in the
// text, and the chunk-relative first scored position. Exposed for tests.
struct ChunkPlan {
  std::vector<int64_t> starts;
  int64_t first_scored = 0;  // positions first_scored .. context-2 are scored
};
Result<ChunkPlan> plan_chunks(int64_t num_tokens, int64_t context, int64_t stride, int64_t max_chunks);

Result<EvalResult> evaluate(const EvalOptions& options);

// log p(token) under the softmax of `logits` (in double precision, as evaluate scores).
double log_probability(std::span<const float> logits, int32_t token);

// llama-perplexity's estimate from `num_scored` tokens' summed negative log-likelihoods and their
// summed squares: exp of the mean, and that times the standard error of the mean (0 for one token).
struct PerplexityEstimate {
  double perplexity = 0;
  double error = 0;
};
PerplexityEstimate estimate_perplexity(double nll_sum, double nll_squares, int64_t num_scored);

// The engine settings evaluation loads a model with (prefix caching off, one context); kv_type
// one cache type for keys and values ("f16", "q8_0", ...) or keys/values ("q8_0/q4_0"); anything
// else is refused; device as EngineOptions::device.
Result<EngineOptions> eval_engine_options(int64_t context, int num_threads, const std::string& kv_type = "f16",
                                          const std::string& device = "auto");

}  // namespace iwb::quant
