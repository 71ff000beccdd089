// Shared by the white-box tests of the integer dot products (test_quant_dot.cpp: quantizers,
// row and decode dots; test_quant_tiles.cpp: tiles, token lanes and GEMMs): the CPU paths this
// process may run, their kernels, and the exact value a quantized activation row stands for.
#pragma once

#include "quant_dot.h"

#include "iwb/kernels/ggml_type.h"

#include <QMetaType>

#include <cmath>
#include <cstdint>
#include <vector>

namespace iwb::test {

using namespace iwb::detail;  // white-box: the kernels' private names

inline const GgmlType kIntegerTypes[] = {GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q5_0,
                                         GgmlType::Q5_1, GgmlType::Q8_0, GgmlType::MXFP4,
                                         GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K};

inline const char* path_name(CpuPath p) {
  switch (p) {
    case CpuPath::Portable: return "portable";
    case CpuPath::Avx2: return "avx2";
    case CpuPath::AvxVnni: return "avx-vnni";
    case CpuPath::Avx512: return "avx512";
  }
  return "?";
}

// The paths this process may run: everything up to cpu_path() (which honours IWB_CPU_AVX2,
// IWB_CPU_AVX_VNNI and IWB_CPU_PORTABLE) that this CPU has (an AVX-512 CPU may lack AVX-VNNI).
inline std::vector<CpuPath> available_paths() {
  std::vector<CpuPath> paths = {CpuPath::Portable};
  if (cpu_path() != CpuPath::Portable) paths.push_back(CpuPath::Avx2);
  if (cpu_path() != CpuPath::Avx2 && has_avx_vnni()) paths.push_back(CpuPath::AvxVnni);
  if (cpu_path() == CpuPath::Avx512) paths.push_back(CpuPath::Avx512);
  return paths;
}

inline bool select_on(CpuPath path, GgmlType type, DotKernels* k) {
  switch (path) {
    case CpuPath::Portable: return select_quant_dot_portable(type, k);
    case CpuPath::Avx2: return select_quant_dot_avx2(type, k);
    case CpuPath::AvxVnni: return select_quant_dot_avx_vnni(type, k);
    case CpuPath::Avx512: return select_quant_dot_avx512(type, k);
  }
  return false;
}

// Odd sizes: 37 blocks of 32 (an odd count leaves the AVX-512 pair loop a tail), 3 super-blocks.
inline int64_t columns(GgmlType type) { return ggml_type_traits(type).block_size == kQK_K ? 3 * kQK_K : 37 * kQK8_0; }

// The values a quantized activation row stands for.
inline std::vector<double> dequantized_activation(ActivationFormat format, const uint8_t* row, int64_t n) {
  std::vector<double> out(static_cast<size_t>(n));
  if (format == ActivationFormat::Q8_1) {
    const auto* b = reinterpret_cast<const BlockQ8A*>(row);
    for (int64_t i = 0; i < n; ++i) out[i] = static_cast<double>(b[i / 32].d) * b[i / 32].qs[i % 32];
  } else {
    const auto* b = reinterpret_cast<const BlockQ8_K*>(row);
    for (int64_t i = 0; i < n; ++i) out[i] = static_cast<double>(b[i / kQK_K].d) * b[i / kQK_K].qs[i % kQK_K];
  }
  return out;
}

inline double abs_dot(const std::vector<float>& w, const std::vector<double>& a) {
  double s = 0;
  for (size_t i = 0; i < w.size(); ++i) s += std::fabs(w[i] * a[i]);
  return s;
}

}  // namespace iwb::test

Q_DECLARE_METATYPE(iwb::GgmlType)
Q_DECLARE_METATYPE(iwb::detail::CpuPath)
