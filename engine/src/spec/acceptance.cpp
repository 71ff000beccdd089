// Acceptance rule of speculative sampling over sparse distributions (see acceptance.h).
#include "iwb/engine/spec/acceptance.h"

#include <algorithm>
#include <unordered_map>
#include <vector>

namespace iwb::spec {

double probability_of(SparseDistribution dist, int32_t token) {
  for (const TokenProb& t : dist) {
    if (t.id == token) return t.prob;
  }
  return 0.0;
}

bool accept_draft_token(SparseDistribution target, SparseDistribution draft, int32_t token, double u) {
  const double p_target = probability_of(target, token);
  double p_draft = draft.empty() ? 1.0 : probability_of(draft, token);
  // A token its stated distribution could not give was chosen some other way: treated as
  // one-hot, as sample_residual does.
  if (p_draft <= 0.0) p_draft = 1.0;
  return u < std::min(1.0, p_target / p_draft);
}

int32_t sample_residual(SparseDistribution target, SparseDistribution draft, int32_t rejected_token, double u) {
  if (!draft.empty() && probability_of(draft, rejected_token) <= 0.0) draft = {};
  // The draft's probabilities by token, looked up once per target token: with top-k and top-p
  // off both distributions span the whole vocabulary, where a search per token would be quadratic.
  std::unordered_map<int32_t, double> draft_probs;
  draft_probs.reserve(draft.size());
  for (const TokenProb& t : draft) draft_probs.emplace(t.id, t.prob);  // the first, as probability_of
  std::vector<TokenProb> residual;
  residual.reserve(target.size());
  double total = 0;
  for (const TokenProb& t : target) {
    double p_draft = t.id == rejected_token ? 1.0 : 0.0;
    if (!draft.empty()) {
      const auto found = draft_probs.find(t.id);
      p_draft = found == draft_probs.end() ? 0.0 : found->second;
    }
    const double r = std::max(0.0, static_cast<double>(t.prob) - p_draft);
    if (r > 0) {
      residual.push_back({t.id, static_cast<float>(r)});
      total += r;
    }
  }
  if (total <= 0) return sample_sparse(target, u);
  return sample_sparse(residual, u);
}

int32_t sample_sparse(SparseDistribution dist, double u) {
  if (dist.empty()) return -1;
  double total = 0;
  for (const TokenProb& t : dist) total += t.prob;
  const double target = u * total;
  double cumulative = 0;
  for (const TokenProb& t : dist) {
    cumulative += t.prob;
    if (target < cumulative) return t.id;
  }
  return dist.back().id;
}

}  // namespace iwb::spec
