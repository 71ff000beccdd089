// Expert load of a mixture-of-experts model, for the UI's expert-load view: per layer, how many
// tokens the router sent to each expert over the engine's last steps, so imbalance is visible.
// Engine::expert_load() returns an ExpertLoadSnapshot (a copy, safe to pass to the GUI thread);
// ExpertLoadWindow is the sliding window of steps the engine keeps it in.
#pragma once

#include <cstdint>
#include <deque>
#include <span>
#include <vector>

namespace iwb {

struct ExpertLoadSnapshot {
  int64_t num_layers = 0;
  int64_t num_experts = 0;       // 0: a dense model; everything below is then empty or 0
  int64_t num_experts_used = 0;  // k: in every layer each token counts once in k experts
  // Layers [0, num_dense_layers) have a dense FFN (glm4moe's leading layers): no routing, their
  // counts stay 0.
  int64_t num_dense_layers = 0;
  int32_t window_steps = 0;  // steps the window holds at most (EngineOptions::expert_load_steps)
  int32_t num_steps = 0;     // steps in the window now (at most window_steps)
  // Tokens those steps ran through the model. Each layer's counts sum to k x this, except the
  // last layer's: its feed-forward block runs only on the rows that sample (forward_plan.h), so
  // a prompt routes one token there. Per-layer shares divide by routed(layer).
  int64_t num_tokens = 0;
  uint64_t last_step = 0;  // Engine step count at the newest step in the window (0: none yet)
  // Tokens routed to each expert over the window, [num_layers x num_experts] row-major.
  std::vector<int64_t> counts;

  bool is_moe() const { return num_experts > 0; }
  bool is_dense_layer(int64_t layer) const { return layer < num_dense_layers; }
  int64_t count(int64_t layer, int64_t expert) const {
    return counts[static_cast<size_t>(layer * num_experts + expert)];
  }
  // Token slots layer `layer` routed over the window (k x the tokens that reached its experts).
  int64_t routed(int64_t layer) const;
  // Layer `layer`'s most loaded expert over its mean load (1: perfectly even; num_experts /
  // num_experts_used: every token of the window went to the same k experts). 0 with no tokens.
  double imbalance(int64_t layer) const;
};

// The last `window_steps` steps' routing counts and their running sum.
class ExpertLoadWindow {
 public:
  ExpertLoadWindow() = default;
  ExpertLoadWindow(int64_t num_layers, int64_t num_experts, int64_t num_experts_used, int32_t window_steps,
                   int64_t num_dense_layers = 0);

  // One step's counts [num_layers x num_experts] over `num_tokens` tokens; the oldest step
  // leaves the window when it is full. Counts of another size are ignored (a dense model).
  void add_step(std::span<const int32_t> counts, int64_t num_tokens, uint64_t step);
  void clear();
  ExpertLoadSnapshot snapshot() const;

 private:
  struct Step {
    std::vector<int32_t> counts;
    int64_t num_tokens = 0;
  };
  ExpertLoadSnapshot m_sum;  // counts and num_tokens summed over m_steps
  std::deque<Step> m_steps;
};

}  // namespace iwb
