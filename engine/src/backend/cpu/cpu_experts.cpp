// CpuExperts: top-k gating as llama.cpp's build_moe_ffn computes it for softmax gating
// (softmax over all experts, the k largest probabilities, optionally renormalised with the sum
// clamped to f16's smallest normal), for sigmoid gating with a selection bias (glm4moe: the k
// largest of sigmoid + bias, weighted by the sigmoid alone, renormalised, scaled; DeepSeek V3's
// choice limited to the best groups of experts) and for
// gpt-oss's softmax-weight gating (the k largest logits, softmax over those k), the grouping of
// rows by expert, and the weighted sum.
#include "backend/cpu/cpu_experts.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

namespace iwb {

CpuExperts::CpuExperts(const ModelConfig& c, int64_t max_batch) {
  if (!c.has_experts()) return;
  m_num_experts = c.num_experts;
  m_num_used = c.num_experts_used;
  m_width = c.embedding_length;
  m_is_normalized = c.is_expert_weight_normalized;
  m_is_softmax_over_top_k = c.is_expert_softmax_over_top_k;
  m_is_sigmoid = c.is_expert_gating_sigmoid;
  m_weights_scale = c.expert_weights_scale;
  if (c.num_expert_groups > 1) {
    m_num_groups = c.num_expert_groups;
    m_num_groups_used = c.num_expert_groups_used;
    m_group_scores.resize(static_cast<size_t>(m_num_groups));
    m_group_order.resize(static_cast<size_t>(m_num_groups));
  }
  const auto routed = static_cast<size_t>(max_batch * m_num_used);
  m_choice.resize(routed);
  m_weight.resize(routed);
  m_row.resize(routed);
  m_offsets.assign(static_cast<size_t>(m_num_experts) + 1, 0);
  m_next_row.resize(static_cast<size_t>(m_num_experts));
  m_active.reserve(static_cast<size_t>(m_num_experts));
  m_probs.resize(static_cast<size_t>(m_num_experts));
  m_selection.resize(static_cast<size_t>(m_num_experts));
  m_order.resize(static_cast<size_t>(m_num_experts));
  m_router_logits.resize(static_cast<size_t>(max_batch * m_num_experts));
  m_in.resize(routed * static_cast<size_t>(m_width));
  m_out.resize(routed * static_cast<size_t>(m_width));
  m_gate.resize(routed * static_cast<size_t>(c.expert_feed_forward_length));
  m_up.resize(routed * static_cast<size_t>(c.expert_feed_forward_length));
  m_pass_counts.assign(static_cast<size_t>(c.num_layers * m_num_experts), 0);
}

void CpuExperts::begin_pass() { std::fill(m_pass_counts.begin(), m_pass_counts.end(), 0); }

uint64_t CpuExperts::scratch_bytes() const {
  const size_t floats = m_router_logits.size() + m_in.size() + m_out.size() + m_gate.size() + m_up.size() +
                        m_weight.size() + m_probs.size() + m_selection.size();
  return static_cast<uint64_t>(floats) * sizeof(float) + (m_choice.size() + m_order.size()) * sizeof(int32_t) +
         (m_row.size() + m_offsets.size() + m_next_row.size()) * sizeof(int64_t);
}

// DeepSeek V3's group-limited choice (llama.cpp's build_moe_ffn): each group scored by the sum
// of its two best selection scores, the best m_num_groups_used groups kept (ties to the lower
// group), every other group's experts out of the running (-inf).
void CpuExperts::keep_best_groups() {
  const int64_t per_group = m_num_experts / m_num_groups;
  for (int64_t g = 0; g < m_num_groups; ++g) {
    const float* s = m_selection.data() + g * per_group;
    float first = -INFINITY, second = -INFINITY;
    for (int64_t i = 0; i < per_group; ++i) {
      if (s[i] > first) {
        second = first;
        first = s[i];
      } else if (s[i] > second) {
        second = s[i];
      }
    }
    m_group_scores[static_cast<size_t>(g)] = first + second;
    m_group_order[static_cast<size_t>(g)] = static_cast<int32_t>(g);
  }
  std::partial_sort(
      m_group_order.begin(), m_group_order.begin() + m_num_groups_used, m_group_order.end(), [&](int32_t a, int32_t b) {
        const float sa = m_group_scores[static_cast<size_t>(a)], sb = m_group_scores[static_cast<size_t>(b)];
        return sa > sb || (sa == sb && a < b);
      });
  for (int64_t j = m_num_groups_used; j < m_num_groups; ++j) {
    float* s = m_selection.data() + m_group_order[static_cast<size_t>(j)] * per_group;
    std::fill(s, s + per_group, -INFINITY);
  }
}

Status CpuExperts::route(int64_t layer, const float* logits, const float* selection_bias, const float* xn, int64_t n) {
  const int64_t e_count = m_num_experts, k = m_num_used, d = m_width;
  std::fill(m_offsets.begin(), m_offsets.end(), 0);
  for (int64_t t = 0; t < n; ++t) {
    const float* row = logits + t * e_count;
    float max_logit = row[0];
    for (int64_t e = 0; e < e_count; ++e) {
      if (!std::isfinite(row[e])) {
        return make_error(ErrorCode::InvalidArgument, "the expert router of layer " + std::to_string(layer) +
                                                          " produced a non-finite score (the activations overflowed)");
      }
      max_logit = std::max(max_logit, row[e]);
    }
    if (m_is_softmax_over_top_k) {
      std::copy(row, row + e_count, m_probs.begin());  // chosen by logit; softmax over the k below
    } else if (m_is_sigmoid) {
      for (int64_t e = 0; e < e_count; ++e) m_probs[static_cast<size_t>(e)] = 1.0f / (1.0f + std::exp(-row[e]));
    } else {
      float sum = 0;
      for (int64_t e = 0; e < e_count; ++e) sum += (m_probs[static_cast<size_t>(e)] = std::exp(row[e] - max_logit));
      for (int64_t e = 0; e < e_count; ++e) m_probs[static_cast<size_t>(e)] /= sum;
    }
    // The k best (by score plus the selection bias where the model has one: its weights stay
    // the unbiased scores); ties go to the lower expert id, so the choice never depends on the sort.
    const float* by = m_probs.data();
    if (selection_bias != nullptr || m_num_groups > 1) {
      for (int64_t e = 0; e < e_count; ++e) {
        m_selection[static_cast<size_t>(e)] =
            m_probs[static_cast<size_t>(e)] + (selection_bias != nullptr ? selection_bias[e] : 0.0f);
      }
      if (m_num_groups > 1) keep_best_groups();
      by = m_selection.data();
    }
    for (int64_t e = 0; e < e_count; ++e) m_order[static_cast<size_t>(e)] = static_cast<int32_t>(e);
    std::partial_sort(m_order.begin(), m_order.begin() + k, m_order.end(), [&](int32_t a, int32_t b) {
      const float pa = by[a], pb = by[b];
      return pa > pb || (pa == pb && a < b);
    });
    float chosen_sum = 0;
    for (int64_t j = 0; j < k; ++j) {
      const int32_t e = m_order[static_cast<size_t>(j)];
      m_choice[static_cast<size_t>(t * k + j)] = e;
      m_weight[static_cast<size_t>(t * k + j)] = m_probs[static_cast<size_t>(e)];
      chosen_sum += m_probs[static_cast<size_t>(e)];
      ++m_offsets[static_cast<size_t>(e) + 1];
    }
    if (m_is_softmax_over_top_k) {
      float* w = m_weight.data() + t * k;
      const float top = *std::max_element(w, w + k);
      float sum = 0;
      for (int64_t j = 0; j < k; ++j) sum += (w[j] = std::exp(w[j] - top));
      for (int64_t j = 0; j < k; ++j) w[j] *= 1.0f / sum;
    }
    if (m_is_normalized) {
      const float divisor = std::max(chosen_sum, 6.103515625e-5f);
      for (int64_t j = 0; j < k; ++j) m_weight[static_cast<size_t>(t * k + j)] /= divisor;
    }
    if (m_weights_scale != 1.0f) {
      for (int64_t j = 0; j < k; ++j) m_weight[static_cast<size_t>(t * k + j)] *= m_weights_scale;
    }
  }
  // Counts -> first rows; the step's load; the experts that run.
  m_active.clear();
  int32_t* counts = m_pass_counts.data() + layer * e_count;
  for (int64_t e = 0; e < e_count; ++e) {
    const int64_t rows = m_offsets[static_cast<size_t>(e) + 1];
    counts[e] += static_cast<int32_t>(rows);
    if (rows > 0) m_active.push_back(static_cast<int32_t>(e));
    m_offsets[static_cast<size_t>(e) + 1] = m_offsets[static_cast<size_t>(e)] + rows;
  }
  // Each token's rows into its experts' groups, tokens in order within a group.
  std::copy(m_offsets.begin(), m_offsets.end() - 1, m_next_row.begin());
  for (int64_t t = 0; t < n; ++t) {
    for (int64_t j = 0; j < k; ++j) {
      const int32_t e = m_choice[static_cast<size_t>(t * k + j)];
      const int64_t r = m_next_row[static_cast<size_t>(e)]++;
      m_row[static_cast<size_t>(t * k + j)] = r;
      std::memcpy(m_in.data() + r * d, xn + t * d, static_cast<size_t>(d) * sizeof(float));
    }
  }
  return {};
}

void CpuExperts::combine(int64_t n, float* proj, bool is_accumulating, const float* expert_scales) const {
  const int64_t k = m_num_used, d = m_width;
  for (int64_t t = 0; t < n; ++t) {
    float* y = proj + t * d;
    if (!is_accumulating) std::fill(y, y + d, 0.0f);
    for (int64_t j = 0; j < k; ++j) {
      const size_t routed = static_cast<size_t>(t * k + j);
      const float w = m_weight[routed] * (expert_scales != nullptr ? expert_scales[m_choice[routed]] : 1.0f);
      const float* x = m_out.data() + m_row[static_cast<size_t>(t * k + j)] * d;
      for (int64_t i = 0; i < d; ++i) y[i] += w * x[i];
    }
  }
}

}  // namespace iwb
