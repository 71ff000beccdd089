// Reference quantizers of the 2- and 3-bit K-quants (Q2_K, Q3_K): 16 sub-blocks of 16 values
// per 256-value super-block, each sub-block scale itself quantized to 4 or 6 bits. Without an
// imatrix: ggml's quantize_row_q{2,3}_K_ref; with one: ggml's quantize_row_q{2,3}_K_impl.
#include "quantize_rows.h"
#include "quantize_search.h"

#include "iwb/kernels/dequantize.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace iwb::detail {
namespace {

constexpr int kSub = 16;                 // values per sub-block
constexpr int kNumSub = kQK_K / kSub;    // sub-blocks per super-block

// Two-bit levels, four per byte: per 128-value half, byte l holds values l, l+32, l+64, l+96.
void pack_2bit(const uint8_t* levels, uint8_t* qs) {
  for (int half = 0; half < kQK_K; half += 128) {
    for (int l = 0; l < 32; ++l) {
      qs[half / 4 + l] = static_cast<uint8_t>(levels[half + l] | (levels[half + l + 32] << 2) |
                                              (levels[half + l + 64] << 4) | (levels[half + l + 96] << 6));
    }
  }
}

float sum_of_squares(const float* x, int n) {
  float sum = 0.0f;
  for (int j = 0; j < n; ++j) sum += x[j] * x[j];
  return sum;
}

// Once the packed scales are known, every value is re-levelled against the scale and min it
// will actually be decoded with (the fp16 d times the 4-bit sub-block code).
void relevel_q2_k(const float* x, const BlockQ2_K& y, uint8_t* levels) {
  const float d_all = fp16_to_f32(y.d), dmin_all = fp16_to_f32(y.dmin);
  for (int j = 0; j < kNumSub; ++j) {
    const float d = d_all * static_cast<float>(y.scales[j] & 0x0F);
    if (d == 0.0f) continue;
    const float dm = dmin_all * static_cast<float>(y.scales[j] >> 4);
    for (int i = 0; i < kSub; ++i) {
      const int l = nearest_int((x[kSub * j + i] + dm) / d);
      levels[kSub * j + i] = static_cast<uint8_t>(std::max(0, std::min(3, l)));
    }
  }
}

void quantize_q2_k_block(const float* x, BlockQ2_K* y) {
  uint8_t levels[kQK_K];
  float weights[kSub], scales[kNumSub], mins[kNumSub];
  float max_scale = 0.0f, max_min = 0.0f;
  for (int j = 0; j < kNumSub; ++j) {
    for (int i = 0; i < kSub; ++i) weights[i] = std::fabs(x[kSub * j + i]);
    scales[j] = search_scale_and_min(kSub, 3, x + kSub * j, weights, levels + kSub * j, &mins[j], -0.5f, 0.1f, 15, true);
    if (scales[j] > max_scale) max_scale = scales[j];  // scales are >= 0: the min absorbs the offset
    if (mins[j] > max_min) max_min = mins[j];
  }
  // Scales and mins go to 4 bits each against the largest of the super-block.
  if (max_scale > 0.0f) {
    const float iscale = 15.0f / max_scale;
    for (int j = 0; j < kNumSub; ++j) y->scales[j] = static_cast<uint8_t>(nearest_int(iscale * scales[j]));
    y->d = f32_to_fp16(max_scale / 15.0f);
  } else {
    for (int j = 0; j < kNumSub; ++j) y->scales[j] = 0;
    y->d = f32_to_fp16(0.0f);
  }
  if (max_min > 0.0f) {
    const float iscale = 15.0f / max_min;
    for (int j = 0; j < kNumSub; ++j) {
      y->scales[j] = static_cast<uint8_t>(y->scales[j] | (nearest_int(iscale * mins[j]) << 4));
    }
    y->dmin = f32_to_fp16(max_min / 15.0f);
  } else {
    y->dmin = f32_to_fp16(0.0f);
  }
  relevel_q2_k(x, *y, levels);
  pack_2bit(levels, y->qs);
}

void quantize_q2_k_block_weighted(const float* x, const float* imatrix, BlockQ2_K* y) {
  uint8_t levels[kQK_K], scale_levels[kNumSub], min_levels[kNumSub];
  float weights[kSub], scales[kNumSub], mins[kNumSub], sub_weights[kNumSub];
  const float sigma2 = sum_of_squares(x, kQK_K) / static_cast<float>(kQK_K);
  for (int j = 0; j < kNumSub; ++j) {
    const float* qw = imatrix + kSub * j;
    float sum_w = 0.0f;
    for (int i = 0; i < kSub; ++i) {
      weights[i] = qw[i] * std::sqrt(sigma2 + x[kSub * j + i] * x[kSub * j + i]);
      sum_w += weights[i];
    }
    sub_weights[j] = sum_w;
    scales[j] = search_scale_and_min(kSub, 3, x + kSub * j, weights, levels + kSub * j, &mins[j], -0.9f, 0.05f, 36, false);
  }
  // The sub-block scales and mins are themselves fitted, weighted by each sub-block's importance.
  const float dm = search_positive_scale(kNumSub, 15, scales, scale_levels, sub_weights);
  const float mm = search_positive_scale(kNumSub, 15, mins, min_levels, sub_weights);
  y->d = f32_to_fp16(dm);
  y->dmin = f32_to_fp16(mm);
  for (int j = 0; j < kNumSub; ++j) y->scales[j] = static_cast<uint8_t>(scale_levels[j] | (min_levels[j] << 4));
  relevel_q2_k(x, *y, levels);
  pack_2bit(levels, y->qs);
}

// Q3_K's 16 six-bit scales (stored +32): low nibbles in bytes 0..7 (scale j < 8 low, j >= 8
// high nibble of byte j - 8), top two bits in byte 8 + j % 4 at bit 2 * (j / 4).
void pack_q3_k_scales(const int levels[kNumSub], uint8_t packed[12]) {
  std::memset(packed, 0, 12);
  for (int j = 0; j < kNumSub; ++j) {
    const int l = levels[j];
    if (j < 8) {
      packed[j] = static_cast<uint8_t>(l & 0x0F);
    } else {
      packed[j - 8] = static_cast<uint8_t>(packed[j - 8] | ((l & 0x0F) << 4));
    }
    packed[8 + j % 4] = static_cast<uint8_t>(packed[8 + j % 4] | ((l >> 4) << (2 * (j / 4))));
  }
}

int unpack_q3_k_scale(const uint8_t packed[12], int j) {
  const int low = j < 8 ? packed[j] & 0x0F : packed[j - 8] >> 4;
  return (low | (((packed[8 + j % 4] >> (2 * (j / 4))) & 3) << 4)) - 32;
}

// Re-levels against the decoded scales, then splits each 3-bit level (0..7, i.e. -4..3) into
// the hmask bit and the two low bits.
void finish_q3_k(const float* x, int8_t* levels, BlockQ3_K* y) {
  const float d_all = fp16_to_f32(y->d);
  for (int j = 0; j < kNumSub; ++j) {
    const float d = d_all * static_cast<float>(unpack_q3_k_scale(y->scales, j));
    if (d == 0.0f) continue;
    for (int i = 0; i < kSub; ++i) {
      const int l = nearest_int(x[kSub * j + i] / d);
      levels[kSub * j + i] = static_cast<int8_t>(std::max(-4, std::min(3, l)) + 4);
    }
  }
  // hmask bit k of byte m is the high bit of value 32k + m.
  std::memset(y->hmask, 0, sizeof(y->hmask));
  uint8_t low_levels[kQK_K];
  for (int j = 0; j < kQK_K; ++j) {
    int l = levels[j];
    if (l > 3) {
      y->hmask[j % 32] = static_cast<uint8_t>(y->hmask[j % 32] | (1 << (j / 32)));
      l -= 4;
    }
    low_levels[j] = static_cast<uint8_t>(l);
  }
  pack_2bit(low_levels, y->qs);
}

void quantize_q3_k_block(const float* x, BlockQ3_K* y) {
  int8_t levels[kQK_K];
  float scales[kNumSub];
  float max_scale = 0.0f, amax = 0.0f;
  for (int j = 0; j < kNumSub; ++j) {
    scales[j] = search_symmetric_scale_q3(kSub, 4, x + kSub * j, levels + kSub * j);
    if (std::fabs(scales[j]) > amax) {
      amax = std::fabs(scales[j]);
      max_scale = scales[j];
    }
  }
  if (max_scale != 0.0f) {
    const float iscale = -32.0f / max_scale;
    int scale_levels[kNumSub];
    for (int j = 0; j < kNumSub; ++j) {
      // ggml narrows the level to int8 before clamping; it lies in -32..32 here anyway.
      const int l = static_cast<int8_t>(nearest_int(iscale * scales[j]));
      scale_levels[j] = std::max(-32, std::min(31, l)) + 32;
    }
    pack_q3_k_scales(scale_levels, y->scales);
    y->d = f32_to_fp16(1.0f / iscale);
  } else {
    std::memset(y->scales, 0, sizeof(y->scales));
    y->d = f32_to_fp16(0.0f);
  }
  finish_q3_k(x, levels, y);
}

void quantize_q3_k_block_weighted(const float* x, const float* imatrix, BlockQ3_K* y) {
  int8_t levels[kQK_K], scale_levels8[kNumSub];
  float weights[kSub], scales[kNumSub], sub_weights[kNumSub];
  const float sigma2 = 2.0f * sum_of_squares(x, kQK_K) / static_cast<float>(kQK_K);
  for (int j = 0; j < kNumSub; ++j) {
    const float* qw = imatrix + kSub * j;
    for (int i = 0; i < kSub; ++i) weights[i] = qw[i] * std::sqrt(sigma2 + x[kSub * j + i] * x[kSub * j + i]);
    float sum_w = 0.0f;
    for (int i = 0; i < kSub; ++i) sum_w += weights[i];
    sub_weights[j] = sum_w;
    scales[j] = search_symmetric_scale(kSub, 4, x + kSub * j, weights, levels + kSub * j);
  }
  const float d_block = search_symmetric_scale(kNumSub, 32, scales, sub_weights, scale_levels8);
  int scale_levels[kNumSub];
  for (int j = 0; j < kNumSub; ++j) scale_levels[j] = scale_levels8[j];
  pack_q3_k_scales(scale_levels, y->scales);
  y->d = f32_to_fp16(d_block);
  finish_q3_k(x, levels, y);
}

}  // namespace

void quantize_q2_k(const float* x, BlockQ2_K* y, int64_t num_elements, const float* imatrix) {
  for (int64_t b = 0; b < num_elements / kQK_K; ++b) {
    if (imatrix != nullptr) {
      quantize_q2_k_block_weighted(x + b * kQK_K, imatrix + b * kQK_K, &y[b]);
    } else {
      quantize_q2_k_block(x + b * kQK_K, &y[b]);
    }
  }
}

void quantize_q3_k(const float* x, BlockQ3_K* y, int64_t num_elements, const float* imatrix) {
  for (int64_t b = 0; b < num_elements / kQK_K; ++b) {
    if (imatrix != nullptr) {
      quantize_q3_k_block_weighted(x + b * kQK_K, imatrix + b * kQK_K, &y[b]);
    } else {
      quantize_q3_k_block(x + b * kQK_K, &y[b]);
    }
  }
}

}  // namespace iwb::detail
