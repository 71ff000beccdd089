// Run-time CPU feature detection for the AVX2 and AVX-512 kernel paths.
#include "cpu_features.h"

#include "iwb/kernels/dequantize_fast.h"

#include <cstdlib>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

namespace iwb::detail {
namespace {

bool env_is_set(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr && value[0] == '1';
}

// CPUID leaf 7 sub-leaf 1, EAX bit 4 (GCC 12's __builtin_cpu_supports("avxvnni") reads false
// on a Zen 5 that has it). The AVX2 check before it covers the OS saving the YMM state.
bool cpu_reports_avx_vnni() {
#if defined(__x86_64__) || defined(__i386__)
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid_count(7, 1, &eax, &ebx, &ecx, &edx) == 0) return false;
  return (eax & (1u << 4)) != 0;
#else
  return false;
#endif
}

CpuPath detect_path() {
#if defined(__x86_64__) || defined(__i386__)
  // The overrides let the tests cover the narrower paths on a machine that has them all.
  if (env_is_set("IWB_CPU_PORTABLE")) return CpuPath::Portable;
  __builtin_cpu_init();
  const bool has_avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
                        __builtin_cpu_supports("f16c");
  if (!has_avx2) return CpuPath::Portable;
  if (env_is_set("IWB_CPU_AVX2")) return CpuPath::Avx2;
  const bool has_avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                          __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
                          __builtin_cpu_supports("avx512vnni");
  const bool has_vnni = cpu_reports_avx_vnni();
  if (has_vnni && env_is_set("IWB_CPU_AVX_VNNI")) return CpuPath::AvxVnni;
  if (has_avx512) return CpuPath::Avx512;
  return has_vnni ? CpuPath::AvxVnni : CpuPath::Avx2;
#else
  return CpuPath::Portable;
#endif
}

}  // namespace

CpuPath cpu_path() {
  static const CpuPath kPath = detect_path();
  return kPath;
}

bool has_avx_vnni() {
  static const bool kHas = cpu_path() != CpuPath::Portable && cpu_reports_avx_vnni();
  return kHas;
}

bool has_avx512_vbmi() {
#if defined(__x86_64__) || defined(__i386__)
  static const bool kHas = cpu_path() == CpuPath::Avx512 && __builtin_cpu_supports("avx512vbmi") &&
                           !env_is_set("IWB_CPU_NO_VBMI");
  return kHas;
#else
  return false;
#endif
}

bool has_avx2_fma_f16c() { return cpu_path() != CpuPath::Portable; }

bool is_matmul_exact_forced() {
  static const bool kForced = env_is_set("IWB_MATMUL_EXACT");
  return kForced;
}

}  // namespace iwb::detail

namespace iwb {
bool cpu_has_avx2_fma() { return detail::has_avx2_fma_f16c(); }
}  // namespace iwb
