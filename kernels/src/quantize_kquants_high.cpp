// Reference quantizers of the 4-, 5- and 6-bit K-quants. Q4_K/Q5_K: 8 sub-blocks of 32 with a
// 6-bit scale and min each; Q6_K: 16 symmetric sub-blocks of 16 with 8-bit scales. Without an
// imatrix: ggml's quantize_row_q{4,5,6}_K_ref; with one: ggml's quantize_row_q{4,5,6}_K_impl.
#include "quantize_rows.h"
#include "quantize_search.h"

#include "iwb/kernels/dequantize.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace iwb::detail {
namespace {

constexpr int kSub = 32;               // Q4_K/Q5_K values per sub-block
constexpr int kNumSub = kQK_K / kSub;

// Packs the inverse of unpack_scale_min_k4: scales/mins 0-3 whole into bytes 0-7, 4-7 split
// into a low nibble (bytes 8-11) and two high bits in the spare top bits of bytes 0-7.
void pack_scale_min_k4(const uint8_t scale_levels[kNumSub], const uint8_t min_levels[kNumSub],
                       uint8_t packed[kKScaleSize]) {
  for (int j = 0; j < kNumSub; ++j) {
    const uint8_t ls = scale_levels[j], lm = min_levels[j];
    if (j < 4) {
      packed[j] = ls;
      packed[j + 4] = lm;
    } else {
      packed[j + 4] = static_cast<uint8_t>((ls & 0x0F) | ((lm & 0x0F) << 4));
      packed[j - 4] = static_cast<uint8_t>(packed[j - 4] | ((ls >> 4) << 6));
      packed[j] = static_cast<uint8_t>(packed[j] | ((lm >> 4) << 6));
    }
  }
}

// A 4/5-bit super-block before bit packing: levels 0..nmax and the fp16 scale fields.
struct ScaleMinBlock {
  uint16_t d, dmin;
  uint8_t scales[kKScaleSize];
  uint8_t levels[kQK_K];
};

// Without an imatrix: each sub-block weighted by av_x + |x| (its RMS plus the value), then
// scales and mins quantized linearly against the super-block's largest.
void fit_scale_min_block(const float* x, int nmax, float rmin, float rdelta, int nstep, ScaleMinBlock* out) {
  float weights[kSub], scales[kNumSub], mins[kNumSub];
  float max_scale = 0.0f, max_min = 0.0f;
  for (int j = 0; j < kNumSub; ++j) {
    const float* xs = x + kSub * j;
    float sum_x2 = 0.0f;
    for (int l = 0; l < kSub; ++l) sum_x2 += xs[l] * xs[l];
    const float av_x = std::sqrt(sum_x2 / static_cast<float>(kSub));
    for (int l = 0; l < kSub; ++l) weights[l] = av_x + std::fabs(xs[l]);
    scales[j] = search_scale_and_min(kSub, nmax, xs, weights, out->levels + kSub * j, &mins[j], rmin, rdelta, nstep, false);
    if (scales[j] > max_scale) max_scale = scales[j];
    if (mins[j] > max_min) max_min = mins[j];
  }
  const float inv_scale = max_scale > 0.0f ? 63.0f / max_scale : 0.0f;
  const float inv_min = max_min > 0.0f ? 63.0f / max_min : 0.0f;
  uint8_t scale_levels[kNumSub], min_levels[kNumSub];
  for (int j = 0; j < kNumSub; ++j) {
    // ggml narrows to uint8 before taking the minimum with 63.
    scale_levels[j] = std::min<uint8_t>(63, static_cast<uint8_t>(nearest_int(inv_scale * scales[j])));
    min_levels[j] = std::min<uint8_t>(63, static_cast<uint8_t>(nearest_int(inv_min * mins[j])));
  }
  pack_scale_min_k4(scale_levels, min_levels, out->scales);
  out->d = f32_to_fp16(max_scale / 63.0f);
  out->dmin = f32_to_fp16(max_min / 63.0f);
}

// With an imatrix: weights imatrix * sqrt(sigma^2 + x^2), a wider scale search, and the
// 6-bit scales and mins themselves fitted by importance.
void fit_scale_min_block_weighted(const float* x, const float* imatrix, int nmax, bool clamp_levels,
                                  ScaleMinBlock* out) {
  float weights[kSub], scales[kNumSub], mins[kNumSub], sub_weights[kNumSub];
  float sum_x2 = 0.0f;
  for (int l = 0; l < kQK_K; ++l) sum_x2 += x[l] * x[l];
  const float sigma2 = 2.0f * sum_x2 / static_cast<float>(kQK_K);
  for (int j = 0; j < kNumSub; ++j) {
    const float* xs = x + kSub * j;
    const float* qw = imatrix + kSub * j;
    for (int l = 0; l < kSub; ++l) weights[l] = qw[l] * std::sqrt(sigma2 + xs[l] * xs[l]);
    float sum_w = 0.0f;
    for (int l = 0; l < kSub; ++l) sum_w += weights[l];
    sub_weights[j] = sum_w;
    scales[j] = search_scale_and_min(kSub, nmax, xs, weights, out->levels + kSub * j, &mins[j], -0.9f, 0.05f, 36, false);
  }
  uint8_t scale_levels[kNumSub], min_levels[kNumSub];
  const float d_block = search_positive_scale(kNumSub, 63, scales, scale_levels, sub_weights);
  const float m_block = search_positive_scale(kNumSub, 63, mins, min_levels, sub_weights);
  if (clamp_levels) {  // ggml's Q5_K path clamps, its Q4_K path does not (levels are <= 63 anyway)
    for (int j = 0; j < kNumSub; ++j) {
      scale_levels[j] = std::min<uint8_t>(63, scale_levels[j]);
      min_levels[j] = std::min<uint8_t>(63, min_levels[j]);
    }
  }
  pack_scale_min_k4(scale_levels, min_levels, out->scales);
  out->d = f32_to_fp16(d_block);
  out->dmin = f32_to_fp16(m_block);
}

// Re-levels every value against the scale and min it will be decoded with.
void relevel_scale_min_block(const float* x, int nmax, ScaleMinBlock* b) {
  const float d_all = fp16_to_f32(b->d), dmin_all = fp16_to_f32(b->dmin);
  for (int j = 0; j < kNumSub; ++j) {
    uint8_t sc = 0, m = 0;
    unpack_scale_min_k4(j, b->scales, &sc, &m);
    const float d = d_all * static_cast<float>(sc);
    if (d == 0.0f) continue;
    const float dm = dmin_all * static_cast<float>(m);
    for (int i = 0; i < kSub; ++i) {
      const int l = nearest_int((x[kSub * j + i] + dm) / d);
      b->levels[kSub * j + i] = static_cast<uint8_t>(std::max(0, std::min(nmax, l)));
    }
  }
}

void quantize_q4_k_block(const float* x, const float* imatrix, BlockQ4_K* y) {
  ScaleMinBlock b;
  if (imatrix != nullptr) {
    fit_scale_min_block_weighted(x, imatrix, 15, false, &b);
  } else {
    fit_scale_min_block(x, 15, -1.0f, 0.1f, 20, &b);
  }
  relevel_scale_min_block(x, 15, &b);
  y->d = b.d;
  y->dmin = b.dmin;
  std::memcpy(y->scales, b.scales, kKScaleSize);
  // Per 64 values: 32 bytes, low nibbles the first 32 values, high nibbles the next 32.
  for (int chunk = 0; chunk < kQK_K / 64; ++chunk) {
    const uint8_t* l = b.levels + 64 * chunk;
    for (int i = 0; i < 32; ++i) y->qs[32 * chunk + i] = static_cast<uint8_t>(l[i] | (l[i + 32] << 4));
  }
}

void quantize_q5_k_block(const float* x, const float* imatrix, BlockQ5_K* y) {
  ScaleMinBlock b;
  if (imatrix != nullptr) {
    fit_scale_min_block_weighted(x, imatrix, 31, true, &b);
  } else {
    fit_scale_min_block(x, 31, -0.5f, 0.1f, 15, &b);
  }
  relevel_scale_min_block(x, 31, &b);
  y->d = b.d;
  y->dmin = b.dmin;
  std::memcpy(y->scales, b.scales, kKScaleSize);
  // As Q4_K plus the fifth bits: qh byte i bit 2c (2c+1) is the high bit of value 64c + i (+32).
  std::memset(y->qh, 0, sizeof(y->qh));
  for (int chunk = 0; chunk < kQK_K / 64; ++chunk) {
    const uint8_t* l = b.levels + 64 * chunk;
    for (int i = 0; i < 32; ++i) {
      int lo = l[i], hi = l[i + 32];
      if (lo > 15) {
        lo -= 16;
        y->qh[i] = static_cast<uint8_t>(y->qh[i] | (1 << (2 * chunk)));
      }
      if (hi > 15) {
        hi -= 16;
        y->qh[i] = static_cast<uint8_t>(y->qh[i] | (2 << (2 * chunk)));
      }
      y->qs[32 * chunk + i] = static_cast<uint8_t>(lo | (hi << 4));
    }
  }
}

void quantize_q6_k_block(const float* x, const float* imatrix, BlockQ6_K* y) {
  constexpr int kSub6 = 16, kNumSub6 = kQK_K / kSub6;
  int8_t levels[kQK_K];
  float scales[kNumSub6];
  float max_scale = 0.0f, max_abs_scale = 0.0f;
  for (int j = 0; j < kNumSub6; ++j) {
    // ggml's imatrix path weights by the imatrix alone (no sigma term) for Q6_K.
    const float* weights = imatrix != nullptr ? imatrix + kSub6 * j : nullptr;
    scales[j] = search_symmetric_scale(kSub6, 32, x + kSub6 * j, weights, levels + kSub6 * j);
    if (std::fabs(scales[j]) > max_abs_scale) {
      max_abs_scale = std::fabs(scales[j]);
      max_scale = scales[j];
    }
  }
  if (max_abs_scale < kGroupMaxEps) {
    std::memset(y, 0, sizeof(*y));
    return;
  }
  // The signed largest scale maps to -128, so sub-block scales use the full int8 range.
  const float iscale = -128.0f / max_scale;
  y->d = f32_to_fp16(1.0f / iscale);
  for (int j = 0; j < kNumSub6; ++j) y->scales[j] = static_cast<int8_t>(std::min(127, nearest_int(iscale * scales[j])));
  const float d_all = fp16_to_f32(y->d);
  for (int j = 0; j < kNumSub6; ++j) {
    const float d = d_all * static_cast<float>(y->scales[j]);
    if (d == 0.0f) continue;
    for (int i = 0; i < kSub6; ++i) {
      const int l = nearest_int(x[kSub6 * j + i] / d);
      levels[kSub6 * j + i] = static_cast<int8_t>(std::max(-32, std::min(31, l)) + 32);
    }
  }
  // Per 128-value half: ql[i] holds values i (low nibble) and i+64 (high), ql[i+32] values
  // i+32 and i+96; qh[i] their top two bits at bit pairs 0, 1, 2, 3 (values i, +32, +64, +96).
  for (int half = 0; half < 2; ++half) {
    const int8_t* l = levels + 128 * half;
    uint8_t* ql = y->ql + 64 * half;
    uint8_t* qh = y->qh + 32 * half;
    for (int i = 0; i < 32; ++i) {
      ql[i] = static_cast<uint8_t>((l[i] & 0x0F) | ((l[i + 64] & 0x0F) << 4));
      ql[i + 32] = static_cast<uint8_t>((l[i + 32] & 0x0F) | ((l[i + 96] & 0x0F) << 4));
      qh[i] = static_cast<uint8_t>((l[i] >> 4) | ((l[i + 32] >> 4) << 2) | ((l[i + 64] >> 4) << 4) |
                                   ((l[i + 96] >> 4) << 6));
    }
  }
}

}  // namespace

void quantize_q4_k(const float* x, BlockQ4_K* y, int64_t num_elements, const float* imatrix) {
  for (int64_t b = 0; b < num_elements / kQK_K; ++b) {
    quantize_q4_k_block(x + b * kQK_K, imatrix ? imatrix + b * kQK_K : nullptr, &y[b]);
  }
}

void quantize_q5_k(const float* x, BlockQ5_K* y, int64_t num_elements, const float* imatrix) {
  for (int64_t b = 0; b < num_elements / kQK_K; ++b) {
    quantize_q5_k_block(x + b * kQK_K, imatrix ? imatrix + b * kQK_K : nullptr, &y[b]);
  }
}

void quantize_q6_k(const float* x, BlockQ6_K* y, int64_t num_elements, const float* imatrix) {
  for (int64_t b = 0; b < num_elements / kQK_K; ++b) {
    quantize_q6_k_block(x + b * kQK_K, imatrix ? imatrix + b * kQK_K : nullptr, &y[b]);
  }
}

}  // namespace iwb::detail
