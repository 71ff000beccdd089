// Rotary position embedding, in place, in llama.cpp's two layouts: Normal rotates adjacent
// pairs (x[2i], x[2i+1]) (llama), NeoX rotates halves (x[i], x[i + n/2]) (qwen2, gemma3).
// Angle of pair i at position p: p * freq_scale * freq_base^(-2i/n) / freq_factor[i].
#pragma once

#include "iwb/kernels/op_cost.h"

#include <cstdint>

namespace iwb {

enum class RopeLayout { Normal, NeoX };

struct RopeArgs {
  float* data = nullptr;             // [num_tokens x num_heads x head_dim], rotated in place
  int64_t num_tokens = 0;
  int64_t num_heads = 0;
  int64_t head_dim = 0;
  int64_t num_rotated = 0;           // even, <= head_dim; dimensions past it pass through
  const int32_t* positions = nullptr;  // [num_tokens]
  RopeLayout layout = RopeLayout::Normal;
  float freq_base = 10000.0f;
  float freq_scale = 1.0f;           // linear scaling: 1 / rope.scaling.factor
  const float* freq_factors = nullptr;  // [num_rotated / 2] (llama 3 rope_freqs) or null
};

bool rope(const RopeArgs& args);
bool rope_ref(const RopeArgs& args);  // angles and rotation in double
OpCost rope_cost(const RopeArgs& args);

}  // namespace iwb
