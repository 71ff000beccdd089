// Reference quantizers from f32 for every GGUF block type the engine reads (and the 8-bit
// activation blocks of the integer dot products), rounding exactly as ggml's so files written
// here match llama.cpp's byte for byte. Scalar on purpose: fast paths are tested against these.
#pragma once

#include "iwb/kernels/ggml_type.h"
#include "iwb/kernels/quant_blocks.h"

#include <cstdint>

namespace iwb {

// Every function quantizes num_elements floats into num_elements / block_size blocks and
// returns false, writing nothing, when num_elements is negative or not a whole number of
// blocks, a pointer is null, the input holds an inf or NaN (no quantized form), a value exceeds
// quantize_max_abs_input(type) (the fp16 scale fields would overflow), or an imatrix entry is
// negative or not finite.
//
// imatrix (may be null): importance of each of the num_elements columns, e.g. llama.cpp's
// imatrix (mean squared activation of the input channel). Null selects ggml's
// quantize_row_*_ref algorithm (what llama-quantize writes without --imatrix); non-null
// selects ggml's importance-weighted search (quantize_row_*_impl, what it writes with one),
// whose error weight is imatrix[j] * sqrt(sigma^2 + x_j^2) (Q6_K: imatrix[j] alone). These
// are two algorithms, as in ggml: an all-ones imatrix is *not* the null path, while scaling
// an imatrix by a power of two gives identical output. For Q4_0/Q4_1/Q5_0/Q5_1 sigma^2 is
// taken over all num_elements, so pass exactly one row at a time when using an imatrix.

// 32-element formats.
bool quantize_row_q4_0_ref(const float* src, BlockQ4_0* dst, int64_t num_elements, const float* imatrix = nullptr);
bool quantize_row_q4_1_ref(const float* src, BlockQ4_1* dst, int64_t num_elements, const float* imatrix = nullptr);
bool quantize_row_q5_0_ref(const float* src, BlockQ5_0* dst, int64_t num_elements, const float* imatrix = nullptr);
bool quantize_row_q5_1_ref(const float* src, BlockQ5_1* dst, int64_t num_elements, const float* imatrix = nullptr);
bool quantize_row_q8_0_ref(const float* src, BlockQ8_0* dst, int64_t num_elements);
// MXFP4 as ggml's quantize_row_mxfp4_ref (llama-quantize has no imatrix form of it): the shared
// exponent from floor(log2f(amax)), each value to the nearest E2M1 code (the first on ties).
// One difference: a block with 0 < amax < 2^-125 gets e = 0 where ggml's float-to-uint8 cast
// of a negative exponent wraps (on x86: e = 255 for [2^-126, 2^-125), which ggml itself rejects).
bool quantize_row_mxfp4_ref(const float* src, BlockMxfp4* dst, int64_t num_elements);

// 256-element K-quant super-blocks.
bool quantize_row_q2_k_ref(const float* src, BlockQ2_K* dst, int64_t num_elements, const float* imatrix = nullptr);
bool quantize_row_q3_k_ref(const float* src, BlockQ3_K* dst, int64_t num_elements, const float* imatrix = nullptr);
bool quantize_row_q4_k_ref(const float* src, BlockQ4_K* dst, int64_t num_elements, const float* imatrix = nullptr);
bool quantize_row_q5_k_ref(const float* src, BlockQ5_K* dst, int64_t num_elements, const float* imatrix = nullptr);
bool quantize_row_q6_k_ref(const float* src, BlockQ6_K* dst, int64_t num_elements, const float* imatrix = nullptr);

// Activation blocks: Q8_1 for dot products with Q4_1/Q5_1 weights (its s = d * sum(q) folds
// the weights' "+ m" term), Q8_K for dot products with every K-quant (bsums fold the mins).
bool quantize_row_q8_1_ref(const float* src, BlockQ8_1* dst, int64_t num_elements);
bool quantize_row_q8_k_ref(const float* src, BlockQ8_K* dst, int64_t num_elements);

// True for the types quantize_row_ref can produce: F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1,
// Q8_0, MXFP4, Q8_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, Q8_K.
bool can_quantize_row_ref(GgmlType type);

// True for the types whose quantizer uses an imatrix (the others ignore it).
bool quantize_uses_imatrix(GgmlType type);

// Largest |x| the type accepts: fp16 holds at most 65504, so e.g. Q8_0 (d = amax / 127) takes
// 127 * 65504, Q4_1 (stores the block minimum) 65504, Q8_1 (s = d * sum(q)) 65504 / 32.
// F32/F16/BF16 and Q8_K (f32 scale) are unlimited (returns +inf); MXFP4 (an exponent up to
// 2^127) takes every finite value (returns FLT_MAX).
float quantize_max_abs_input(GgmlType type);

// Type-dispatched form: dst receives ggml_row_bytes(type, num_elements) bytes and must be
// aligned to 2 bytes (4 for F32 and Q8_K, 1 for MXFP4). Same failure rules as above; F16/BF16/F32 accept
// inf and NaN (they have a form for them) and ignore the imatrix.
bool quantize_row_ref(GgmlType type, const float* src, void* dst, int64_t num_elements,
                      const float* imatrix = nullptr);

}  // namespace iwb
