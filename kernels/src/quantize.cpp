// Public entry points of the reference quantizers: argument checks shared by every type, the
// f16/bf16 casts, and the type dispatch. The per-type rounding lives in quantize_*.cpp.
#include "iwb/kernels/quantize.h"

#include "quantize_rows.h"

#include "iwb/kernels/dequantize.h"

#include <cmath>
#include <cstring>
#include <limits>

namespace iwb {
namespace {

constexpr float kFp16Max = 65504.0f;

// Everything a quantizer needs checked before it may write: a whole number of blocks, usable
// pointers, finite input within the type's range, a usable imatrix.
bool is_valid_request(GgmlType type, const float* src, const void* dst, int64_t num_elements,
                      const float* imatrix) {
  const int64_t block_size = ggml_type_traits(type).block_size;
  if (num_elements < 0 || num_elements % block_size != 0) return false;
  if (num_elements == 0) return true;
  if (src == nullptr || dst == nullptr) return false;
  const float limit = quantize_max_abs_input(type);
  for (int64_t i = 0; i < num_elements; ++i) {
    // !(|x| <= limit) is also true for NaN.
    if (!(std::fabs(src[i]) <= limit)) return false;
  }
  if (imatrix != nullptr && quantize_uses_imatrix(type)) {
    for (int64_t i = 0; i < num_elements; ++i) {
      if (!(imatrix[i] >= 0.0f) || !std::isfinite(imatrix[i])) return false;
    }
  }
  return true;
}

const float* used_imatrix(GgmlType type, const float* imatrix) {
  return quantize_uses_imatrix(type) ? imatrix : nullptr;
}

}  // namespace

bool quantize_row_q4_0_ref(const float* src, BlockQ4_0* dst, int64_t num_elements, const float* imatrix) {
  if (!is_valid_request(GgmlType::Q4_0, src, dst, num_elements, imatrix)) return false;
  detail::quantize_q4_0(src, dst, num_elements, imatrix);
  return true;
}

bool quantize_row_q4_1_ref(const float* src, BlockQ4_1* dst, int64_t num_elements, const float* imatrix) {
  if (!is_valid_request(GgmlType::Q4_1, src, dst, num_elements, imatrix)) return false;
  detail::quantize_q4_1(src, dst, num_elements, imatrix);
  return true;
}

bool quantize_row_q5_0_ref(const float* src, BlockQ5_0* dst, int64_t num_elements, const float* imatrix) {
  if (!is_valid_request(GgmlType::Q5_0, src, dst, num_elements, imatrix)) return false;
  detail::quantize_q5_0(src, dst, num_elements, imatrix);
  return true;
}

bool quantize_row_q5_1_ref(const float* src, BlockQ5_1* dst, int64_t num_elements, const float* imatrix) {
  if (!is_valid_request(GgmlType::Q5_1, src, dst, num_elements, imatrix)) return false;
  detail::quantize_q5_1(src, dst, num_elements, imatrix);
  return true;
}

bool quantize_row_q8_0_ref(const float* src, BlockQ8_0* dst, int64_t num_elements) {
  if (!is_valid_request(GgmlType::Q8_0, src, dst, num_elements, nullptr)) return false;
  detail::quantize_q8_0(src, dst, num_elements);
  return true;
}

bool quantize_row_q2_k_ref(const float* src, BlockQ2_K* dst, int64_t num_elements, const float* imatrix) {
  if (!is_valid_request(GgmlType::Q2_K, src, dst, num_elements, imatrix)) return false;
  detail::quantize_q2_k(src, dst, num_elements, imatrix);
  return true;
}

bool quantize_row_q3_k_ref(const float* src, BlockQ3_K* dst, int64_t num_elements, const float* imatrix) {
  if (!is_valid_request(GgmlType::Q3_K, src, dst, num_elements, imatrix)) return false;
  detail::quantize_q3_k(src, dst, num_elements, imatrix);
  return true;
}

bool quantize_row_q4_k_ref(const float* src, BlockQ4_K* dst, int64_t num_elements, const float* imatrix) {
  if (!is_valid_request(GgmlType::Q4_K, src, dst, num_elements, imatrix)) return false;
  detail::quantize_q4_k(src, dst, num_elements, imatrix);
  return true;
}

bool quantize_row_q5_k_ref(const float* src, BlockQ5_K* dst, int64_t num_elements, const float* imatrix) {
  if (!is_valid_request(GgmlType::Q5_K, src, dst, num_elements, imatrix)) return false;
  detail::quantize_q5_k(src, dst, num_elements, imatrix);
  return true;
}

bool quantize_row_q6_k_ref(const float* src, BlockQ6_K* dst, int64_t num_elements, const float* imatrix) {
  if (!is_valid_request(GgmlType::Q6_K, src, dst, num_elements, imatrix)) return false;
  detail::quantize_q6_k(src, dst, num_elements, imatrix);
  return true;
}

bool quantize_row_mxfp4_ref(const float* src, BlockMxfp4* dst, int64_t num_elements) {
  if (!is_valid_request(GgmlType::MXFP4, src, dst, num_elements, nullptr)) return false;
  detail::quantize_mxfp4(src, dst, num_elements);
  return true;
}

bool quantize_row_q8_1_ref(const float* src, BlockQ8_1* dst, int64_t num_elements) {
  if (!is_valid_request(GgmlType::Q8_1, src, dst, num_elements, nullptr)) return false;
  detail::quantize_q8_1(src, dst, num_elements);
  return true;
}

bool quantize_row_q8_k_ref(const float* src, BlockQ8_K* dst, int64_t num_elements) {
  if (!is_valid_request(GgmlType::Q8_K, src, dst, num_elements, nullptr)) return false;
  detail::quantize_q8_k(src, dst, num_elements);
  return true;
}

bool can_quantize_row_ref(GgmlType type) {
  switch (type) {
    case GgmlType::F32: case GgmlType::F16: case GgmlType::BF16:
    case GgmlType::Q4_0: case GgmlType::Q4_1: case GgmlType::Q5_0: case GgmlType::Q5_1:
    case GgmlType::Q8_0:
    case GgmlType::Q8_1:
    case GgmlType::MXFP4:
    case GgmlType::Q2_K: case GgmlType::Q3_K: case GgmlType::Q4_K: case GgmlType::Q5_K:
    case GgmlType::Q6_K: case GgmlType::Q8_K:
      return true;
    default:
      return false;
  }
}

bool quantize_uses_imatrix(GgmlType type) {
  switch (type) {
    case GgmlType::Q4_0: case GgmlType::Q4_1: case GgmlType::Q5_0: case GgmlType::Q5_1:
    case GgmlType::Q2_K: case GgmlType::Q3_K: case GgmlType::Q4_K: case GgmlType::Q5_K:
    case GgmlType::Q6_K:
      return true;
    default:
      return false;
  }
}

float quantize_max_abs_input(GgmlType type) {
  switch (type) {
    case GgmlType::Q4_0: return 8.0f * kFp16Max;     // d = extreme / -8
    case GgmlType::Q5_0: return 16.0f * kFp16Max;    // d = extreme / -16
    case GgmlType::Q8_0: return 127.0f * kFp16Max;   // d = amax / 127
    case GgmlType::Q8_1: return kFp16Max / 32.0f;    // s = d * sum(q), |sum(q)| <= 32 * 127
    // Q4_1/Q5_1 store the block minimum in fp16; the K-quants' dmin holds the largest
    // sub-block minimum / 63 (or / 15), and their scale searches may overshoot the range a
    // little, so they keep the same plain fp16 limit.
    case GgmlType::Q4_1: case GgmlType::Q5_1:
    case GgmlType::Q2_K: case GgmlType::Q3_K: case GgmlType::Q4_K: case GgmlType::Q5_K:
    case GgmlType::Q6_K:
      return kFp16Max;
    // An exponent up to 2^127 covers every finite float; inf has no MXFP4 form.
    case GgmlType::MXFP4: return std::numeric_limits<float>::max();
    default:
      return std::numeric_limits<float>::infinity();
  }
}

bool quantize_row_ref(GgmlType type, const float* src, void* dst, int64_t num_elements, const float* imatrix) {
  if (!can_quantize_row_ref(type) || num_elements < 0) return false;
  if (num_elements == 0) return num_elements % ggml_type_traits(type).block_size == 0;
  if (src == nullptr || dst == nullptr) return false;
  const size_t alignment = (type == GgmlType::F32 || type == GgmlType::Q8_K) ? alignof(float)
                           : type == GgmlType::MXFP4                         ? 1
                                                                             : alignof(uint16_t);
  if (reinterpret_cast<uintptr_t>(dst) % alignment != 0) return false;

  imatrix = used_imatrix(type, imatrix);
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
    case GgmlType::Q4_0: return quantize_row_q4_0_ref(src, static_cast<BlockQ4_0*>(dst), num_elements, imatrix);
    case GgmlType::Q4_1: return quantize_row_q4_1_ref(src, static_cast<BlockQ4_1*>(dst), num_elements, imatrix);
    case GgmlType::Q5_0: return quantize_row_q5_0_ref(src, static_cast<BlockQ5_0*>(dst), num_elements, imatrix);
    case GgmlType::Q5_1: return quantize_row_q5_1_ref(src, static_cast<BlockQ5_1*>(dst), num_elements, imatrix);
    case GgmlType::Q8_0: return quantize_row_q8_0_ref(src, static_cast<BlockQ8_0*>(dst), num_elements);
    case GgmlType::MXFP4: return quantize_row_mxfp4_ref(src, static_cast<BlockMxfp4*>(dst), num_elements);
    case GgmlType::Q8_1: return quantize_row_q8_1_ref(src, static_cast<BlockQ8_1*>(dst), num_elements);
    case GgmlType::Q2_K: return quantize_row_q2_k_ref(src, static_cast<BlockQ2_K*>(dst), num_elements, imatrix);
    case GgmlType::Q3_K: return quantize_row_q3_k_ref(src, static_cast<BlockQ3_K*>(dst), num_elements, imatrix);
    case GgmlType::Q4_K: return quantize_row_q4_k_ref(src, static_cast<BlockQ4_K*>(dst), num_elements, imatrix);
    case GgmlType::Q5_K: return quantize_row_q5_k_ref(src, static_cast<BlockQ5_K*>(dst), num_elements, imatrix);
    case GgmlType::Q6_K: return quantize_row_q6_k_ref(src, static_cast<BlockQ6_K*>(dst), num_elements, imatrix);
    case GgmlType::Q8_K: return quantize_row_q8_k_ref(src, static_cast<BlockQ8_K*>(dst), num_elements);
    default:
      return false;  // can_quantize_row_ref and this switch disagree: refuse, never guess
  }
}

}  // namespace iwb
