// AVX-512 and AVX2 bodies of the gated activations. Both are x * sigmoid(k(x)) times up:
// SiLU with k(x) = x and the tanh form of GELU with k(x) = 2 * sqrt(2/pi) * (x + 0.044715 x^3),
// since 0.5 * (1 + tanh(u)) = 1 / (1 + exp(-2u)). exp is a degree-7 polynomial after range
// reduction by ln 2 (relative error near 1e-7, as std::exp in f32).
#include "activations_simd.h"

#if defined(__x86_64__) || defined(__i386__)
// GCC 12 reports its own AVX-512 intrinsics as reading uninitialized values (bug 105593).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>

#include "simd_math_avx2.h"
#include "simd_math_avx512.h"

#define IWB_AVX2 __attribute__((target("avx2,fma")))
#define IWB_AVX512 __attribute__((target("avx512f,avx2,fma")))

namespace iwb::detail {
namespace {

constexpr float kSqrt2OverPiTimes2 = 1.5957691216057308f;  // 2 * sqrt(2 / pi)
constexpr float kGeluCoef = 0.044715f;

template <bool kIsGelu>
IWB_AVX512 inline __m512 gated_512(__m512 g, __m512 u) {
  __m512 k = g;
  if constexpr (kIsGelu) {
    k = _mm512_mul_ps(_mm512_mul_ps(g, _mm512_set1_ps(kSqrt2OverPiTimes2)),
                      _mm512_fmadd_ps(_mm512_mul_ps(g, g), _mm512_set1_ps(kGeluCoef), _mm512_set1_ps(1.0f)));
  }
  const __m512 denom = _mm512_add_ps(_mm512_set1_ps(1.0f), exp_avx512(_mm512_sub_ps(_mm512_setzero_ps(), k)));
  return _mm512_mul_ps(_mm512_div_ps(g, denom), u);
}

template <bool kIsGelu>
IWB_AVX512 void gated_avx512(const float* gate, const float* up, float* out, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(out + i, gated_512<kIsGelu>(_mm512_loadu_ps(gate + i), _mm512_loadu_ps(up + i)));
  if (i < n) {
    const __mmask16 m = static_cast<__mmask16>((1u << (n - i)) - 1);
    _mm512_mask_storeu_ps(out + i, m, gated_512<kIsGelu>(_mm512_maskz_loadu_ps(m, gate + i), _mm512_maskz_loadu_ps(m, up + i)));
  }
}

template <bool kIsGelu>
IWB_AVX2 inline __m256 gated_256(__m256 g, __m256 u) {
  __m256 k = g;
  if constexpr (kIsGelu) {
    k = _mm256_mul_ps(_mm256_mul_ps(g, _mm256_set1_ps(kSqrt2OverPiTimes2)),
                      _mm256_fmadd_ps(_mm256_mul_ps(g, g), _mm256_set1_ps(kGeluCoef), _mm256_set1_ps(1.0f)));
  }
  const __m256 denom = _mm256_add_ps(_mm256_set1_ps(1.0f), exp_avx2(_mm256_sub_ps(_mm256_setzero_ps(), k)));
  return _mm256_mul_ps(_mm256_div_ps(g, denom), u);
}

template <bool kIsGelu>
IWB_AVX2 void gated_avx2(const float* gate, const float* up, float* out, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(out + i, gated_256<kIsGelu>(_mm256_loadu_ps(gate + i), _mm256_loadu_ps(up + i)));
  for (; i < n; ++i) {
    // The tail through the same formula, one lane at a time.
    alignas(32) float g[8] = {gate[i]}, u[8] = {up[i]}, o[8];
    _mm256_store_ps(o, gated_256<kIsGelu>(_mm256_load_ps(g), _mm256_load_ps(u)));
    out[i] = o[0];
  }
}

}  // namespace

GatedRowFn select_gated_row(bool is_gelu, CpuPath path) {
  if (path == CpuPath::Avx512) return is_gelu ? gated_avx512<true> : gated_avx512<false>;
  if (path == CpuPath::Avx2 || path == CpuPath::AvxVnni) return is_gelu ? gated_avx2<true> : gated_avx2<false>;
  return nullptr;
}

}  // namespace iwb::detail

#else

namespace iwb::detail {
GatedRowFn select_gated_row(bool, CpuPath) { return nullptr; }
}  // namespace iwb::detail

#endif
