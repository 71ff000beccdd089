// Q4_0 matrices in the GPU's split layout (iwb/kernels/q4_0_split.h) on the device: the product
// of 1..8 tokens of int8 activations (quantize_x_q8_cuda) and the f16 dequantization for cuBLAS.
#pragma once

#include "iwb/kernels/q4_0_split.h"

#include <cuda_runtime.h>

#include <cstdint>

namespace iwb {

inline constexpr int64_t kQ4_0SplitMaxTokens = 8;

struct Q4_0SplitMatvecArgs {
  const void* weight = nullptr;  // device: out_features x in_features, split layout, 16-byte aligned
  int64_t in_features = 0;       // a multiple of 32
  int64_t out_features = 0;
  const int8_t* x_q8 = nullptr;       // device: [num_tokens x in_features] from quantize_x_q8_cuda, 16-byte aligned
  const float* x_q8_scale = nullptr;  // device: [num_tokens x in_features / 32]
  int64_t num_tokens = 0;             // 1..kQ4_0SplitMaxTokens
  float* y = nullptr;                 // device: [num_tokens x out_features]
  const float* bias = nullptr;        // device: [out_features], or null
};

// Checks without touching the device: sizes, alignment, non-null pointers. cudaSuccess or
// cudaErrorInvalidValue.
cudaError_t matvec_q4_0_split_check(const Q4_0SplitMatvecArgs& args);

// y[t][o] = sum over blocks b of d_w[o][b] * d_x[t][b] * sum_j (q_w[o][b][j] - 8) * q_x[t][b][j]
// (+ bias[o]): the CPU's fast path (BlockQ8A activations) in the same arithmetic. One warp per
// output row, 16-byte loads of nibbles, dp4a; a token's result does not depend on num_tokens.
cudaError_t matvec_q4_0_split_cuda(const Q4_0SplitMatvecArgs& args, cudaStream_t stream);

// rows x in_features of a split Q4_0 matrix to f16 row-major (cuBLAS's input), each value
// d * (q - 8) rounded once, as dequantize_rows_f16_cuda does for GGUF Q4_0.
cudaError_t dequantize_q4_0_split_f16_cuda(const void* weight, uint16_t* out, int64_t rows, int64_t in_features,
                                           cudaStream_t stream);

}  // namespace iwb
