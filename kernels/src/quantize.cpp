// Reference quantizers (Q8_0, Q4_0, and the f16/bf16 casts) with ggml's rounding rules.
#include "iwb/kernels/quantize.h"

#include "iwb/kernels/dequantize.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace iwb {
namespace {

bool all_finite(const float* src, int64_t num_elements) {
  for (int64_t i = 0; i < num_elements; ++i) {
    if (!std::isfinite(src[i])) return false;
  }
  return true;
}

bool is_valid_block_count(const float* src, const void* dst, int64_t num_elements, int block_size) {
  if (num_elements < 0 || num_elements % block_size != 0) return false;
  return num_elements == 0 || (src != nullptr && dst != nullptr);
}

}  // namespace

bool quantize_row_q8_0_ref(const float* src, BlockQ8_0* dst, int64_t num_elements) {
  if (!is_valid_block_count(src, dst, num_elements, kQK8_0) || !all_finite(src, num_elements)) {
    return false;
  }
  const int64_t num_blocks = num_elements / kQK8_0;
  for (int64_t b = 0; b < num_blocks; ++b) {
    const float* x = src + b * kQK8_0;
    float amax = 0.0f;
    for (int j = 0; j < kQK8_0; ++j) amax = std::max(amax, std::fabs(x[j]));
    // Symmetric: the largest magnitude maps to +-127. The stored fp16 d is rounded, but
    // ggml quantizes with the unrounded inverse; doing the same keeps files identical.
    const float d = amax / 127.0f;
    const float inverse_d = d != 0.0f ? 1.0f / d : 0.0f;
    dst[b].d = f32_to_fp16(d);
    for (int j = 0; j < kQK8_0; ++j) {
      dst[b].qs[j] = static_cast<int8_t>(std::round(x[j] * inverse_d));  // half away from 0
    }
  }
  return true;
}

bool quantize_row_q4_0_ref(const float* src, BlockQ4_0* dst, int64_t num_elements) {
  if (!is_valid_block_count(src, dst, num_elements, kQK4_0) || !all_finite(src, num_elements)) {
    return false;
  }
  constexpr int kHalf = kQK4_0 / 2;
  const int64_t num_blocks = num_elements / kQK4_0;
  for (int64_t b = 0; b < num_blocks; ++b) {
    const float* x = src + b * kQK4_0;
    // The signed value of largest magnitude becomes q = 0, i.e. -8 * d: using all of -8..7
    // on the side where the extreme lies buys one level over a symmetric -7..7.
    float amax = 0.0f, extreme = 0.0f;
    for (int j = 0; j < kQK4_0; ++j) {
      if (amax < std::fabs(x[j])) {
        amax = std::fabs(x[j]);
        extreme = x[j];
      }
    }
    const float d = extreme / -8.0f;
    const float inverse_d = d != 0.0f ? 1.0f / d : 0.0f;
    dst[b].d = f32_to_fp16(d);
    for (int j = 0; j < kHalf; ++j) {
      // x * inverse_d lies in [-8, 8]; +8.5 and truncation round to nearest (ties up), and
      // the value +8 (the opposite extreme) clamps to 15.
      const int q0 = std::min(15, static_cast<int>(x[j] * inverse_d + 8.5f));
      const int q1 = std::min(15, static_cast<int>(x[j + kHalf] * inverse_d + 8.5f));
      dst[b].qs[j] = static_cast<uint8_t>(q0 | (q1 << 4));
    }
  }
  return true;
}

bool can_quantize_row_ref(GgmlType type) {
  switch (type) {
    case GgmlType::F32: case GgmlType::F16: case GgmlType::BF16:
    case GgmlType::Q8_0: case GgmlType::Q4_0:
      return true;
    default:
      return false;
  }
}

bool quantize_row_ref(GgmlType type, const float* src, void* dst, int64_t num_elements) {
  if (!can_quantize_row_ref(type) || num_elements < 0) return false;
  if (num_elements == 0) return true;
  if (src == nullptr || dst == nullptr) return false;
  const size_t alignment = type == GgmlType::F32 ? alignof(float) : alignof(uint16_t);
  if (reinterpret_cast<uintptr_t>(dst) % alignment != 0) return false;

  switch (type) {
    case GgmlType::F32:
      std::memcpy(dst, src, static_cast<size_t>(num_elements) * sizeof(float));
      return true;
    case GgmlType::F16: {
      auto* out = static_cast<uint16_t*>(dst);
      for (int64_t i = 0; i < num_elements; ++i) out[i] = f32_to_fp16(src[i]);
      return true;
    }
    case GgmlType::BF16: {
      auto* out = static_cast<uint16_t*>(dst);
      for (int64_t i = 0; i < num_elements; ++i) out[i] = f32_to_bf16(src[i]);
      return true;
    }
    case GgmlType::Q8_0:
      return quantize_row_q8_0_ref(src, static_cast<BlockQ8_0*>(dst), num_elements);
    case GgmlType::Q4_0:
      return quantize_row_q4_0_ref(src, static_cast<BlockQ4_0*>(dst), num_elements);
    default:
      return false;
  }
}

}  // namespace iwb
