// CPU features asked about outside the kernels (the machine probe), read as the kernels' own
// dispatch reads them.
#pragma once

namespace iwb {

// The CPU reports AVX-VNNI (CPUID leaf 7 sub-leaf 1, EAX bit 4), whatever kernel path this
// process chose. GCC 12's __builtin_cpu_supports("avxvnni") reads false on a Zen 5 that has it,
// and clang 14 does not know the name at all.
bool cpu_reports_avx_vnni();

}  // namespace iwb
