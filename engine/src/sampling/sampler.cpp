// Sampler: the filter chain runs in llama.cpp's default order (penalties, top-k, top-p, min-p,
// temperature) so settings mean what users of that tool expect.
#include "iwb/engine/sampling/sampler.h"

#include "iwb/kernels/reduce.h"

#include <algorithm>
#include <cmath>
#include <unordered_map>

namespace iwb {
namespace {

struct Candidate {
  int32_t id;
  float logit;
};

bool has_penalties(const SamplingParams& p, std::span<const int32_t> history) {
  const bool any = p.repeat_penalty != 1.0f || p.frequency_penalty != 0.0f || p.presence_penalty != 0.0f;
  return any && !history.empty() && p.penalty_last_n != 0;
}

void apply_penalties(const SamplingParams& p, std::span<const int32_t> history, std::vector<float>& logits) {
  if (!has_penalties(p, history)) return;
  const size_t n =
      p.penalty_last_n < 0 ? history.size() : std::min(history.size(), static_cast<size_t>(p.penalty_last_n));
  std::unordered_map<int32_t, int> counts;
  for (size_t i = history.size() - n; i < history.size(); ++i) counts[history[i]]++;
  for (const auto& [id, count] : counts) {
    if (id < 0 || static_cast<size_t>(id) >= logits.size()) continue;
    float& l = logits[static_cast<size_t>(id)];
    if (p.repeat_penalty != 1.0f) l = l > 0 ? l / p.repeat_penalty : l * p.repeat_penalty;
    l -= static_cast<float>(count) * p.frequency_penalty + p.presence_penalty;
  }
}

// Candidate a ranks before b: the larger logit, on equal logits the smaller id.
bool ranks_before(const Candidate& a, const Candidate& b) {
  return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
}

// The k best of the logits in rank order (finite ones only when `finite_only`), as a partial
// sort of all of them would give, in one pass: a heap of k whose worst member is the bar a
// logit must pass (most of a vocabulary fails that one comparison). A partial sort of 150k
// candidates took about 0.3 ms a token.
std::vector<Candidate> best_candidates(std::span<const float> logits, size_t k, bool finite_only) {
  std::vector<Candidate> heap;  // a max-heap under ranks_before: front() is the worst kept
  if (k == 0) return heap;
  heap.reserve(k);
  const float* x = logits.data();
  const size_t n = logits.size();
  float bar = -INFINITY;  // the worst kept logit once k are kept
  for (size_t i = 0; i < n; ++i) {
    i = static_cast<size_t>(find_at_least_f32(x, static_cast<int64_t>(i), static_cast<int64_t>(n), bar));
    if (i == n) break;  // the rest below the bar (or NaN)
    if (finite_only ? !std::isfinite(x[i]) : std::isnan(x[i])) continue;
    const Candidate c{static_cast<int32_t>(i), x[i]};
    if (heap.size() < k) {
      heap.push_back(c);
      std::push_heap(heap.begin(), heap.end(), ranks_before);
    } else if (ranks_before(c, heap.front())) {
      std::pop_heap(heap.begin(), heap.end(), ranks_before);
      heap.back() = c;
      std::push_heap(heap.begin(), heap.end(), ranks_before);
    } else {
      continue;
    }
    if (heap.size() == k) bar = heap.front().logit;
  }
  std::sort_heap(heap.begin(), heap.end(), ranks_before);
  return heap;
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
  return static_cast<int32_t>(argmax_f32(logits.data(), static_cast<int64_t>(logits.size())));
}

Sampler::Sampler(const SamplingParams& params) : m_params(params), m_rng(params.seed) {}

std::vector<TokenProb> Sampler::candidates(std::span<const float> raw_logits, std::span<const int32_t> history) const {
  // The logits are copied only when a bias or the penalties change some of them; the bias
  // first, as llama.cpp's sampler chain has it.
  std::vector<float> penalized;
  if (!m_params.logit_bias.empty() || has_penalties(m_params, history)) {
    penalized.assign(raw_logits.begin(), raw_logits.end());
    for (const auto& [id, bias] : m_params.logit_bias) {
      if (id >= 0 && static_cast<size_t>(id) < penalized.size()) penalized[static_cast<size_t>(id)] += bias;
    }
    apply_penalties(m_params, history, penalized);
  }
  const std::span<const float> logits = penalized.empty() ? raw_logits : std::span<const float>(penalized);
  if (m_params.is_greedy()) {
    const int32_t best = argmax(logits);
    if (best < 0) return {};
    return {TokenProb{best, 1.0f}};
  }

  // Top-k first (every finite logit when top-k is off).
  const size_t k = m_params.top_k > 0 ? static_cast<size_t>(m_params.top_k) : logits.size();
  std::vector<Candidate> c = best_candidates(logits, std::min(k, logits.size()), /*finite_only=*/true);
  if (c.empty()) return {};

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
  const auto n = static_cast<int64_t>(logits.size());
  const float max_logit = logits[static_cast<size_t>(argmax_f32(logits.data(), n))];
  const double log_norm = max_logit + std::log(sum_exp_f32(logits.data(), n, max_logit));
  const auto logprob_of = [&](int32_t id) { return static_cast<float>(logits[static_cast<size_t>(id)] - log_norm); };
  if (token >= 0 && static_cast<size_t>(token) < logits.size()) out.logprob = logprob_of(token);
  const size_t k = std::min(logits.size(), static_cast<size_t>(std::max(num_top, 0)));
  if (k == 0) return out;
  const std::vector<Candidate> best = best_candidates(logits, k, /*finite_only=*/false);
  out.top.reserve(best.size());
  for (const Candidate& c : best) out.top.push_back({c.id, logprob_of(c.id)});
  return out;
}

}  // namespace iwb
