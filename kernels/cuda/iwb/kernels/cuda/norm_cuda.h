// GPU RMS normalisation over rows, y = x / sqrt(mean(x^2) + eps) * w; rmsnorm_ref is its CPU
// twin. Rows may be tokens (attention/FFN/output norms) or token x head (per-head q/k norms).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace iwb {

struct RmsNormCudaArgs {
  const float* input = nullptr;   // device [num_rows x dim]
  const float* weight = nullptr;  // device [dim], or null for a plain normalisation (no Gemma
                                  // "1 + w": GGUF stores Gemma norm weights with the 1 added)
  float* output = nullptr;        // device [num_rows x dim]; may equal input (in place)
  int64_t num_rows = 0;
  int64_t dim = 0;
  float eps = 1e-6f;
};

// cudaSuccess, or cudaErrorInvalidValue for null pointers, sizes <= 0 (num_rows 0 is fine:
// nothing to do), a row count past the grid limit (2^31 - 1) or misaligned pointers (4 bytes).
cudaError_t rmsnorm_cuda_check(const RmsNormCudaArgs& args);

// One thread block per row, f32 sum of squares; returns the launch's error.
cudaError_t rmsnorm_cuda(const RmsNormCudaArgs& args, cudaStream_t stream);

// residual[r] += addend_scale * addend[r], then args.output = the RMS norm of the sum (args.input
// must be residual): a residual add and the next token norm in one launch, bit for bit what
// add_cuda (with the same scale) then rmsnorm_cuda give (each thread adds and squares the
// elements it later scales). Decode steps run a few hundred such small kernels a token; this
// removes one in four of them.
cudaError_t add_rmsnorm_cuda(float* residual, const float* addend, const RmsNormCudaArgs& args, cudaStream_t stream,
                             float addend_scale = 1.0f);

// add_rmsnorm_cuda that also writes its output as int8 activations, bit for bit what
// quantize_x_q8_cuda(output, num_rows * dim, q, d) then gives: the next products on int8
// activations (Q4_0, Q8_0, Q4_K, Q6_K) skip their own quantize launch. dim a multiple of 32, q
// 16-byte and d 4-byte aligned.
cudaError_t add_rmsnorm_q8_cuda(float* residual, const float* addend, const RmsNormCudaArgs& args, int8_t* q, float* d,
                                cudaStream_t stream, float addend_scale = 1.0f);

}  // namespace iwb
