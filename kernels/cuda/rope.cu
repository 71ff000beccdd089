// RoPE on the GPU (rope_cuda.h): one thread block per token computes its position's cos/sin
// table in double (as the CPU fast path) into shared memory, then rotates every query head and
// key head of that token in place, and (RopeCudaArgs::k_cache) stores its keys and values in
// f16 caches.
#include "iwb/kernels/cuda/rope_cuda.h"

#include "cuda_common.cuh"

#include <cuda_fp16.h>

namespace iwb {
namespace {

using namespace cuda_detail;

__device__ inline void rotate_heads(float* data, int64_t token, int64_t num_heads, int64_t head_dim, int64_t num_pairs,
                                    bool is_neox, const float* cos_table, const float* sin_table) {
  float* base = data + token * num_heads * head_dim;
  for (int64_t idx = threadIdx.x; idx < num_heads * num_pairs; idx += blockDim.x) {
    const int64_t h = idx / num_pairs, i = idx % num_pairs;
    float* x = base + h * head_dim;
    const int64_t i0 = is_neox ? i : 2 * i;
    const int64_t i1 = is_neox ? i + num_pairs : 2 * i + 1;
    const float x0 = x[i0], x1 = x[i1];
    x[i0] = x0 * cos_table[i] - x1 * sin_table[i];
    x[i1] = x0 * sin_table[i] + x1 * cos_table[i];
  }
}

// YaRN's per-launch terms, from the host (rope_ref's yarn_mix): the ramp's pair range, the mix
// and the magnitude of cos and sin.
struct YarnTerms {
  float low = 0.0f, high = 0.0f;
  float ext_factor = 0.0f;
  double mscale = 1.0;
};

__global__ void rope_kernel(RopeCudaArgs a, YarnTerms yarn) {
  cuda_detail::wait_for_prior_grids();
  IWB_DYNAMIC_SHARED(float, table);  // [num_pairs] cos, then [num_pairs] sin
  const int64_t num_pairs = a.num_rotated / 2;
  float* cos_table = table;
  float* sin_table = table + num_pairs;
  const bool is_neox = a.layout == RopeLayout::NeoX;
  for (int64_t t = blockIdx.x; t < a.num_tokens; t += gridDim.x) {
    const double p = static_cast<double>(a.positions[t]);
    for (int64_t i = threadIdx.x; i < num_pairs; i += blockDim.x) {
      double extrap =
          pow(static_cast<double>(a.freq_base), -2.0 * static_cast<double>(i) / static_cast<double>(a.num_rotated));
      if (a.freq_factors != nullptr) extrap /= static_cast<double>(a.freq_factors[i]);
      double f = static_cast<double>(a.freq_scale) * extrap;
      if (yarn.ext_factor != 0.0f) {  // ggml's rope_yarn_ramp: 1 below pair low, 0 above high
        const float y = (static_cast<float>(i) - yarn.low) / fmaxf(0.001f, yarn.high - yarn.low);
        const double mix = (1.0 - fminf(1.0f, fmaxf(0.0f, y))) * yarn.ext_factor;
        f = f * (1.0 - mix) + extrap * mix;
      }
      double s, c;
      sincos(p * f, &s, &c);
      cos_table[i] = static_cast<float>(c * yarn.mscale);
      sin_table[i] = static_cast<float>(s * yarn.mscale);
    }
    __syncthreads();
    rotate_heads(a.q, t, a.num_heads, a.head_dim, num_pairs, is_neox, cos_table, sin_table);
    if (a.k != nullptr) rotate_heads(a.k, t, a.num_kv_heads, a.head_dim, num_pairs, is_neox, cos_table, sin_table);
    if (a.k_cache != nullptr) {
      __syncthreads();  // the block's rotated keys are written
      const int64_t slot = a.slot_mapping[t];
      if (slot >= 0 && slot < a.num_slots) {  // else padding, or a slot the pool does not have
        const int64_t k_row = a.num_kv_heads * a.head_dim;
        for (int64_t i = threadIdx.x; i < k_row; i += blockDim.x) {
          a.k_cache[slot * k_row + i] = __half_as_ushort(__float2half_rn(a.k[t * k_row + i]));
        }
        for (int64_t i = threadIdx.x; i < a.v_row; i += blockDim.x) {
          a.v_cache[slot * a.v_row + i] = __half_as_ushort(__float2half_rn(a.v[t * a.v_row + i]));
        }
      }
    }
    __syncthreads();  // the next token overwrites the table
  }
}

}  // namespace

cudaError_t rope_cuda_check(const RopeCudaArgs& a) {
  if (a.q == nullptr || a.positions == nullptr || a.num_tokens < 0 || a.num_heads <= 0 || a.head_dim <= 0) {
    return cudaErrorInvalidValue;
  }
  if (a.k != nullptr && a.num_kv_heads <= 0) return cudaErrorInvalidValue;
  if (a.num_rotated <= 0 || a.num_rotated % 2 != 0 || a.num_rotated > a.head_dim) return cudaErrorInvalidValue;
  if (!(a.freq_base > 0.0f) || !(a.freq_scale > 0.0f)) return cudaErrorInvalidValue;
  if (!(a.ext_factor >= 0.0f) || (a.ext_factor != 0.0f && a.original_context <= 0)) return cudaErrorInvalidValue;
  // The cos/sin table lives in (default, 48 KiB) shared memory.
  if (static_cast<size_t>(a.num_rotated) * sizeof(float) > 48 * 1024) return cudaErrorInvalidValue;
  if (!is_aligned(a.q, 4) || !is_aligned(a.positions, 4) || (a.k != nullptr && !is_aligned(a.k, 4)) ||
      (a.freq_factors != nullptr && !is_aligned(a.freq_factors, 4))) {
    return cudaErrorInvalidValue;
  }
  if (a.k_cache != nullptr && (a.k == nullptr || a.v == nullptr || a.v_cache == nullptr || a.slot_mapping == nullptr ||
                               a.num_slots <= 0 || a.v_row <= 0 || !is_aligned(a.v, 4) || !is_aligned(a.k_cache, 2) ||
                               !is_aligned(a.v_cache, 2) || !is_aligned(a.slot_mapping, 8))) {
    return cudaErrorInvalidValue;
  }
  return cudaSuccess;
}

cudaError_t rope_cuda(const RopeCudaArgs& a, cudaStream_t stream) {
  if (const cudaError_t e = rope_cuda_check(a); e != cudaSuccess) return e;
  if (a.num_tokens == 0) return cudaSuccess;
  const unsigned blocks = static_cast<unsigned>(std::min<int64_t>(a.num_tokens, kMaxGridX));
  const size_t shared = static_cast<size_t>(a.num_rotated) * sizeof(float);  // cos and sin of num_rotated / 2 pairs
  YarnTerms yarn;
  yarn.mscale = a.attn_factor;
  if (a.ext_factor != 0.0f) {
    float dims[2];
    rope_yarn_corr_dims(a.num_rotated, a.original_context, a.freq_base, a.beta_fast, a.beta_slow, dims);
    yarn.low = dims[0];
    yarn.high = dims[1];
    yarn.ext_factor = a.ext_factor;
    yarn.mscale *= 1.0 + 0.1 * std::log(1.0 / a.freq_scale);
  }
  IWB_LAUNCH(rope_kernel, blocks, 256, shared, stream, a, yarn);
  return cudaGetLastError();
}

}  // namespace iwb
