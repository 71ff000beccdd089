// Rotary position embedding, in place, in llama.cpp's two layouts: Normal rotates adjacent
// pairs (x[2i], x[2i+1]) (llama), NeoX rotates halves (x[i], x[i + n/2]) (qwen2, gemma3).
// Angle of pair i at position p: p * freq_scale * freq_base^(-2i/n) / freq_factor[i].
// YaRN (ext_factor > 0, gpt-oss), as ggml's rope_yarn: pair i's angle mixes the interpolated
// angle above with the unscaled one, ramp(i) * ext_factor of the latter, the ramp falling from 1
// to 0 between the correction dims of beta_fast and beta_slow (rope_yarn_corr_dims); cos and sin
// are multiplied by attn_factor * (1 + 0.1 ln(1 / freq_scale)) (without YaRN: attn_factor).
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
  float ext_factor = 0.0f;              // YaRN extrapolation mix (1 with rope.scaling.type yarn), 0: off
  float attn_factor = 1.0f;             // magnitude scale of cos and sin
  float beta_fast = 32.0f;              // YaRN correction range, in rotations over the original context
  float beta_slow = 1.0f;
  int64_t original_context = 0;  // rope.scaling.original_context_length (> 0 with YaRN)
  int num_threads = 0;           // 0: the engine's default (iwb::default_num_threads()); tokens split among them
};

// ggml_rope_yarn_corr_dims: the first and last pair index the YaRN ramp runs between.
void rope_yarn_corr_dims(int64_t num_rotated, int64_t original_context, float freq_base, float beta_fast,
                         float beta_slow, float dims[2]);

bool rope(const RopeArgs& args);
bool rope_ref(const RopeArgs& args);  // angles and rotation in double
OpCost rope_cost(const RopeArgs& args);

}  // namespace iwb
