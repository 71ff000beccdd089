// AVX2 dequantizers and the per-type choice between them and the reference loops (private to
// kernels/src). Each AVX2 body converts num_blocks blocks; callers check the CPU first.
#pragma once

#include "iwb/kernels/quant_blocks.h"

#include <cstdint>

#include "iwb/kernels/ggml_type.h"

namespace iwb::detail {

// A row dequantizer: num_elements a multiple of the type's block size, src 2-byte aligned.
using DequantizeRowFn = void (*)(const void* src, float* dst, int64_t num_elements);
// The fastest dequantizer for `type` on this CPU (the reference loops when there is no SIMD
// one), chosen once per kernel call instead of once per row; null if the type has none.
DequantizeRowFn select_dequantizer(GgmlType type);

#if defined(__x86_64__) || defined(__i386__)
void dequantize_f16_avx2(const uint16_t* src, float* dst, int64_t num_elements);
void dequantize_bf16_avx2(const uint16_t* src, float* dst, int64_t num_elements);
void dequantize_q4_0_avx2(const BlockQ4_0* src, float* dst, int64_t num_blocks);
void dequantize_q5_0_avx2(const BlockQ5_0* src, float* dst, int64_t num_blocks);
void dequantize_q8_0_avx2(const BlockQ8_0* src, float* dst, int64_t num_blocks);
void dequantize_q4_k_avx2(const BlockQ4_K* src, float* dst, int64_t num_blocks);
void dequantize_q6_k_avx2(const BlockQ6_K* src, float* dst, int64_t num_blocks);
#endif

}  // namespace iwb::detail
