// The CPU's mixture-of-experts state for one forward pass: the routing a layer's ExpertRouting
// op decides (each token's experts and weights, its rows grouped by expert), the grouped row
// buffers the expert ops read and write, and how many tokens each layer sent to each expert.
// Grouping is what batches the experts: every expert multiplies all the step's rows routed to
// it in one matmul, against a view of its slice of the layer's 3-D tensor.
#pragma once

#include "iwb/engine/model/model_config.h"
#include "iwb/engine/status.h"

#include <cstdint>
#include <span>
#include <vector>

namespace iwb {

class CpuExperts {
 public:
  // Buffers for `max_batch` tokens of `config` (nothing for a dense model).
  CpuExperts(const ModelConfig& config, int64_t max_batch);

  // Forgets the previous pass's counts (call at the start of a forward pass).
  void begin_pass();

  // Layer `layer`'s routing of `num_tokens` tokens from their router logits [tokens x
  // num_experts]: softmax (or sigmoid), the top num_experts_used (lower expert id first on
  // ties; chosen by score plus `selection_bias` [num_experts] where not null), their weights
  // (the unbiased scores, divided by their sum when the model normalises them, times its
  // weights scale; gpt-oss: the top k logits, weights the softmax over those k), and each
  // token's normalised row of `xn` [tokens x n_embd] copied into expert_in() once per routed
  // expert, grouped by expert. Refuses non-finite logits (a routing that would be arbitrary).
  Status route(int64_t layer, const float* router_logits, const float* selection_bias, const float* xn,
               int64_t num_tokens);

  // Rows of the grouped buffers routed to expert `e` in the current layer: [first, first + count).
  int64_t first_row(int64_t e) const { return m_offsets[static_cast<size_t>(e)]; }
  int64_t num_rows(int64_t e) const {
    return m_offsets[static_cast<size_t>(e) + 1] - m_offsets[static_cast<size_t>(e)];
  }
  // Experts with at least one row in the current layer, ascending.
  std::span<const int32_t> active_experts() const { return m_active; }

  // proj[t] = sum over token t's experts j of weight(t, j) * expert_out[row(t, j)], [tokens x
  // n_embd]; with is_accumulating the sum is added to proj (the shared experts' output).
  // expert_scales: each expert's output scale [num_experts] (Gemma 4's ffn_down_exps.scale), or null.
  void combine(int64_t num_tokens, float* proj, bool is_accumulating, const float* expert_scales = nullptr) const;

  // The grouped buffers, [max_batch * num_experts_used rows] each.
  float* expert_in() { return m_in.data(); }
  float* expert_gate() { return m_gate.data(); }
  float* expert_up() { return m_up.data(); }
  float* expert_out() { return m_out.data(); }
  float* router_logits() { return m_router_logits.data(); }

  // Tokens each layer routed to each expert in the pass so far, [num_layers x num_experts]
  // (row-major); empty for a dense model.
  std::span<const int32_t> pass_counts() const { return m_pass_counts; }
  uint64_t scratch_bytes() const;

 private:
  void keep_best_groups();  // group-limited routing over m_selection

  int64_t m_num_experts = 0;
  int64_t m_num_used = 0;
  int64_t m_width = 0;
  bool m_is_normalized = false;
  bool m_is_softmax_over_top_k = false;  // gpt-oss's gating (see route)
  bool m_is_sigmoid = false;             // glm4moe's gating
  float m_weights_scale = 1.0f;
  int64_t m_num_groups = 0, m_num_groups_used = 0;  // group-limited routing (DeepSeek V3); 0: off
  // The current layer's routing.
  std::vector<int32_t> m_choice;      // [tokens x k]: expert of each of a token's choices
  std::vector<float> m_weight;        // [tokens x k]: its gating weight
  std::vector<int64_t> m_row;         // [tokens x k]: its row in the grouped buffers
  std::vector<int64_t> m_offsets;     // [num_experts + 1]: first grouped row of each expert
  std::vector<int64_t> m_next_row;    // [num_experts]: while grouping, each expert's next free row
  std::vector<int32_t> m_active;      // experts with rows
  std::vector<float> m_probs;         // [num_experts] one token's softmax
  std::vector<float> m_selection;     // [num_experts] its scores plus the selection bias
  std::vector<float> m_group_scores;  // [num_groups] each group's two best selection scores summed
  std::vector<int32_t> m_group_order;
  std::vector<int32_t> m_order;  // [num_experts] its experts, best first
  // The grouped buffers and the router's output.
  std::vector<float> m_router_logits;  // [max_batch x num_experts]
  std::vector<float> m_in, m_out;      // [max_batch * k x n_embd]
  std::vector<float> m_gate, m_up;     // [max_batch * k x expert_ff]
  std::vector<int32_t> m_pass_counts;  // [num_layers x num_experts]
};

}  // namespace iwb
