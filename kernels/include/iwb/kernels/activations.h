// Gated feed-forward activations: out = act(gate) * up, with act = SiLU (SwiGLU: llama, qwen2)
// or the tanh approximation of GELU (GeGLU: gemma), the form ggml_gelu computes; or gpt-oss's
// clamped SwiGLU (ggml_swiglu_oai with llama.cpp's alpha 1.702, limit 7): g = min(gate, 7),
// u = clamp(up, -7, 7), out = g * sigmoid(1.702 g) * (u + 1).
#pragma once

#include "iwb/kernels/op_cost.h"

#include <cstdint>

namespace iwb {

enum class GatedActivation { SiLU, GeluTanh, SwigluOai };

inline constexpr float kSwigluOaiAlpha = 1.702f;
inline constexpr float kSwigluOaiLimit = 7.0f;

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
float swiglu_oai(float gate, float up);  // the whole gated product, as above

}  // namespace iwb
