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

}  // namespace iwb
