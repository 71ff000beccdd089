// GPU rotary position embedding, in place on queries and (optionally) keys in one launch, with
// each token's position read from device memory; rope_ref is the CPU twin (same RopeLayout,
// frequency base/scale, llama-3 rope_freqs factors and partial rotation).
#pragma once

#include "iwb/kernels/rope.h"  // RopeLayout

#include <cuda_runtime.h>

#include <cstdint>

namespace iwb {

struct RopeCudaArgs {
  float* q = nullptr;  // device [num_tokens x num_heads x head_dim], rotated in place
  int64_t num_heads = 0;
  float* k = nullptr;        // device [num_tokens x num_kv_heads x head_dim], or null
  int64_t num_kv_heads = 0;  // ignored when k is null
  int64_t num_tokens = 0;
  int64_t head_dim = 0;
  int64_t num_rotated = 0;             // even, <= head_dim; dimensions past it pass through
  const int32_t* positions = nullptr;  // device [num_tokens]
  RopeLayout layout = RopeLayout::Normal;
  float freq_base = 10000.0f;
  float freq_scale = 1.0f;              // 1 / rope.scaling.factor
  const float* freq_factors = nullptr;  // device [num_rotated / 2] (llama 3 rope_freqs) or null
  // YaRN, as RopeArgs (rope.h) and ggml's rope_yarn: ext_factor 0 is off; attn_factor scales cos
  // and sin (times 1 + 0.1 ln(1 / freq_scale) with YaRN on).
  float ext_factor = 0.0f;
  float attn_factor = 1.0f;
  float beta_fast = 32.0f;
  float beta_slow = 1.0f;
  int64_t original_context = 0;  // > 0 with YaRN on
  // Optional: the KV write fused in, for f16 caches on both sides (a decode step's launch fewer a
  // layer). With k_cache set, each token's rotated keys (num_kv_heads x head_dim) and its values
  // v go to slot slot_mapping[t] of the caches as write_kv_paged_cuda stores f16 rows, bit for
  // bit; slots outside [0, num_slots) are skipped, as there.
  const float* v = nullptr;  // device [num_tokens x v_row]
  int64_t v_row = 0;
  uint16_t* k_cache = nullptr;            // device [num_slots x num_kv_heads * head_dim], or null: no write
  uint16_t* v_cache = nullptr;            // device [num_slots x v_row]
  const int64_t* slot_mapping = nullptr;  // device [num_tokens]
  int64_t num_slots = 0;
};

// cudaErrorInvalidValue for null q/positions, sizes <= 0 (num_tokens 0 is fine), an odd or too
// large num_rotated, a non-positive freq_base/freq_scale, a negative ext_factor or YaRN without
// its original context, or (with k_cache) no keys, a missing value side or slot mapping, or
// misaligned caches.
cudaError_t rope_cuda_check(const RopeCudaArgs& args);

// One thread block per token; angles and their sin/cos in double (as the CPU fast path: a float
// angle at position 30000 is off by ~1e-3 rad). Returns the launch's error.
cudaError_t rope_cuda(const RopeCudaArgs& args, cudaStream_t stream);

}  // namespace iwb
