// Device code of the matrix-vector kernels for unquantized weights (F16, BF16, F32); the
// launcher is in matvec_f16.cu. 16-byte loads straight from global memory (rows of these types
// are plain arrays, so no shared-memory staging), widened to f32 in registers.
#pragma once

#include "matvec_parts.cuh"
#include "matvec_quant.cuh"

#include <cuda_fp16.h>

namespace iwb::cuda_matvec {

// Each type: values per 16-byte word, their decoding, and one value at index i of a row.
struct ElemF16 {
  static constexpr int kPerWord = 8;
  __device__ static void decode(const uint4& v, float out[8]) {
    const uint32_t words[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {  // the low half of each word is the earlier value (little-endian)
      out[2 * i] = __half2float(__ushort_as_half(static_cast<unsigned short>(words[i] & 0xFFFFu)));
      out[2 * i + 1] = __half2float(__ushort_as_half(static_cast<unsigned short>(words[i] >> 16)));
    }
  }
  __device__ static float at(const uint8_t* row, int64_t i) {
    return __half2float(__ushort_as_half(reinterpret_cast<const unsigned short*>(row)[i]));
  }
};

struct ElemBF16 {
  static constexpr int kPerWord = 8;
  __device__ static void decode(const uint4& v, float out[8]) {
    const uint32_t words[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      out[2 * i] = __uint_as_float(words[i] << 16);
      out[2 * i + 1] = __uint_as_float(words[i] & 0xFFFF0000u);
    }
  }
  __device__ static float at(const uint8_t* row, int64_t i) {
    return __uint_as_float(static_cast<uint32_t>(reinterpret_cast<const unsigned short*>(row)[i]) << 16);
  }
};

struct ElemF32 {
  static constexpr int kPerWord = 4;
  __device__ static void decode(const uint4& v, float out[4]) {
    out[0] = __uint_as_float(v.x);
    out[1] = __uint_as_float(v.y);
    out[2] = __uint_as_float(v.z);
    out[3] = __uint_as_float(v.w);
  }
  __device__ static float at(const uint8_t* row, int64_t i) { return reinterpret_cast<const float*>(row)[i]; }
};

// Rows are read 16 bytes per lane per load (a warp covers 512 contiguous bytes); kUnroll words
// per row are loaded before any is used so each thread keeps several loads in flight. The block's
// rows from row0.
template <typename Elem, int kMaxTokens>
__device__ __forceinline__ void float_rows_product(const uint8_t* __restrict__ weight, int64_t row_bytes,
                                                   int64_t in_features, int64_t out_features, int64_t row0,
                                                   const float* __restrict__ x, int num_tokens, float* __restrict__ y,
                                                   const float* __restrict__ bias) {
  constexpr int kRows = kMatvecRowsPerBlock;
  constexpr int kUnroll = 4;
  constexpr int kN = Elem::kPerWord;
  const int tid = static_cast<int>(threadIdx.x);
  const int num_rows = static_cast<int>(out_features - row0 < kRows ? out_features - row0 : kRows);
  const int64_t words_per_row = row_bytes / 16;

  float acc[kRows][kMaxTokens];
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
#pragma unroll
    for (int t = 0; t < kMaxTokens; ++t) acc[r][t] = 0.0f;
  }

  for (int64_t base = tid; base < words_per_row; base += static_cast<int64_t>(kUnroll) * kMatvecThreads) {
    uint4 words[kUnroll][kRows];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t word = base + static_cast<int64_t>(u) * kMatvecThreads;
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
        words[u][r] = make_uint4(0, 0, 0, 0);
        if (word < words_per_row && r < num_rows) {
          words[u][r] = __ldcs(reinterpret_cast<const uint4*>(weight + (row0 + r) * row_bytes) + word);
        }
      }
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t word = base + static_cast<int64_t>(u) * kMatvecThreads;
      if (word < words_per_row) {
        float w[kRows][kN];
#pragma unroll
        for (int r = 0; r < kRows; ++r) Elem::decode(words[u][r], w[r]);
#pragma unroll
        for (int t = 0; t < kMaxTokens; ++t) {
          if (t < num_tokens) {
            const float4* xs = reinterpret_cast<const float4*>(x + t * in_features + word * kN);
#pragma unroll
            for (int i = 0; i < kN / 4; ++i) {
              const float4 v = __ldg(xs + i);
#pragma unroll
              for (int r = 0; r < kRows; ++r) {
                float dot = acc[r][t];
                dot = fmaf(w[r][4 * i], v.x, dot);
                dot = fmaf(w[r][4 * i + 1], v.y, dot);
                dot = fmaf(w[r][4 * i + 2], v.z, dot);
                acc[r][t] = fmaf(w[r][4 * i + 3], v.w, dot);
              }
            }
          }
        }
      }
    }
  }
  reduce_and_store<kMaxTokens>(acc, row0, num_rows, num_tokens, out_features, bias, y);
}

template <typename Elem, int kMaxTokens>
__global__ void __launch_bounds__(kMatvecThreads)
    matvec_float_kernel(const uint8_t* __restrict__ weight, int64_t row_bytes, int64_t in_features,
                        int64_t out_features, const float* __restrict__ x, int num_tokens, float* __restrict__ y,
                        const float* __restrict__ bias) {
  const int64_t row0 = static_cast<int64_t>(blockIdx.x) * kMatvecRowsPerBlock;
  cuda_detail::prefetch_rows_l2(weight, row_bytes, row0, kMatvecRowsPerBlock, out_features);
  cuda_detail::wait_for_prior_grids();
  float_rows_product<Elem, kMaxTokens>(weight, row_bytes, in_features, out_features, row0, x, num_tokens, y, bias);
}

// The grouped launch: each thread block finds its part (matvec_parts.cuh), then computes its
// rows as the one-matrix kernel does.
template <typename Elem, int kMaxTokens>
__global__ void __launch_bounds__(kMatvecThreads)
    matvec_float_group_kernel(cuda_detail::MatvecParts parts, int64_t row_bytes, int64_t in_features,
                              const float* __restrict__ x, int num_tokens) {
  const cuda_detail::MatvecPart part = cuda_detail::select_matvec_part(parts, blockIdx.x);
  const int64_t row0 = static_cast<int64_t>(blockIdx.x - part.first_block) * kMatvecRowsPerBlock;
  cuda_detail::prefetch_rows_l2(part.weight, row_bytes, row0, kMatvecRowsPerBlock, part.out_features);
  cuda_detail::wait_for_prior_grids();
  float_rows_product<Elem, kMaxTokens>(part.weight, row_bytes, in_features, part.out_features, row0, x, num_tokens,
                                       part.y, part.bias);
}

// Any row length and 2-byte (4 for F32) alignment: one value per thread per step.
template <typename Elem, int kMaxTokens>
__global__ void __launch_bounds__(kMatvecThreads)
    matvec_float_scalar_kernel(const uint8_t* __restrict__ weight, int64_t row_bytes, int64_t in_features,
                               int64_t out_features, const float* __restrict__ x, int num_tokens, float* __restrict__ y,
                               const float* __restrict__ bias) {
  constexpr int kRows = kMatvecRowsPerBlock;
  const int64_t row0 = static_cast<int64_t>(blockIdx.x) * kRows;
  cuda_detail::prefetch_rows_l2(weight, row_bytes, row0, kRows, out_features);
  cuda_detail::wait_for_prior_grids();
  const int num_rows = static_cast<int>(out_features - row0 < kRows ? out_features - row0 : kRows);
  float acc[kRows][kMaxTokens];
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
#pragma unroll
    for (int t = 0; t < kMaxTokens; ++t) acc[r][t] = 0.0f;
  }
  for (int64_t i = threadIdx.x; i < in_features; i += kMatvecThreads) {
    float w[kRows];
#pragma unroll
    for (int r = 0; r < kRows; ++r) w[r] = r < num_rows ? Elem::at(weight + (row0 + r) * row_bytes, i) : 0.0f;
#pragma unroll
    for (int t = 0; t < kMaxTokens; ++t) {
      if (t < num_tokens) {
        const float v = __ldg(x + t * in_features + i);
#pragma unroll
        for (int r = 0; r < kRows; ++r) acc[r][t] = fmaf(w[r], v, acc[r][t]);
      }
    }
  }
  reduce_and_store<kMaxTokens>(acc, row0, num_rows, num_tokens, out_features, bias, y);
}

}  // namespace iwb::cuda_matvec
