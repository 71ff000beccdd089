// AVX-512 dot products of F16, BF16 and F32 weight rows with f32 activations: the weights are
// widened to f32 in registers (vcvtph2ps, a 16-bit shift for BF16) and multiplied with FMA,
// 16 lanes at a time. Decode runs one row at a time; prefill tiles of 4 rows x up to 4 tokens
// widen each weight vector once for every token. No quantized activations: f32 throughout.
#include "quant_dot.h"

#if defined(__x86_64__) || defined(__i386__)
#include "quant_avx512_common.h"

#include <algorithm>

namespace iwb::detail {
namespace {

using namespace avx512;

// 16 weights as f32 (count < 16: the rest read as zero, nothing past the row is touched).
struct LoadF16 {
  using Element = uint16_t;
  IWB_AVX512 static __m512 full(const uint16_t* p) { return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))); }
  IWB_AVX512 static __m512 part(const uint16_t* p, __mmask16 m) { return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, p)); }
};
struct LoadBf16 {
  using Element = uint16_t;
  IWB_AVX512 static __m512 widen(__m256i h) { return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16)); }
  IWB_AVX512 static __m512 full(const uint16_t* p) { return widen(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))); }
  IWB_AVX512 static __m512 part(const uint16_t* p, __mmask16 m) { return widen(_mm256_maskz_loadu_epi16(m, p)); }
};
struct LoadF32 {
  using Element = float;
  IWB_AVX512 static __m512 full(const float* p) { return _mm512_loadu_ps(p); }
  IWB_AVX512 static __m512 part(const float* p, __mmask16 m) { return _mm512_maskz_loadu_ps(m, p); }
};

template <typename Load>
IWB_AVX512 float vec_dot_float(const void* weight, const void* activation, int64_t n) {
  const auto* w = static_cast<const typename Load::Element*>(weight);
  const auto* x = static_cast<const float*>(activation);
  // Four accumulators keep four FMAs in flight.
  __m512 acc[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
  int64_t i = 0;
  for (; i + 64 <= n; i += 64) {
#pragma GCC unroll 4
    for (int k = 0; k < 4; ++k) acc[k] = _mm512_fmadd_ps(Load::full(w + i + 16 * k), _mm512_loadu_ps(x + i + 16 * k), acc[k]);
  }
  for (; i + 16 <= n; i += 16) acc[0] = _mm512_fmadd_ps(Load::full(w + i), _mm512_loadu_ps(x + i), acc[0]);
  if (i < n) {
    const __mmask16 m = static_cast<__mmask16>((1u << (n - i)) - 1);
    acc[1] = _mm512_fmadd_ps(Load::part(w + i, m), _mm512_maskz_loadu_ps(m, x + i), acc[1]);
  }
  return _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(acc[0], acc[1]), _mm512_add_ps(acc[2], acc[3])));
}

// Lane i of the result is the sum of the 16 lanes of v[i].
IWB_AVX512 inline __m512 reduce_16(const __m512 v[16]) {
  __m512 s[8];
#pragma GCC unroll 8
  for (int k = 0; k < 8; ++k) s[k] = _mm512_add_ps(_mm512_unpacklo_ps(v[2 * k], v[2 * k + 1]), _mm512_unpackhi_ps(v[2 * k], v[2 * k + 1]));
  __m512 u[4];
#pragma GCC unroll 4
  for (int m = 0; m < 4; ++m) {
    const __m512d a = _mm512_castps_pd(s[2 * m]), b = _mm512_castps_pd(s[2 * m + 1]);
    u[m] = _mm512_add_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(a, b)), _mm512_castpd_ps(_mm512_unpackhi_pd(a, b)));
  }
  const __m512 y01 = _mm512_add_ps(_mm512_shuffle_f32x4(u[0], u[1], _MM_SHUFFLE(1, 0, 1, 0)),
                                   _mm512_shuffle_f32x4(u[0], u[1], _MM_SHUFFLE(3, 2, 3, 2)));
  const __m512 y23 = _mm512_add_ps(_mm512_shuffle_f32x4(u[2], u[3], _MM_SHUFFLE(1, 0, 1, 0)),
                                   _mm512_shuffle_f32x4(u[2], u[3], _MM_SHUFFLE(3, 2, 3, 2)));
  return _mm512_add_ps(_mm512_shuffle_f32x4(y01, y23, _MM_SHUFFLE(2, 0, 2, 0)),
                       _mm512_shuffle_f32x4(y01, y23, _MM_SHUFFLE(3, 1, 3, 1)));
}

template <typename Load, int T>
IWB_AVX512 void tile_float(const uint8_t* weight, size_t weight_stride, int num_rows, const uint8_t* activation,
                           size_t activation_stride, int64_t n, float* out) {
  using E = typename Load::Element;
  const E* w[4];
#pragma GCC unroll 4
  for (int r = 0; r < 4; ++r) w[r] = reinterpret_cast<const E*>(weight + std::min(r, num_rows - 1) * weight_stride);
  const float* x[4];
#pragma GCC unroll 4
  for (int t = 0; t < 4; ++t) x[t] = reinterpret_cast<const float*>(activation + std::min(t, T - 1) * activation_stride);
  __m512 acc[16];
#pragma GCC unroll 16
  for (int k = 0; k < 16; ++k) acc[k] = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m512 xv[T];
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) xv[t] = _mm512_loadu_ps(x[t] + i);
#pragma GCC unroll 4
    for (int r = 0; r < 4; ++r) {
      const __m512 wv = Load::full(w[r] + i);
#pragma GCC unroll 4
      for (int t = 0; t < T; ++t) acc[4 * r + t] = _mm512_fmadd_ps(wv, xv[t], acc[4 * r + t]);
    }
  }
  if (i < n) {
    const __mmask16 m = static_cast<__mmask16>((1u << (n - i)) - 1);
    __m512 xv[T];
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) xv[t] = _mm512_maskz_loadu_ps(m, x[t] + i);
#pragma GCC unroll 4
    for (int r = 0; r < 4; ++r) {
      const __m512 wv = Load::part(w[r] + i, m);
#pragma GCC unroll 4
      for (int t = 0; t < T; ++t) acc[4 * r + t] = _mm512_fmadd_ps(wv, xv[t], acc[4 * r + t]);
    }
  }
  _mm512_storeu_ps(out, reduce_16(acc));
}

template <typename Load>
void tile_float_by_tokens(const uint8_t* weight, size_t weight_stride, int num_rows, const uint8_t* activation,
                          size_t activation_stride, int num_tokens, int64_t n, float* out) {
  switch (num_tokens) {
    case 1: tile_float<Load, 1>(weight, weight_stride, num_rows, activation, activation_stride, n, out); break;
    case 2: tile_float<Load, 2>(weight, weight_stride, num_rows, activation, activation_stride, n, out); break;
    case 3: tile_float<Load, 3>(weight, weight_stride, num_rows, activation, activation_stride, n, out); break;
    default: tile_float<Load, 4>(weight, weight_stride, num_rows, activation, activation_stride, n, out); break;
  }
}

}  // namespace

bool select_float_dot_avx512(GgmlType type, DotKernels* out) {
  DotKernels k;
  switch (type) {
    case GgmlType::F16:
      k.vec_dot = vec_dot_float<LoadF16>;
      k.tile = tile_float_by_tokens<LoadF16>;
      break;
    case GgmlType::BF16:
      k.vec_dot = vec_dot_float<LoadBf16>;
      k.tile = tile_float_by_tokens<LoadBf16>;
      break;
    case GgmlType::F32:
      k.vec_dot = vec_dot_float<LoadF32>;
      k.tile = tile_float_by_tokens<LoadF32>;
      break;
    default: return false;
  }
  *out = k;  // format None: the activations stay f32
  return true;
}

}  // namespace iwb::detail

#else

namespace iwb::detail {
bool select_float_dot_avx512(GgmlType, DotKernels*) { return false; }
}  // namespace iwb::detail

#endif
