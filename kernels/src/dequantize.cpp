// dequantize_row_ref: checks the request and dispatches to the per-type reference loops.
#include "iwb/kernels/dequantize.h"

#include "dequantize_rows.h"

#include <cstring>

namespace iwb {

bool dequantize_row_ref(GgmlType type, const void* src, float* dst, int64_t num_elements) {
  if (!ggml_can_dequantize(type) || num_elements < 0) return false;
  const GgmlTypeTraits& traits = ggml_type_traits(type);
  if (num_elements % traits.block_size != 0) return false;
  if (num_elements == 0) return true;
  if (src == nullptr || dst == nullptr) return false;
  // Every block layout but MXFP4's (bytes only) is made of 16-bit fields; GGUF aligns tensor
  // data to at least 32 bytes, so an odd address means the caller computed an offset wrongly.
  if (ggml_data_alignment(type) == 2 && reinterpret_cast<uintptr_t>(src) % 2 != 0) return false;

  const int64_t num_blocks = num_elements / traits.block_size;
  switch (type) {
    case GgmlType::F32:
      std::memcpy(dst, src, static_cast<size_t>(num_elements) * sizeof(float));
      return true;
    case GgmlType::F16:
      detail::dequantize_f16(static_cast<const uint16_t*>(src), dst, num_elements);
      return true;
    case GgmlType::BF16:
      detail::dequantize_bf16(static_cast<const uint16_t*>(src), dst, num_elements);
      return true;
    case GgmlType::Q4_0:
      detail::dequantize_q4_0(static_cast<const BlockQ4_0*>(src), dst, num_blocks);
      return true;
    case GgmlType::Q4_1:
      detail::dequantize_q4_1(static_cast<const BlockQ4_1*>(src), dst, num_blocks);
      return true;
    case GgmlType::Q5_0:
      detail::dequantize_q5_0(static_cast<const BlockQ5_0*>(src), dst, num_blocks);
      return true;
    case GgmlType::Q5_1:
      detail::dequantize_q5_1(static_cast<const BlockQ5_1*>(src), dst, num_blocks);
      return true;
    case GgmlType::Q8_0:
      detail::dequantize_q8_0(static_cast<const BlockQ8_0*>(src), dst, num_blocks);
      return true;
    case GgmlType::MXFP4: detail::dequantize_mxfp4(static_cast<const BlockMxfp4*>(src), dst, num_blocks); return true;
    case GgmlType::Q2_K:
      detail::dequantize_q2_k(static_cast<const BlockQ2_K*>(src), dst, num_blocks);
      return true;
    case GgmlType::Q3_K:
      detail::dequantize_q3_k(static_cast<const BlockQ3_K*>(src), dst, num_blocks);
      return true;
    case GgmlType::Q4_K:
      detail::dequantize_q4_k(static_cast<const BlockQ4_K*>(src), dst, num_blocks);
      return true;
    case GgmlType::Q5_K:
      detail::dequantize_q5_k(static_cast<const BlockQ5_K*>(src), dst, num_blocks);
      return true;
    case GgmlType::Q6_K:
      detail::dequantize_q6_k(static_cast<const BlockQ6_K*>(src), dst, num_blocks);
      return true;
    default:
      return false;  // ggml_can_dequantize and this switch disagree: refuse, never guess
  }
}

}  // namespace iwb
