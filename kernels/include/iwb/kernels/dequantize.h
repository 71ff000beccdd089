// Reference dequantization of GGUF tensor data to f32 (the CPU twin of every fast path).
#pragma once

#include "iwb/kernels/ggml_type.h"

#include <cstdint>

namespace iwb {

// Converts num_elements values stored as `type` at `src` into f32 at `dst`.
// num_elements must be a multiple of the type's block size and the type must satisfy
// ggml_can_dequantize(); returns false (writing nothing) otherwise, and also for null pointers
// or a src that is not 2-byte aligned (every layout but F32 is built of 16-bit fields).
bool dequantize_row_ref(GgmlType type, const void* src, float* dst, int64_t num_elements);

// Scalar conversions used by every type with half-precision scales.
float fp16_to_f32(uint16_t h);
uint16_t f32_to_fp16(float f);    // round to nearest even
float bf16_to_f32(uint16_t b);
uint16_t f32_to_bf16(float f);    // round to nearest even, NaN kept quiet

}  // namespace iwb
