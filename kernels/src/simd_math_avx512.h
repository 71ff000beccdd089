// Vector exp for the AVX-512 kernels (private to kernels/src): range reduction by ln 2 and a
// degree-7 polynomial, relative error near 1e-7 (as std::exp in f32); inputs below -104 give
// (nearly) 0 and above 89 give inf.
#pragma once

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"  // GCC 12 on its own AVX-512 intrinsics (bug 105593)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>

namespace iwb::detail {

__attribute__((target("avx512f,fma"))) inline __m512 exp_avx512(__m512 x) {
  constexpr float kLog2e = 1.44269504088896341f;
  constexpr float kLn2Hi = 0.693145751953125f;  // ln 2 split so n * kLn2Hi is exact
  constexpr float kLn2Lo = 1.428606765330187e-06f;
  constexpr float kC[8] = {1.0f, 1.0f, 0.5f, 1.0f / 6, 1.0f / 24, 1.0f / 120, 1.0f / 720, 1.0f / 5040};
  x = _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(-104.0f)), _mm512_set1_ps(89.0f));
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(kLog2e)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(kLn2Hi), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(kLn2Lo), r);
  __m512 p = _mm512_set1_ps(kC[7]);
  for (int i = 6; i >= 0; --i) p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(kC[i]));
  return _mm512_scalef_ps(p, n);  // p * 2^n, to 0 or inf past the f32 range
}

}  // namespace iwb::detail
