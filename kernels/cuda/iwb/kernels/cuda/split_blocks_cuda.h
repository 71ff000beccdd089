// Q4_0, Q8_0 and Q6_K matrices in the GPU's split layout (iwb/kernels/split_blocks.h) on the device:
// the product of 1..8 tokens of int8 activations (quantize_x_q8_cuda) and the f16
// dequantization for cuBLAS.
#pragma once

#include "iwb/kernels/ggml_type.h"
#include "iwb/kernels/split_blocks.h"

#include <cuda_runtime.h>

#include <cstdint>

namespace iwb {

inline constexpr int64_t kSplitMaxTokens = 8;

struct SplitMatvecArgs {
  GgmlType type = GgmlType::Q4_0;  // Q4_0, Q8_0 or Q6_K
  const void* weight = nullptr;    // device: out_features x in_features, split layout, 16-byte aligned
  int64_t in_features = 0;         // a multiple of 32 (of 256 for Q6_K)
  int64_t out_features = 0;
  const int8_t* x_q8 = nullptr;       // device: [num_tokens x in_features] from quantize_x_q8_cuda, 16-byte aligned
  const float* x_q8_scale = nullptr;  // device: [num_tokens x in_features / 32]
  // Optional (Q4_0): each activation block's sum of q (quantize_x_q8_cuda's sums), for the -8
  // offset; without it the kernel sums the activations itself (as it always does for Q6_K's
  // 16-value halves).
  const int32_t* x_q8_sum = nullptr;  // device: [num_tokens x in_features / 32]
  int64_t num_tokens = 0;             // 1..kSplitMaxTokens
  float* y = nullptr;                 // device: [num_tokens x out_features]
  const float* bias = nullptr;        // device: [out_features], or null
};

// Checks without touching the device: type, sizes, alignment, non-null pointers. cudaSuccess
// or cudaErrorInvalidValue.
cudaError_t matvec_split_check(const SplitMatvecArgs& args);

// y[t][o] = sum over blocks b of d_w[o][b] * d_x[t][b] * sum_j w[o][b][j] * q_x[t][b][j] (+ bias[o]),
// w = q - 8 (Q4_0) or q (Q8_0): the CPU's fast path (BlockQ8A activations) in the same
// arithmetic. Q6_K: each 16-value half's integer sum times its scale, times d d_x per 32 values. One warp per output
// row, 16-byte loads of quants, dp4a; a token's result does not depend on num_tokens.
cudaError_t matvec_split_cuda(const SplitMatvecArgs& args, cudaStream_t stream);

// Most matrices one matvec_split_group_cuda launch takes (an op's q, k and v).
inline constexpr int kSplitMaxParts = 3;

// matvec_split_cuda of up to kSplitMaxParts matrices on the same activations (an op's q, k and
// v, or gate and up) in one launch: each part's y bit for bit what its own launch gives, without
// a launch, a tail of idle warps and a wait on the last row per matrix. The parts share type,
// in_features, x_q8, x_q8_scale, x_q8_sum and num_tokens (cudaErrorInvalidValue otherwise).
cudaError_t matvec_split_group_cuda(const SplitMatvecArgs* parts, int count, cudaStream_t stream);

// Most tokens matmul_split_mma_cuda takes (steps of more go through cuBLAS).
inline constexpr int64_t kSplitMmaMaxTokens = 64;

// The same product for 1..kSplitMmaMaxTokens tokens on int8 tensor cores (mma m16n8k32), meant
// for batched decodes past kSplitMaxTokens (Q4_0 and Q8_0); not used by the engine yet (slower than the f16
// copy and cuBLAS as it stands: see matmul_split_mma.cu). Q4_0 needs x_q8_sum. A token's result
// may differ from matvec_split_cuda's in the order of its sums (not batch-invariant).
cudaError_t matmul_split_mma_cuda(const SplitMatvecArgs& args, cudaStream_t stream);

// rows x in_features of a split matrix to f16 row-major (cuBLAS's input), each value d * w
// rounded once, as dequantize_rows_f16_cuda does for the GGUF layout.
cudaError_t dequantize_split_f16_cuda(GgmlType type, const void* weight, uint16_t* out, int64_t rows,
                                      int64_t in_features, cudaStream_t stream);

}  // namespace iwb
