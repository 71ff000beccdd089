// Small GPU element-wise kernels of the forward pass: residual add, bias over rows, f32 <-> f16
// conversion (for cuBLAS), gathering the rows that need logits, and logit soft-capping.
// Each returns cudaErrorInvalidValue (launching nothing) for null pointers or negative sizes,
// cudaSuccess without a launch for an empty range, otherwise the launch's error.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace iwb {

// x[i] += y_scale * y[i] for i < n (the residual connection; Granite scales the branch it adds,
// residual_scale). x and y 4-byte aligned.
cudaError_t add_cuda(float* x, const float* y, int64_t n, cudaStream_t stream, float y_scale = 1.0f);

// x[r * row_length + c] += bias[c] over num_rows rows.
cudaError_t add_bias_rows_cuda(float* x, const float* bias, int64_t num_rows, int64_t row_length, cudaStream_t stream);

// f32 -> f16 (round to nearest even, as f32_to_fp16) and back; n values.
cudaError_t f32_to_f16_cuda(const float* src, uint16_t* dst, int64_t n, cudaStream_t stream);
cudaError_t f16_to_f32_cuda(const uint16_t* src, float* dst, int64_t n, cudaStream_t stream);

// dst[i * row_length ..] = src[rows[i] * row_length ..] for i < num_rows; rows (device) index
// into src, which must not overlap dst. Row ids are not checked on the device (the caller
// validated them on the host, as CpuForward::check_batch does).
cudaError_t gather_rows_cuda(const float* src, int64_t row_length, const int32_t* rows, int64_t num_rows, float* dst,
                             cudaStream_t stream);

// x[i] = cap * tanh(x[i] / cap) (gemma's final logit soft-capping); cap must be > 0.
cudaError_t softcap_cuda(float* x, int64_t n, float cap, cudaStream_t stream);

}  // namespace iwb
