// AVX2 integer dot products of one quantized weight row with one 8-bit activation row, for
// CPUs without AVX-512 VNNI: vpmaddubsw (unsigned weights x signed activations, pairs summed
// to 16 bits, which the quant ranges keep from saturating) then vpmaddwd to 32 bits, with the
// K-quants' sub-block scales as vpmaddwd's second operand. The kernels themselves are in
// quant_dot_avx2_kernels.inc, shared with the AVX-VNNI build of them.
#include "quant_dot.h"

#if defined(__x86_64__) || defined(__i386__)
#define IWB_DOT_TARGET __attribute__((target("avx2,fma,f16c,bmi,bmi2")))
#define IWB_DOT_VNNI 0
#define IWB_DOT_NAMESPACE avx2
#include "quant_dot_avx2_kernels.inc"

namespace iwb::detail {

bool select_quant_dot_avx2(GgmlType type, DotKernels* out) { return avx2::select_kernels(type, out); }

}  // namespace iwb::detail

#else

namespace iwb::detail {
bool select_quant_dot_avx2(GgmlType, DotKernels*) { return false; }
}  // namespace iwb::detail

#endif
