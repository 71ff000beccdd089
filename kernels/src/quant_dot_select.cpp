// The dispatch table of the dot-product kernels: which activation blocks a weight type needs,
// and the widest kernels this CPU runs for it (AVX-512 VNNI, AVX-VNNI, AVX2, portable).
#include "quant_dot.h"

namespace iwb::detail {

ActivationFormat activation_format(GgmlType weight_type) {
  switch (weight_type) {
    case GgmlType::Q4_0:
    case GgmlType::Q4_1:
    case GgmlType::Q5_0:
    case GgmlType::Q5_1:
    case GgmlType::Q8_0:
    case GgmlType::MXFP4: return ActivationFormat::Q8_1;
    case GgmlType::Q4_K:
    case GgmlType::Q5_K:
    case GgmlType::Q6_K: return ActivationFormat::Q8_K;
    default: return ActivationFormat::None;
  }
}

size_t activation_row_bytes(ActivationFormat format, int64_t num_elements) {
  switch (format) {
    case ActivationFormat::Q8_1: return static_cast<size_t>(num_elements / kQK8_0) * sizeof(BlockQ8A);
    case ActivationFormat::Q8_K: return static_cast<size_t>(num_elements / kQK_K) * sizeof(BlockQ8_K);
    case ActivationFormat::None: break;
  }
  return 0;
}

bool select_dot_kernels(GgmlType type, CpuPath path, DotKernels* out) {
  switch (path) {
    case CpuPath::Avx512:
      if (select_quant_dot_avx512(type, out) || select_float_dot_avx512(type, out)) return true;
      [[fallthrough]];
    case CpuPath::AvxVnni:
      if (path == CpuPath::AvxVnni && select_quant_dot_avx_vnni(type, out)) return true;
      [[fallthrough]];
    case CpuPath::Avx2:
      if (select_quant_dot_avx2(type, out) || select_float_dot_avx2(type, out)) return true;
      [[fallthrough]];
    case CpuPath::Portable: return select_quant_dot_portable(type, out);
  }
  return false;
}

}  // namespace iwb::detail
