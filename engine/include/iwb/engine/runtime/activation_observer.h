// A hook on the inputs of the forward pass's weight matmuls, off unless an observer is set:
// `iwb imatrix` collects per-channel mean squared activations through it. Called on the thread
// that runs step(), once per matmul with all of the step's token rows.
#pragma once

#include <cstdint>

namespace iwb {

class ActivationObserver {
 public:
  virtual ~ActivationObserver() = default;
  // weight: the tensor's kind as the forward pass names it ("attn_q", "ffn_down", "output");
  // layer: its block, -1 outside the blocks. input: [num_rows x num_features] row-major.
  virtual void observe_matmul_input(const char* weight, int64_t layer, const float* input, int64_t num_rows,
                                    int64_t num_features) = 0;
  // Mixture of experts: the rows routed to `expert` (of `num_experts`) on their way into its
  // slice of an expert tensor ("ffn_gate_exps", "ffn_up_exps", "ffn_down_exps"), once per
  // expert with rows in the step. Each expert's channels are counted on their own, as
  // llama-imatrix counts them. Observers that only want dense matrices leave it.
  virtual void observe_expert_matmul_input(const char* weight, int64_t layer, int64_t expert, int64_t num_experts,
                                           const float* input, int64_t num_rows, int64_t num_features) {
    (void)weight, (void)layer, (void)expert, (void)num_experts, (void)input, (void)num_rows, (void)num_features;
  }
};

}  // namespace iwb
