// Reference quantizers of ggml's 32-element formats (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, MXFP4).
// Without an imatrix they are ggml's quantize_row_*_ref (one pass from the block's extremes);
// with one, ggml's importance-weighted scale search (quantize_row_*_impl; MXFP4 has none).
#include "quantize_rows.h"
#include "quantize_search.h"

#include "iwb/kernels/dequantize.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>

namespace iwb::detail {
namespace {

constexpr int kQK = 32;
constexpr int kHalf = kQK / 2;

// 1/d, or 0 when d is 0 or so small (an f32 subnormal) that 1/d overflows: every value then
// sits at the zero point, which is what a scale that rounds to fp16 zero means anyway.
float inverse_or_zero(float d) {
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  return std::isfinite(id) ? id : 0.0f;
}

// The signed value of largest magnitude (the first one on ties).
float signed_extreme(const float* x) {
  float amax = 0.0f, max = 0.0f;
  for (int j = 0; j < kQK; ++j) {
    if (amax < std::fabs(x[j])) {
      amax = std::fabs(x[j]);
      max = x[j];
    }
  }
  return max;
}

void block_min_max(const float* x, float* min_out, float* max_out) {
  float min = FLT_MAX, max = -FLT_MAX;
  for (int j = 0; j < kQK; ++j) {
    if (x[j] < min) min = x[j];
    if (x[j] > max) max = x[j];
  }
  *min_out = min;
  *max_out = max;
}

// Bit j of the little-endian 32-bit qh is bit 4 of level j (levels 0..15 low, 16..31 high).
void pack_5bit(const uint8_t levels[kQK], uint8_t qs[kHalf], uint8_t qh[4]) {
  uint32_t high_bits = 0;
  for (int j = 0; j < kHalf; ++j) {
    qs[j] = static_cast<uint8_t>((levels[j] & 0x0F) | ((levels[j + kHalf] & 0x0F) << 4));
    high_bits |= static_cast<uint32_t>((levels[j] >> 4) & 1) << j;
    high_bits |= static_cast<uint32_t>((levels[j + kHalf] >> 4) & 1) << (j + kHalf);
  }
  for (int b = 0; b < 4; ++b) qh[b] = static_cast<uint8_t>(high_bits >> (8 * b));
}

// sigma^2 of a whole row, and ggml's per-element weights imatrix[j] * sqrt(sigma^2 + x_j^2):
// the imatrix says which columns matter, the square root keeps large values important too.
float row_sigma2(const float* x, int64_t num_elements) {
  float sum_x2 = 0.0f;
  for (int64_t j = 0; j < num_elements; ++j) sum_x2 += x[j] * x[j];
  return sum_x2 / static_cast<float>(num_elements);
}

void importance_weights(const float* x, const float* imatrix, float sigma2, float weights[kQK]) {
  for (int j = 0; j < kQK; ++j) weights[j] = imatrix[j] * std::sqrt(sigma2 + x[j] * x[j]);
}

}  // namespace

void quantize_q8_0(const float* x, BlockQ8_0* y, int64_t num_elements) {
  for (int64_t b = 0; b < num_elements / kQK; ++b, x += kQK) {
    float amax = 0.0f;
    for (int j = 0; j < kQK; ++j) amax = std::max(amax, std::fabs(x[j]));
    // The stored fp16 d is rounded, but ggml quantizes with the unrounded inverse; doing the
    // same keeps files identical.
    const float d = amax / 127.0f;
    const float id = inverse_or_zero(d);
    y[b].d = f32_to_fp16(d);
    for (int j = 0; j < kQK; ++j) y[b].qs[j] = static_cast<int8_t>(std::round(x[j] * id));  // half away from 0
  }
}

void quantize_q4_0(const float* x, BlockQ4_0* y, int64_t num_elements, const float* imatrix) {
  if (imatrix != nullptr) {
    const float sigma2 = row_sigma2(x, num_elements);
    float weights[kQK];
    int8_t levels[kQK];
    for (int64_t b = 0; b < num_elements / kQK; ++b) {
      importance_weights(x + b * kQK, imatrix + b * kQK, sigma2, weights);
      const float d = search_symmetric_scale(kQK, 8, x + b * kQK, weights, levels);
      y[b].d = f32_to_fp16(d);
      for (int j = 0; j < kHalf; ++j) y[b].qs[j] = static_cast<uint8_t>(levels[j] | (levels[j + kHalf] << 4));
    }
    return;
  }
  for (int64_t b = 0; b < num_elements / kQK; ++b, x += kQK) {
    // The extreme becomes q = 0, i.e. -8 * d: using all of -8..7 on the side where the
    // extreme lies buys one level over a symmetric -7..7.
    const float d = signed_extreme(x) / -8.0f;
    const float id = inverse_or_zero(d);
    y[b].d = f32_to_fp16(d);
    for (int j = 0; j < kHalf; ++j) {
      // x * id lies in [-8, 8]; +8.5 and truncation round to nearest (ties up), and the
      // opposite extreme (+8) clamps to 15.
      const int q0 = std::min(15, static_cast<int>(x[j] * id + 8.5f));
      const int q1 = std::min(15, static_cast<int>(x[j + kHalf] * id + 8.5f));
      y[b].qs[j] = static_cast<uint8_t>(q0 | (q1 << 4));
    }
  }
}

void quantize_q4_1(const float* x, BlockQ4_1* y, int64_t num_elements, const float* imatrix) {
  if (imatrix != nullptr) {
    const float sigma2 = row_sigma2(x, num_elements);
    float weights[kQK];
    uint8_t levels[kQK];
    for (int64_t b = 0; b < num_elements / kQK; ++b) {
      importance_weights(x + b * kQK, imatrix + b * kQK, sigma2, weights);
      float min = 0.0f;
      const float d = search_scale_and_min(kQK, 15, x + b * kQK, weights, levels, &min, -0.9f, 0.05f, 36, false);
      y[b].d = f32_to_fp16(d);
      y[b].m = f32_to_fp16(-min);
      for (int j = 0; j < kHalf; ++j) y[b].qs[j] = static_cast<uint8_t>(levels[j] | (levels[j + kHalf] << 4));
    }
    return;
  }
  for (int64_t b = 0; b < num_elements / kQK; ++b, x += kQK) {
    float min = 0.0f, max = 0.0f;
    block_min_max(x, &min, &max);
    const float d = (max - min) / 15.0f;
    const float id = inverse_or_zero(d);
    y[b].d = f32_to_fp16(d);
    y[b].m = f32_to_fp16(min);
    for (int j = 0; j < kHalf; ++j) {
      const int q0 = std::min(15, static_cast<int>((x[j] - min) * id + 0.5f));
      const int q1 = std::min(15, static_cast<int>((x[j + kHalf] - min) * id + 0.5f));
      y[b].qs[j] = static_cast<uint8_t>(q0 | (q1 << 4));
    }
  }
}

void quantize_q5_0(const float* x, BlockQ5_0* y, int64_t num_elements, const float* imatrix) {
  uint8_t levels[kQK];
  if (imatrix != nullptr) {
    const float sigma2 = row_sigma2(x, num_elements);
    float weights[kQK];
    int8_t signed_levels[kQK];
    for (int64_t b = 0; b < num_elements / kQK; ++b) {
      importance_weights(x + b * kQK, imatrix + b * kQK, sigma2, weights);
      const float d = search_symmetric_scale(kQK, 16, x + b * kQK, weights, signed_levels);
      y[b].d = f32_to_fp16(d);
      for (int j = 0; j < kQK; ++j) levels[j] = static_cast<uint8_t>(signed_levels[j]);
      pack_5bit(levels, y[b].qs, y[b].qh);
    }
    return;
  }
  for (int64_t b = 0; b < num_elements / kQK; ++b, x += kQK) {
    const float d = signed_extreme(x) / -16.0f;
    const float id = inverse_or_zero(d);
    y[b].d = f32_to_fp16(d);
    for (int j = 0; j < kQK; ++j) levels[j] = static_cast<uint8_t>(std::min(31, static_cast<int>(x[j] * id + 16.5f)));
    pack_5bit(levels, y[b].qs, y[b].qh);
  }
}

void quantize_q5_1(const float* x, BlockQ5_1* y, int64_t num_elements, const float* imatrix) {
  uint8_t levels[kQK];
  if (imatrix != nullptr) {
    const float sigma2 = row_sigma2(x, num_elements);
    float weights[kQK];
    for (int64_t b = 0; b < num_elements / kQK; ++b) {
      importance_weights(x + b * kQK, imatrix + b * kQK, sigma2, weights);
      float min = 0.0f;
      const float d = search_scale_and_min(kQK, 31, x + b * kQK, weights, levels, &min, -0.9f, 0.05f, 36, false);
      y[b].d = f32_to_fp16(d);
      y[b].m = f32_to_fp16(-min);
      pack_5bit(levels, y[b].qs, y[b].qh);
    }
    return;
  }
  for (int64_t b = 0; b < num_elements / kQK; ++b, x += kQK) {
    float min = 0.0f, max = 0.0f;
    block_min_max(x, &min, &max);
    const float d = (max - min) / 31.0f;
    const float id = inverse_or_zero(d);
    y[b].d = f32_to_fp16(d);
    y[b].m = f32_to_fp16(min);
    // ggml does not clamp here: (max - min) * id rounds to at most 31.0000x, +0.5 truncates to 31.
    for (int j = 0; j < kQK; ++j) levels[j] = static_cast<uint8_t>(static_cast<int>((x[j] - min) * id + 0.5f));
    pack_5bit(levels, y[b].qs, y[b].qh);
  }
}

namespace {

// The code of the E2M1 value nearest x at half-scale d, the first on ties (so 0 and -0 go to
// code 0). kMxfp4Values[i] * d is exact, so this matches ggml's float arithmetic exactly.
uint8_t nearest_mxfp4_code(float x, float d) {
  int best = 0;
  float best_err = std::fabs(static_cast<float>(kMxfp4Values[0]) * d - x);
  for (int i = 1; i < 16; ++i) {
    const float err = std::fabs(static_cast<float>(kMxfp4Values[i]) * d - x);
    if (err < best_err) {
      best = i;
      best_err = err;
    }
  }
  return static_cast<uint8_t>(best);
}

}  // namespace

void quantize_mxfp4(const float* x, BlockMxfp4* y, int64_t num_elements) {
  for (int64_t b = 0; b < num_elements / kQK; ++b, x += kQK) {
    float amax = 0.0f;
    for (int j = 0; j < kQK; ++j) amax = std::max(amax, std::fabs(x[j]));
    // The largest value lands on 4..8 (x 2^(e-128)), 6 * d being the largest E2M1 magnitude:
    // values in (1.5, 2) x 2^floor(log2 amax) clip to it, as in ggml. log2f, not the exponent
    // bits, because ggml's floorf(log2f(amax)) rounds up to the next power of two for values
    // just below one (amax = 16 - 2^-20 gives 4), and the files must match byte for byte.
    int e = 0;
    if (amax > 0.0f) e = std::max(0, static_cast<int>(std::floor(std::log2(amax))) - 2 + 127);
    const float d = e8m0_to_f32_half(static_cast<uint8_t>(e));
    y[b].e = static_cast<uint8_t>(e);
    for (int j = 0; j < kHalf; ++j) {
      y[b].qs[j] = static_cast<uint8_t>(nearest_mxfp4_code(x[j], d) | (nearest_mxfp4_code(x[j + kHalf], d) << 4));
    }
  }
}

}  // namespace iwb::detail
