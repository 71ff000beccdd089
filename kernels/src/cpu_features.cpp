// Run-time CPU feature detection for the AVX2 and AVX-512 kernel paths.
#include "cpu_features.h"

#include "iwb/kernels/dequantize_fast.h"

#include <cstdlib>

namespace iwb::detail {
namespace {

bool env_is_set(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr && value[0] == '1';
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
  return has_avx512 ? CpuPath::Avx512 : CpuPath::Avx2;
#else
  return CpuPath::Portable;
#endif
}

}  // namespace

CpuPath cpu_path() {
  static const CpuPath kPath = detect_path();
  return kPath;
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
