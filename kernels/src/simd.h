// Vector primitives shared by the fast CPU kernels (private to kernels/src). Each has an
// AVX2/FMA/F16C body chosen at run time and a portable body for other CPUs.
#pragma once

#include <cstdint>

namespace iwb::simd {

float dot_f32(const float* a, const float* b, int64_t n);
// out[r] = dot(rows[r], x) for r < num_rows (num_rows 1..4): x is loaded once for all rows.
void dot_rows_f32(const float* const* rows, int num_rows, const float* x, int64_t n, float* out);
// out[r * out_stride + t] = dot(rows[r], xs[t]) for r < num_rows (1..4) and t < num_x (1..3):
// each loaded weight vector serves three tokens, so prefill is bound by FMAs, not loads.
void dot_tile_f32(const float* const* rows, int num_rows, const float* const* xs, int num_x, int64_t n,
                  float* out, int out_stride);
float dot_f32_f16(const float* a, const uint16_t* b, int64_t n);
// y[i] += a * x[i], x in f16.
void axpy_f16(float a, const uint16_t* x, float* y, int64_t n);
void scale_f32(float* y, float a, int64_t n);
// f32 -> f16 (round to nearest even), used when writing the KV cache.
void f32_to_f16_row(const float* src, uint16_t* dst, int64_t n);

}  // namespace iwb::simd
