// GPU matrix-vector products y = W x (+ bias) for 1..8 tokens with W in its stored GGUF type,
// dequantized in registers (the decode path); matmul_ref / dequantize_row_ref are the CPU twins.
#pragma once

#include "iwb/kernels/ggml_type.h"

#include <cuda_runtime.h>

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
};

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

}  // namespace iwb
