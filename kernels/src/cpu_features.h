// Run-time CPU feature check shared by the kernels' dispatchers (private to kernels/src).
#pragma once

namespace iwb::detail {

// AVX2 + FMA + F16C, checked once; false when the environment sets IWB_CPU_PORTABLE=1.
bool has_avx2_fma_f16c();

}  // namespace iwb::detail
