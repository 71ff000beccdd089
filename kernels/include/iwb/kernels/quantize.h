// Reference quantizers from f32, rounding exactly as ggml's deterministic "_ref" versions, so
// files written here match llama.cpp's byte for byte. Used by the GGUF writer and the tests.
#pragma once

#include "iwb/kernels/ggml_type.h"
#include "iwb/kernels/quant_blocks.h"

#include <cstdint>

namespace iwb {

// Quantize num_elements floats into num_elements / 32 blocks. Returns false, writing nothing,
// when num_elements is negative or not a multiple of 32, or when the input holds an inf or
// NaN (which has no quantized form).
bool quantize_row_q8_0_ref(const float* src, BlockQ8_0* dst, int64_t num_elements);
bool quantize_row_q4_0_ref(const float* src, BlockQ4_0* dst, int64_t num_elements);

// True for the types quantize_row_ref can produce: F32, F16, BF16, Q8_0, Q4_0.
bool can_quantize_row_ref(GgmlType type);

// Type-dispatched form: dst receives ggml_row_bytes(type, num_elements) bytes and must be
// 2-byte aligned (4 for F32). Same failure rules as above; F16/BF16 accept inf and NaN.
bool quantize_row_ref(GgmlType type, const float* src, void* dst, int64_t num_elements);

}  // namespace iwb
