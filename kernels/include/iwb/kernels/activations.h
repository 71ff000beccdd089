// Gated feed-forward activations: out = act(gate) * up, with act = SiLU (SwiGLU: llama, qwen2)
// or the tanh approximation of GELU (GeGLU: gemma), the form ggml_gelu computes.
#pragma once

#include "iwb/kernels/op_cost.h"

#include <cstdint>

namespace iwb {

enum class GatedActivation { SiLU, GeluTanh };

struct GatedActivationArgs {
  const float* gate = nullptr;  // [num_elements]
  const float* up = nullptr;    // [num_elements]
  float* output = nullptr;      // [num_elements]; may be gate or up
  int64_t num_elements = 0;
  GatedActivation kind = GatedActivation::SiLU;
  int num_threads = 0;          // 0: OpenMP's default
};

bool gated_activation(const GatedActivationArgs& args);
bool gated_activation_ref(const GatedActivationArgs& args);  // double precision
OpCost gated_activation_cost(const GatedActivationArgs& args);

float silu(float x);
float gelu_tanh(float x);

}  // namespace iwb
