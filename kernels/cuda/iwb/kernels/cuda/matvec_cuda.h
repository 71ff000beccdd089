// GPU matrix-vector products y = W x (+ bias) for 1..8 tokens with W in its stored GGUF type,
// dequantized in registers (the decode path); matmul_ref / dequantize_row_ref are the CPU twins.
#pragma once

#include "iwb/kernels/ggml_type.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace iwb {

// Most tokens one matvec_cuda call takes; larger batches go through cuBLAS (dequantize_rows_f16_cuda).
inline constexpr int64_t kCudaMatvecMaxTokens = 8;

struct MatvecCudaArgs {
  GgmlType type = GgmlType::F32;
  const void* weight = nullptr;  // device: out_features rows of in_features values, GGUF row layout
  int64_t in_features = 0;       // a multiple of the type's block size
  int64_t out_features = 0;
  const float* x = nullptr;      // device: [num_tokens x in_features], row-major, 16-byte aligned
  int64_t num_tokens = 0;        // 1..kCudaMatvecMaxTokens
  float* y = nullptr;            // device: [num_tokens x out_features], row-major; must not alias x
  const float* bias = nullptr;   // device: [out_features], or null
  // Optional, for Q4_0, Q8_0, Q4_K or Q6_K weights (cuda_matvec_takes_q8_input; one token, Q4_K
  // up to 8: cuda_matvec_q8_input_max_tokens): x already quantized by quantize_x_q8_cuda. The
  // product then runs on integer dot products (dp4a, four int8 products per instruction) instead
  // of decoding every weight to f32: on an H100 the f32 decode made the Q4_0 kernel bound by
  // instruction issue at ~30% of the DRAM bandwidth.
  // y[o] = sum over 32-value blocks b of d_w[o][b] * x_d[b] * sum_j q_w[o][b][j] * x_q[b][j].
  const int8_t* x_q8 = nullptr;       // device: [num_tokens x in_features], 16-byte aligned
  const float* x_q8_scale = nullptr;  // device: [num_tokens x in_features / 32]
};

// Weight types whose one-token product can take quantize_x_q8_cuda's activations.
bool cuda_matvec_takes_q8_input(GgmlType type);
// Most tokens one int8-activation product of `type` takes: kCudaMatvecMaxTokens for Q4_K (the
// tokens share each weight load), 1 for the other types that take int8 activations, else 0.
int64_t cuda_matvec_q8_input_max_tokens(GgmlType type);

// x [n] (n a multiple of 32) in blocks of 32: d = max|x| / 127, q = round(x / d) through 1 / d
// as quantize_x_q8_block_ref does, bit for bit (0 and d = 0 for a block of zeros), and, when
// sums is given, each block's sum of q (what Q4_0's -8 offset needs: the split-layout product
// then skips 8 of its 16 integer instructions a block). One warp per block, asynchronously on
// `stream`. q 16-byte and x 16-byte aligned, d and sums 4-byte aligned.
cudaError_t quantize_x_q8_cuda(const float* x, int64_t n, int8_t* q, float* d, cudaStream_t stream,
                               int32_t* sums = nullptr);

// The host form of one block of quantize_x_q8_cuda (the tests' reference): 32 values of x into
// q[32] and *d.
inline void quantize_x_q8_block_ref(const float* x, int8_t* q, float* d) {
  float amax = 0.0f;
  for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[j]));
  const float scale = amax / 127.0f;
  const float inverse = scale != 0.0f ? 1.0f / scale : 0.0f;
  for (int j = 0; j < 32; ++j) q[j] = static_cast<int8_t>(std::round(x[j] * inverse));
  *d = scale;
}

// Types matvec_cuda handles: F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K, Q6_K.
bool cuda_matvec_supports(GgmlType type);

// Checks args without touching the device: a supported type, positive sizes, in_features a
// multiple of the block size, num_tokens in 1..kCudaMatvecMaxTokens, non-null pointers, weight
// 2-byte aligned (4 for F32), x 16-byte aligned (kernels read it as float4; cudaMalloc gives 256),
// y / bias 4-byte aligned, y not overlapping x. cudaSuccess or cudaErrorInvalidValue.
cudaError_t matvec_cuda_check(const MatvecCudaArgs& args);

// y[t][o] = sum_i W[o][i] * x[t][i] (+ bias[o]), f32 accumulation, asynchronously on `stream`.
// Batch-invariant: a token's outputs are bit for bit the same whatever num_tokens (every token
// is summed in the same order), so callers needing invariance may still batch up to 8 tokens.
// Returns cudaErrorInvalidValue (launching nothing) when matvec_cuda_check rejects args,
// otherwise the launch's error. Graph-capturable: no host synchronisation, no allocation.
cudaError_t matvec_cuda(const MatvecCudaArgs& args, cudaStream_t stream);

// Most matrices one matvec_group_cuda launch takes (an op's q, k and v).
inline constexpr int kMatvecMaxParts = 3;

// matvec_cuda of up to kMatvecMaxParts F32 / F16 / BF16 matrices, or Q4_K matrices on int8
// activations, on the same x (an op's q, k and v, or gate and up) in one launch: each part's y
// bit for bit what its own matvec_cuda gives, without a launch and a tail of idle blocks per
// matrix (one launch of 4096 x 1024 F16 is a single short wave on an H200). The parts share type,
// in_features, x (and x_q8, x_q8_scale) and num_tokens, and each takes the vectorised kernel
// (16-byte aligned rows) or Q4_K's int8 kernel; cudaErrorInvalidValue otherwise, launching
// nothing.
cudaError_t matvec_group_cuda_check(const MatvecCudaArgs* parts, int count);
cudaError_t matvec_group_cuda(const MatvecCudaArgs* parts, int count, cudaStream_t stream);

}  // namespace iwb
