// ExpertLoadWindow: a running sum over the last steps' routing counts (add the new step,
// subtract the one that leaves), so a snapshot costs one copy of num_layers x num_experts.
#include "iwb/engine/runtime/expert_load.h"

#include <algorithm>

namespace iwb {

int64_t ExpertLoadSnapshot::routed(int64_t layer) const {
  if (num_experts <= 0 || layer < 0 || layer >= num_layers) return 0;
  int64_t total = 0;
  for (int64_t e = 0; e < num_experts; ++e) total += count(layer, e);
  return total;
}

double ExpertLoadSnapshot::imbalance(int64_t layer) const {
  if (num_experts <= 0 || num_tokens <= 0 || layer < 0 || layer >= num_layers) return 0;
  int64_t max_count = 0;
  for (int64_t e = 0; e < num_experts; ++e) max_count = std::max(max_count, count(layer, e));
  const int64_t total = routed(layer);
  if (total == 0) return 0;
  return static_cast<double>(max_count) * static_cast<double>(num_experts) / static_cast<double>(total);
}

ExpertLoadWindow::ExpertLoadWindow(int64_t num_layers, int64_t num_experts, int64_t num_experts_used,
                                   int32_t window_steps, int64_t num_dense_layers) {
  m_sum.num_layers = num_layers;
  m_sum.num_dense_layers = num_experts > 0 ? std::clamp<int64_t>(num_dense_layers, 0, num_layers) : 0;
  m_sum.num_experts = num_experts;
  m_sum.num_experts_used = num_experts_used;
  m_sum.window_steps = std::max(1, window_steps);
  m_sum.counts.assign(static_cast<size_t>(num_experts > 0 ? num_layers * num_experts : 0), 0);
}

void ExpertLoadWindow::add_step(std::span<const int32_t> counts, int64_t num_tokens, uint64_t step) {
  if (m_sum.counts.empty() || counts.size() != m_sum.counts.size()) return;
  if (static_cast<int32_t>(m_steps.size()) == m_sum.window_steps) {
    // The oldest step leaves; its buffer is reused for the new one.
    Step old = std::move(m_steps.front());
    m_steps.pop_front();
    for (size_t i = 0; i < old.counts.size(); ++i) m_sum.counts[i] -= old.counts[i];
    m_sum.num_tokens -= old.num_tokens;
    old.counts.assign(counts.begin(), counts.end());
    old.num_tokens = num_tokens;
    m_steps.push_back(std::move(old));
  } else {
    m_steps.push_back({std::vector<int32_t>(counts.begin(), counts.end()), num_tokens});
  }
  for (size_t i = 0; i < counts.size(); ++i) m_sum.counts[i] += counts[i];
  m_sum.num_tokens += num_tokens;
  m_sum.num_steps = static_cast<int32_t>(m_steps.size());
  m_sum.last_step = step;
}

void ExpertLoadWindow::clear() {
  m_steps.clear();
  std::fill(m_sum.counts.begin(), m_sum.counts.end(), 0);
  m_sum.num_tokens = 0;
  m_sum.num_steps = 0;
  m_sum.last_step = 0;
}

ExpertLoadSnapshot ExpertLoadWindow::snapshot() const { return m_sum; }

}  // namespace iwb
