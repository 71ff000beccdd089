// AVX-VNNI integer dot products (the VEX-encoded 256-bit vpdpbusd / vpdpwssd of CPUs that have
// them without AVX-512, Intel's Alder Lake and later client cores): the AVX2 kernels of
// quant_dot_avx2_kernels.inc with each vpmaddubsw + vpmaddwd pair (and the K-quants' scale
// multiply and add) fused into one instruction.
#include "quant_dot.h"

#if defined(__x86_64__) || defined(__i386__)
#define IWB_DOT_TARGET __attribute__((target("avx2,fma,f16c,bmi,bmi2,avxvnni")))
#define IWB_DOT_VNNI 1
#define IWB_DOT_NAMESPACE avx_vnni
#include "quant_dot_avx2_kernels.inc"

namespace iwb::detail {

bool select_quant_dot_avx_vnni(GgmlType type, DotKernels* out) { return avx_vnni::select_kernels(type, out); }

}  // namespace iwb::detail

#else

namespace iwb::detail {
bool select_quant_dot_avx_vnni(GgmlType, DotKernels*) { return false; }
}  // namespace iwb::detail

#endif
