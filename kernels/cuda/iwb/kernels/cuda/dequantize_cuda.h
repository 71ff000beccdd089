// GPU dequantization of GGUF tensor data to f32; dequantize_row_ref is its CPU twin.
#pragma once

#include "iwb/kernels/ggml_type.h"

#include <cuda_runtime.h>

#include <cstdint>

namespace iwb {

// Types dequantize_row_cuda handles: F16, BF16, Q4_0, Q8_0, Q4_K, Q6_K.
bool cuda_can_dequantize(GgmlType type);

// Converts num_elements values of `type` at device address d_src into f32 at d_dst,
// asynchronously on `stream`. Returns cudaErrorInvalidValue (launching nothing) for a type
// cuda_can_dequantize rejects, a count that is negative or not a multiple of the block size,
// a null pointer, or a d_src not 2-byte aligned / d_dst not 4-byte aligned; otherwise the
// launch's own error (errors during execution surface at the next synchronisation).
cudaError_t dequantize_row_cuda(GgmlType type, const void* d_src, float* d_dst, int64_t num_elements,
                                cudaStream_t stream);

// Types dequantize_rows_f16_cuda handles (the cuBLAS prefill path's weight tiles): F32, F16,
// BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K, Q6_K.
bool cuda_can_dequantize_f16(GgmlType type);

// Converts num_rows rows of row_length values of `type` (GGUF row layout, rows contiguous) at
// d_src into f16 bit patterns at d_dst_f16 ([num_rows x row_length], round to nearest even,
// values beyond the f16 range become +-inf), asynchronously on `stream`. Returns
// cudaErrorInvalidValue (launching nothing) for an unsupported type, a negative count, a
// row_length that is not a multiple of the block size, a null pointer with work to do, or
// d_src / d_dst_f16 not 2-byte aligned (4 for F32 sources); otherwise the launch's error.
cudaError_t dequantize_rows_f16_cuda(GgmlType type, const void* d_src, uint16_t* d_dst_f16, int64_t num_rows,
                                     int64_t row_length, cudaStream_t stream);

}  // namespace iwb
