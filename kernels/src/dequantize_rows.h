// Per-type reference dequantizers behind dequantize_row_ref (private to kernels/src).
// Each converts num_blocks consecutive blocks at src into num_blocks * block_size floats.
#pragma once

#include "iwb/kernels/quant_blocks.h"

#include <cstdint>

namespace iwb::detail {

// Plain element types (block size 1).
void dequantize_f16(const uint16_t* src, float* dst, int64_t num_elements);
void dequantize_bf16(const uint16_t* src, float* dst, int64_t num_elements);

// 32-element formats.
void dequantize_q4_0(const BlockQ4_0* src, float* dst, int64_t num_blocks);
void dequantize_q4_1(const BlockQ4_1* src, float* dst, int64_t num_blocks);
void dequantize_q5_0(const BlockQ5_0* src, float* dst, int64_t num_blocks);
void dequantize_q5_1(const BlockQ5_1* src, float* dst, int64_t num_blocks);
void dequantize_q8_0(const BlockQ8_0* src, float* dst, int64_t num_blocks);
void dequantize_mxfp4(const BlockMxfp4* src, float* dst, int64_t num_blocks);

// 256-element K-quant super-blocks.
void dequantize_q2_k(const BlockQ2_K* src, float* dst, int64_t num_blocks);
void dequantize_q3_k(const BlockQ3_K* src, float* dst, int64_t num_blocks);
void dequantize_q4_k(const BlockQ4_K* src, float* dst, int64_t num_blocks);
void dequantize_q5_k(const BlockQ5_K* src, float* dst, int64_t num_blocks);
void dequantize_q6_k(const BlockQ6_K* src, float* dst, int64_t num_blocks);

}  // namespace iwb::detail
