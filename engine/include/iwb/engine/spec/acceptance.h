// The verification rules of speculative decoding over explicit distributions. Greedy: a draft
// token is accepted while it equals the target's choice. Sampling (Leviathan et al. 2023,
// Chen et al. 2023): accept draft token d with probability min(1, p_t(d) / p_d(d)); on
// rejection draw from the normalised max(0, p_t - p_d); so every emitted token follows p_t.
#pragma once

#include "iwb/engine/sampling/sampler.h"

#include <cstdint>
#include <span>
#include <vector>

namespace iwb::spec {

// A distribution over token ids as sparse (id, probability) pairs; ids absent have 0.
using SparseDistribution = std::span<const TokenProb>;

// Probability of `token` in `dist` (0 when absent).
double probability_of(SparseDistribution dist, int32_t token);

// Whether draft token `token`, drawn from `draft` (empty: one-hot on the token), is accepted
// against `target` with the uniform draw u in [0, 1): u < min(1, p_t / p_d).
bool accept_draft_token(SparseDistribution target, SparseDistribution draft, int32_t token, double u);

// The token drawn on rejection from the normalised max(0, p_t - p_d) with uniform u in [0, 1)
// (draft empty: one-hot on rejected_token). When the residual is all zero (p_d >= p_t
// everywhere, which only rounding can cause after a rejection) it draws from p_t.
int32_t sample_residual(SparseDistribution target, SparseDistribution draft, int32_t rejected_token, double u);

// Inverse-CDF draw from a sparse distribution (normalised by its sum).
int32_t sample_sparse(SparseDistribution dist, double u);

// A whole verification over K draft positions, for tests and tools that hold explicit
// distributions: targets[j] is the target's distribution after j accepted tokens (K + 1 of
// them), drafts[j] the distribution draft token j came from. `uniform` returns draws in [0, 1).
struct VerifyOutcome {
  int32_t num_accepted = 0;
  std::vector<int32_t> tokens;  // accepted draft tokens, then the correction or bonus token
};
template <typename Uniform>
VerifyOutcome verify_sampled(std::span<const std::vector<TokenProb>> targets,
                             std::span<const std::vector<TokenProb>> drafts, std::span<const int32_t> draft_tokens,
                             Uniform&& uniform) {
  VerifyOutcome out;
  for (size_t j = 0; j < draft_tokens.size(); ++j) {
    const SparseDistribution draft = j < drafts.size() ? SparseDistribution(drafts[j]) : SparseDistribution();
    if (accept_draft_token(targets[j], draft, draft_tokens[j], uniform())) {
      out.tokens.push_back(draft_tokens[j]);
      ++out.num_accepted;
      continue;
    }
    out.tokens.push_back(sample_residual(targets[j], draft, draft_tokens[j], uniform()));
    return out;
  }
  out.tokens.push_back(sample_sparse(targets[draft_tokens.size()], uniform()));
  return out;
}

}  // namespace iwb::spec
