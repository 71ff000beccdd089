// Helpers of the AVX-512 kernels (private to kernels/src): a vector exp (range reduction by ln 2
// and a degree-7 polynomial, relative error near 1e-7 as std::exp in f32; inputs below -104
// give nearly 0, above 89 inf), soft-capping, and a 16 x 16 transpose of f32 values.
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

// softcap * tanh(x / softcap), tanh(y) = 1 - 2 / (1 + exp(2y)).
__attribute__((target("avx512f,fma"))) inline __m512 soft_cap_avx512(__m512 x, float cap) {
  const __m512 y2 = _mm512_mul_ps(x, _mm512_set1_ps(2.0f / cap));
  const __m512 e = exp_avx512(y2);
  const __m512 t =
      _mm512_sub_ps(_mm512_set1_ps(1.0f), _mm512_div_ps(_mm512_set1_ps(2.0f), _mm512_add_ps(_mm512_set1_ps(1.0f), e)));
  return _mm512_mul_ps(t, _mm512_set1_ps(cap));
}

// In place: row i of the 16 x 16 block becomes column i.
__attribute__((target("avx512f"))) inline void transpose_16x16(__m512 r[16]) {
  __m512 t[16], u[16];
#pragma GCC unroll 8
  for (int i = 0; i < 8; ++i) {
    t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
#pragma GCC unroll 4
  for (int i = 0; i < 4; ++i) {
    const __m512d a = _mm512_castps_pd(t[4 * i]), b = _mm512_castps_pd(t[4 * i + 2]);
    const __m512d c = _mm512_castps_pd(t[4 * i + 1]), d = _mm512_castps_pd(t[4 * i + 3]);
    u[4 * i + 0] = _mm512_castpd_ps(_mm512_unpacklo_pd(a, b));
    u[4 * i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a, b));
    u[4 * i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(c, d));
    u[4 * i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(c, d));
  }
  // u[4i + e], 128-bit lane L: rows 4i..4i+3 at column 4L + e.
#pragma GCC unroll 4
  for (int e = 0; e < 4; ++e) {
    const __m512 a0 = _mm512_shuffle_f32x4(u[e], u[4 + e], 0x88), a1 = _mm512_shuffle_f32x4(u[e], u[4 + e], 0xDD);
    const __m512 b0 = _mm512_shuffle_f32x4(u[8 + e], u[12 + e], 0x88), b1 = _mm512_shuffle_f32x4(u[8 + e], u[12 + e], 0xDD);
    r[e] = _mm512_shuffle_f32x4(a0, b0, 0x88);
    r[8 + e] = _mm512_shuffle_f32x4(a0, b0, 0xDD);
    r[4 + e] = _mm512_shuffle_f32x4(a1, b1, 0x88);
    r[12 + e] = _mm512_shuffle_f32x4(a1, b1, 0xDD);
  }
}

}  // namespace iwb::detail
