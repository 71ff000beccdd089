// Scale searches behind the reference quantizers (private to kernels/src): for a group of
// values, find a scale (and for asymmetric types a minimum) and integer levels minimising a
// weighted squared (or absolute) error. They follow ggml's make_qx_quants, make_q3_quants,
// make_qkx2/3_quants and make_qp_quants operation for operation, because the float rounding
// of every step decides which level wins and files must match llama.cpp's byte for byte.
#pragma once

#include <bit>
#include <cstdint>

namespace iwb::detail {

// Groups whose largest magnitude is below this are all zero (ggml's GROUP_MAX_EPS).
inline constexpr float kGroupMaxEps = 1e-15f;

// Round to nearest, ties to even, for |v| < 2^22: adding 1.5 * 2^23 moves the integer part
// into the low mantissa bits. Deterministic for every input (no float-to-int conversion), so
// even degenerate values (inf, NaN) give a defined level that later clamps.
inline int nearest_int(float v) {
  const float shifted = v + 12582912.0f;
  return static_cast<int>(std::bit_cast<uint32_t>(shifted) & 0x007FFFFFu) - 0x00400000;
}

// Symmetric levels: x ~= scale * (L - nmax), L in 0..2*nmax-1. Tries 19 candidate scales
// around -nmax / (signed extreme) and keeps the one with the least weighted squared error;
// weights null means x^2 (large values matter most). Returns the scale (0 for a zero group).
float search_symmetric_scale(int n, int nmax, const float* x, const float* weights, int8_t* L);

// Q3_K's symmetric search without external weights: the same start, then up to five passes
// that move single levels while the x^2-weighted error keeps falling.
float search_symmetric_scale_q3(int n, int nmax, const float* x, int8_t* L);

// Asymmetric levels: x ~= scale * L - the_min, L in 0..nmax, the_min >= 0. Tries nstep + 1
// scales (nmax + rmin + rdelta * i) / range, solving scale and min by weighted least squares
// for each, keeping the best by weighted squared (or, with is_mad, absolute) error.
float search_scale_and_min(int n, int nmax, const float* x, const float* weights, uint8_t* L,
                           float* the_min, float rmin, float rdelta, int nstep, bool is_mad);

// Non-negative values (sub-block scales or mins) onto levels 0..nmax with weights; returns
// the super-block scale. All-zero weights give 0 where ggml would return 0/0.
float search_positive_scale(int n, int nmax, const float* x, uint8_t* L, const float* weights);

}  // namespace iwb::detail
