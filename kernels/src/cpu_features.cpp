// Run-time CPU feature detection for the AVX2 kernel paths.
#include "cpu_features.h"

#include "iwb/kernels/dequantize_fast.h"

#include <cstdlib>

namespace iwb::detail {

bool has_avx2_fma_f16c() {
#if defined(__x86_64__) || defined(__i386__)
  static const bool kHas = [] {
    // IWB_CPU_PORTABLE=1 forces the portable loops, so tests cover them on AVX2 machines too.
    if (const char* portable = std::getenv("IWB_CPU_PORTABLE"); portable != nullptr && portable[0] == '1') return false;
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
  }();
  return kHas;
#else
  return false;
#endif
}

}  // namespace iwb::detail

namespace iwb {
bool cpu_has_avx2_fma() { return detail::has_avx2_fma_f16c(); }
}  // namespace iwb
