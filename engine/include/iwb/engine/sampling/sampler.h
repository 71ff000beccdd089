// Token sampling: penalties, top-k, top-p, min-p, temperature, seeded draws; greedy when the
// temperature is zero. Same seed and same logits give the same tokens.
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <utility>
#include <vector>

namespace iwb {

struct SamplingParams {
  float temperature = 0.8f;        // <= 0: greedy (argmax)
  int32_t top_k = 40;              // <= 0: off
  float top_p = 0.95f;             // >= 1: off
  float min_p = 0.05f;             // <= 0: off; relative to the most likely token
  float repeat_penalty = 1.1f;     // 1: off; divides positive logits, multiplies negative ones
  float frequency_penalty = 0.0f;  // subtracts count * f for each token seen
  float presence_penalty = 0.0f;   // subtracts p once for each token seen
  int32_t penalty_last_n = 64;     // how many recent tokens the penalties look at (-1: all)
  uint64_t seed = 0xC0FFEE;
  // Added to the named tokens' logits before anything else (OpenAI's and llama.cpp's logit
  // bias: -100 all but bans a token, +100 all but forces it). Ids are checked by the engine.
  std::vector<std::pair<int32_t, float>> logit_bias;

  bool is_greedy() const { return temperature <= 0.0f; }
};

// One candidate after filtering: token id and its probability (normalised over survivors).
struct TokenProb {
  int32_t id;
  float prob;
};

class Sampler {
 public:
  explicit Sampler(const SamplingParams& params);

  // Picks the next token from raw logits (one per vocab entry). `history` is the sequence so
  // far (prompt and generated), used by the penalties. `logits` is left unchanged.
  int32_t sample(std::span<const float> logits, std::span<const int32_t> history);

  // The candidates that survive penalties and filters, with their final probabilities, sorted
  // by probability (highest first). What `sample` draws from; exposed for tests and the UI.
  std::vector<TokenProb> candidates(std::span<const float> logits, std::span<const int32_t> history) const;

  void reseed(uint64_t seed) { m_rng.seed(seed); }
  const SamplingParams& params() const { return m_params; }

 private:
  SamplingParams m_params;
  std::mt19937_64 m_rng;
};

// Index of the largest logit (lowest index on ties).
int32_t argmax(std::span<const float> logits);

// A token's natural log-probability under the model's distribution (softmax of raw logits).
struct TokenLogprob {
  int32_t token = -1;
  float logprob = 0;
};

// What an API reports as `logprobs`: the chosen token's log-probability and the `num_top` most
// likely tokens (highest first, lower id on ties), from the raw logits (before penalties,
// filters and temperature, as vLLM and llama-server report them by default).
struct TokenLogprobs {
  float logprob = 0;
  std::vector<TokenLogprob> top;
};
TokenLogprobs token_logprobs(std::span<const float> logits, int32_t token, int32_t num_top);

}  // namespace iwb
