// Helpers of the AVX2 kernels (private to kernels/src): a vector exp (range reduction by ln 2 and
// a degree-7 polynomial, relative error near 1e-7 as std::exp in f32; inputs are clamped to
// [-87, 88] so 2^n stays a normal number: exp(-87) ~ 1.6e-38 stands for every smaller value) and
// soft-capping, and horizontal max and sum.
#pragma once

#include <immintrin.h>

namespace iwb::detail {

__attribute__((target("avx2,fma"))) inline __m256 exp_avx2(__m256 x) {
  constexpr float kLog2e = 1.44269504088896341f;
  constexpr float kLn2Hi = 0.693145751953125f;  // ln 2 split so n * kLn2Hi is exact
  constexpr float kLn2Lo = 1.428606765330187e-06f;
  // Taylor coefficients of exp(r) for |r| <= ln(2) / 2.
  constexpr float kC[8] = {1.0f, 1.0f, 0.5f, 1.0f / 6, 1.0f / 24, 1.0f / 120, 1.0f / 720, 1.0f / 5040};
  x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-87.0f)), _mm256_set1_ps(88.0f));
  const __m256 n =
      _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(kLog2e)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(kLn2Hi), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(kLn2Lo), r);
  __m256 p = _mm256_set1_ps(kC[7]);
  for (int i = 6; i >= 0; --i) p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kC[i]));
  const __m256i bits = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_mul_ps(p, _mm256_castsi256_ps(bits));
}

// softcap * tanh(x / softcap), tanh(y) = 1 - 2 / (1 + exp(2y)).
__attribute__((target("avx2,fma"))) inline __m256 soft_cap_avx2(__m256 x, float cap) {
  const __m256 e = exp_avx2(_mm256_mul_ps(x, _mm256_set1_ps(2.0f / cap)));
  const __m256 t =
      _mm256_sub_ps(_mm256_set1_ps(1.0f), _mm256_div_ps(_mm256_set1_ps(2.0f), _mm256_add_ps(_mm256_set1_ps(1.0f), e)));
  return _mm256_mul_ps(t, _mm256_set1_ps(cap));
}

// The largest and the sum of a vector's 8 elements.
__attribute__((target("avx2"))) inline float hmax8(__m256 v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  return _mm_cvtss_f32(_mm_max_ss(m, _mm_movehdup_ps(m)));
}

__attribute__((target("avx2"))) inline float hsum8(__m256 v) {
  __m128 m = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_add_ps(m, _mm_movehl_ps(m, m));
  return _mm_cvtss_f32(_mm_add_ss(m, _mm_movehdup_ps(m)));
}

}  // namespace iwb::detail
