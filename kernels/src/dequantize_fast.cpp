// dequantize_row and select_dequantizer: the AVX2 dequantizers where the CPU has them and the
// type has one, the reference loops otherwise. Argument checks are those of dequantize_row_ref.
#include "iwb/kernels/dequantize_fast.h"

#include "cpu_features.h"
#include "dequantize_avx2.h"
#include "iwb/kernels/dequantize.h"
#include "simd.h"

#include <cstdint>
#include <cstring>

namespace iwb {

bool dequantize_row(GgmlType type, const void* src, float* dst, int64_t num_elements) {
  // The reference does the argument checks (and the empty case); a SIMD body only runs on
  // requests it would accept.
  if (!ggml_can_dequantize(type) || num_elements <= 0 || src == nullptr || dst == nullptr ||
      num_elements % ggml_type_traits(type).block_size != 0 ||
      (ggml_data_alignment(type) == 2 && reinterpret_cast<uintptr_t>(src) % 2 != 0)) {
    return dequantize_row_ref(type, src, dst, num_elements);
  }
  const detail::DequantizeRowFn fn = detail::select_dequantizer(type);
  if (fn == nullptr) return dequantize_row_ref(type, src, dst, num_elements);
  fn(src, dst, num_elements);
  return true;
}

namespace detail {
namespace {

template <typename Block, void (*Fn)(const Block*, float*, int64_t), int64_t kBlockSize>
void blocks_adapter(const void* src, float* dst, int64_t n) {
  Fn(static_cast<const Block*>(src), dst, n / kBlockSize);
}

template <GgmlType kType>
void reference_adapter(const void* src, float* dst, int64_t n) {
  dequantize_row_ref(kType, src, dst, n);
}

}  // namespace

DequantizeRowFn select_dequantizer(GgmlType type) {
#if defined(__x86_64__) || defined(__i386__)
  if (has_avx2_fma_f16c()) {
    switch (type) {
      case GgmlType::F16: return [](const void* s, float* d, int64_t n) { dequantize_f16_avx2(static_cast<const uint16_t*>(s), d, n); };
      case GgmlType::BF16: return [](const void* s, float* d, int64_t n) { dequantize_bf16_avx2(static_cast<const uint16_t*>(s), d, n); };
      case GgmlType::Q4_0: return blocks_adapter<BlockQ4_0, dequantize_q4_0_avx2, kQK4_0>;
      case GgmlType::Q5_0: return blocks_adapter<BlockQ5_0, dequantize_q5_0_avx2, kQK5_0>;
      case GgmlType::Q8_0: return blocks_adapter<BlockQ8_0, dequantize_q8_0_avx2, kQK8_0>;
      case GgmlType::Q4_K: return blocks_adapter<BlockQ4_K, dequantize_q4_k_avx2, kQK_K>;
      case GgmlType::Q6_K: return blocks_adapter<BlockQ6_K, dequantize_q6_k_avx2, kQK_K>;
      default: break;
    }
  }
#endif
  switch (type) {
    case GgmlType::F32: return [](const void* s, float* d, int64_t n) { std::memcpy(d, s, static_cast<size_t>(n) * 4); };
    case GgmlType::F16: return reference_adapter<GgmlType::F16>;
    case GgmlType::BF16: return reference_adapter<GgmlType::BF16>;
    case GgmlType::Q4_0: return reference_adapter<GgmlType::Q4_0>;
    case GgmlType::Q4_1: return reference_adapter<GgmlType::Q4_1>;
    case GgmlType::Q5_0: return reference_adapter<GgmlType::Q5_0>;
    case GgmlType::Q5_1: return reference_adapter<GgmlType::Q5_1>;
    case GgmlType::Q8_0: return reference_adapter<GgmlType::Q8_0>;
    case GgmlType::MXFP4: return reference_adapter<GgmlType::MXFP4>;
    case GgmlType::Q2_K: return reference_adapter<GgmlType::Q2_K>;
    case GgmlType::Q3_K: return reference_adapter<GgmlType::Q3_K>;
    case GgmlType::Q4_K: return reference_adapter<GgmlType::Q4_K>;
    case GgmlType::Q5_K: return reference_adapter<GgmlType::Q5_K>;
    case GgmlType::Q6_K: return reference_adapter<GgmlType::Q6_K>;
    default: return nullptr;
  }
}

}  // namespace detail

}  // namespace iwb
