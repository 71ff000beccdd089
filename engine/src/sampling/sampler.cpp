// Sampler: the filter chain runs in llama.cpp's default order (penalties, top-k, top-p, min-p,
// temperature) so settings mean what users of that tool expect.
#include "iwb/engine/sampling/sampler.h"

#include <algorithm>
#include <cmath>
#include <unordered_map>

namespace iwb {
namespace {

struct Candidate {
  int32_t id;
  float logit;
};

void apply_penalties(const SamplingParams& p, std::span<const int32_t> history, std::vector<float>& logits) {
  const bool any = p.repeat_penalty != 1.0f || p.frequency_penalty != 0.0f || p.presence_penalty != 0.0f;
  if (!any || history.empty() || p.penalty_last_n == 0) return;
  const size_t n = p.penalty_last_n < 0 ? history.size()
                                        : std::min(history.size(), static_cast<size_t>(p.penalty_last_n));
  std::unordered_map<int32_t, int> counts;
  for (size_t i = history.size() - n; i < history.size(); ++i) counts[history[i]]++;
  for (const auto& [id, count] : counts) {
    if (id < 0 || static_cast<size_t>(id) >= logits.size()) continue;
    float& l = logits[static_cast<size_t>(id)];
    if (p.repeat_penalty != 1.0f) l = l > 0 ? l / p.repeat_penalty : l * p.repeat_penalty;
    l -= static_cast<float>(count) * p.frequency_penalty + p.presence_penalty;
  }
}

// Softmax over candidates (sorted by logit, descending) at temperature t.
std::vector<float> softmax(const std::vector<Candidate>& c, float t) {
  std::vector<float> probs(c.size());
  if (c.empty()) return probs;
  const float max_logit = c.front().logit;
  double sum = 0;
  for (size_t i = 0; i < c.size(); ++i) {
    probs[i] = std::exp((c[i].logit - max_logit) / t);
    sum += probs[i];
  }
  for (float& q : probs) q = static_cast<float>(q / sum);
  return probs;
}

}  // namespace

int32_t argmax(std::span<const float> logits) {
  if (logits.empty()) return -1;
  return static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
}

Sampler::Sampler(const SamplingParams& params) : m_params(params), m_rng(params.seed) {}

std::vector<TokenProb> Sampler::candidates(std::span<const float> raw_logits, std::span<const int32_t> history) const {
  std::vector<float> logits(raw_logits.begin(), raw_logits.end());
  apply_penalties(m_params, history, logits);
  if (m_params.is_greedy()) {
    const int32_t best = argmax(logits);
    if (best < 0) return {};
    return {TokenProb{best, 1.0f}};
  }

  std::vector<Candidate> c;
  c.reserve(logits.size());
  for (size_t i = 0; i < logits.size(); ++i) {
    if (std::isfinite(logits[i])) c.push_back({static_cast<int32_t>(i), logits[i]});
  }
  if (c.empty()) return {};
  const auto by_logit = [](const Candidate& a, const Candidate& b) {
    return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
  };
  // Top-k first: a partial sort keeps a 150k vocabulary cheap.
  if (m_params.top_k > 0 && static_cast<size_t>(m_params.top_k) < c.size()) {
    std::partial_sort(c.begin(), c.begin() + m_params.top_k, c.end(), by_logit);
    c.resize(static_cast<size_t>(m_params.top_k));
  } else {
    std::sort(c.begin(), c.end(), by_logit);
  }

  // Top-p and min-p look at probabilities at temperature 1, as llama.cpp does.
  std::vector<float> probs = softmax(c, 1.0f);
  if (m_params.top_p < 1.0f) {
    double cumulative = 0;
    size_t keep = c.size();
    for (size_t i = 0; i < c.size(); ++i) {
      cumulative += probs[i];
      if (cumulative >= m_params.top_p) {
        keep = i + 1;
        break;
      }
    }
    c.resize(keep);
    probs.resize(keep);
  }
  if (m_params.min_p > 0.0f) {
    const float threshold = probs.front() * m_params.min_p;
    size_t keep = 1;
    while (keep < c.size() && probs[keep] >= threshold) ++keep;
    c.resize(keep);
  }

  probs = softmax(c, m_params.temperature);
  std::vector<TokenProb> out(c.size());
  for (size_t i = 0; i < c.size(); ++i) out[i] = {c[i].id, probs[i]};
  return out;
}

int32_t Sampler::sample(std::span<const float> logits, std::span<const int32_t> history) {
  const std::vector<TokenProb> c = candidates(logits, history);
  if (c.empty()) return -1;
  if (c.size() == 1) return c.front().id;
  // Inverse-CDF draw with our own uniform so results do not depend on the standard library's
  // distribution implementation (same seed, same output on every platform).
  const double u = static_cast<double>(m_rng() >> 11) * 0x1.0p-53;
  double cumulative = 0;
  for (const TokenProb& t : c) {
    cumulative += t.prob;
    if (u < cumulative) return t.id;
  }
  return c.back().id;
}

TokenLogprobs token_logprobs(std::span<const float> logits, int32_t token, int32_t num_top) {
  TokenLogprobs out;
  if (logits.empty()) return out;
  // log p_i = l_i - (max + log sum exp(l_j - max)), in double so a 150k vocabulary sums exactly enough.
  const float max_logit = *std::max_element(logits.begin(), logits.end());
  double sum = 0;
  for (const float l : logits) sum += std::exp(static_cast<double>(l) - max_logit);
  const double log_norm = max_logit + std::log(sum);
  const auto logprob_of = [&](int32_t id) { return static_cast<float>(logits[static_cast<size_t>(id)] - log_norm); };
  if (token >= 0 && static_cast<size_t>(token) < logits.size()) out.logprob = logprob_of(token);
  const size_t k = std::min(logits.size(), static_cast<size_t>(std::max(num_top, 0)));
  if (k == 0) return out;
  std::vector<int32_t> ids(logits.size());
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>(i);
  std::partial_sort(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(k), ids.end(), [&](int32_t a, int32_t b) {
    const float la = logits[static_cast<size_t>(a)], lb = logits[static_cast<size_t>(b)];
    return la > lb || (la == lb && a < b);
  });
  out.top.reserve(k);
  for (size_t i = 0; i < k; ++i) out.top.push_back({ids[i], logprob_of(ids[i])});
  return out;
}

}  // namespace iwb
