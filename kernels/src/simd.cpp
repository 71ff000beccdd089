// Vector primitives: AVX2/FMA/F16C bodies behind a run-time check, portable bodies otherwise.
// The portable bodies keep several partial sums so the compiler can vectorise them too.
#include "simd.h"

#include "cpu_features.h"
#include "iwb/kernels/dequantize.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define IWB_X86 1
#define IWB_AVX2 __attribute__((target("avx2,fma,f16c")))
#endif

namespace iwb::simd {
namespace {

#ifdef IWB_X86
IWB_AVX2 inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

IWB_AVX2 float dot_f32_avx2(const float* a, const float* b, int64_t n) {
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc0);
    acc1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), acc1);
  }
  for (; i + 8 <= n; i += 8) acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc0);
  float sum = hsum(_mm256_add_ps(acc0, acc1));
  for (; i < n; ++i) sum += a[i] * b[i];
  return sum;
}

IWB_AVX2 void dot_rows_f32_avx2(const float* const* rows, int num_rows, const float* x, int64_t n, float* out) {
  // Missing rows point at row 0; their sums are computed and dropped (cheaper than branching).
  const float* r0 = rows[0];
  const float* r1 = num_rows > 1 ? rows[1] : r0;
  const float* r2 = num_rows > 2 ? rows[2] : r0;
  const float* r3 = num_rows > 3 ? rows[3] : r0;
  __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps(), a2 = _mm256_setzero_ps(), a3 = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 xv = _mm256_loadu_ps(x + i);
    a0 = _mm256_fmadd_ps(_mm256_loadu_ps(r0 + i), xv, a0);
    a1 = _mm256_fmadd_ps(_mm256_loadu_ps(r1 + i), xv, a1);
    a2 = _mm256_fmadd_ps(_mm256_loadu_ps(r2 + i), xv, a2);
    a3 = _mm256_fmadd_ps(_mm256_loadu_ps(r3 + i), xv, a3);
  }
  float s[4] = {hsum(a0), hsum(a1), hsum(a2), hsum(a3)};
  for (; i < n; ++i) {
    s[0] += r0[i] * x[i];
    s[1] += r1[i] * x[i];
    s[2] += r2[i] * x[i];
    s[3] += r3[i] * x[i];
  }
  for (int r = 0; r < num_rows; ++r) out[r] = s[r];
}

IWB_AVX2 void dot_tile_f32_avx2(const float* const* rows, int num_rows, const float* const* xs, int num_x, int64_t n,
                                float* out, int out_stride) {
  // Missing rows and tokens repeat the first ones; their sums are dropped.
  const float* r[4];
  const float* x[3];
  for (int i = 0; i < 4; ++i) r[i] = rows[i < num_rows ? i : 0];
  for (int j = 0; j < 3; ++j) x[j] = xs[j < num_x ? j : 0];
  // Twelve named accumulators: written as an array, GCC keeps them on the stack.
  __m256 a00 = _mm256_setzero_ps(), a01 = a00, a02 = a00, a10 = a00, a11 = a00, a12 = a00;
  __m256 a20 = a00, a21 = a00, a22 = a00, a30 = a00, a31 = a00, a32 = a00;
  int64_t k = 0;
  for (; k + 8 <= n; k += 8) {
    const __m256 x0 = _mm256_loadu_ps(x[0] + k), x1 = _mm256_loadu_ps(x[1] + k), x2 = _mm256_loadu_ps(x[2] + k);
    __m256 w = _mm256_loadu_ps(r[0] + k);
    a00 = _mm256_fmadd_ps(w, x0, a00);
    a01 = _mm256_fmadd_ps(w, x1, a01);
    a02 = _mm256_fmadd_ps(w, x2, a02);
    w = _mm256_loadu_ps(r[1] + k);
    a10 = _mm256_fmadd_ps(w, x0, a10);
    a11 = _mm256_fmadd_ps(w, x1, a11);
    a12 = _mm256_fmadd_ps(w, x2, a12);
    w = _mm256_loadu_ps(r[2] + k);
    a20 = _mm256_fmadd_ps(w, x0, a20);
    a21 = _mm256_fmadd_ps(w, x1, a21);
    a22 = _mm256_fmadd_ps(w, x2, a22);
    w = _mm256_loadu_ps(r[3] + k);
    a30 = _mm256_fmadd_ps(w, x0, a30);
    a31 = _mm256_fmadd_ps(w, x1, a31);
    a32 = _mm256_fmadd_ps(w, x2, a32);
  }
  const __m256 acc[4][3] = {{a00, a01, a02}, {a10, a11, a12}, {a20, a21, a22}, {a30, a31, a32}};
  for (int i = 0; i < num_rows; ++i) {
    for (int j = 0; j < num_x; ++j) {
      float s = hsum(acc[i][j]);
      for (int64_t t = k; t < n; ++t) s += r[i][t] * x[j][t];
      out[i * out_stride + j] = s;
    }
  }
}

IWB_AVX2 float dot_f32_f16_avx2(const float* a, const uint16_t* b, int64_t n) {
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256 b0 = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b + i)));
    const __m256 b1 = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b + i + 8)));
    acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), b0, acc0);
    acc1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), b1, acc1);
  }
  for (; i + 8 <= n; i += 8) {
    const __m256 b0 = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b + i)));
    acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), b0, acc0);
  }
  float sum = hsum(_mm256_add_ps(acc0, acc1));
  for (; i < n; ++i) sum += a[i] * fp16_to_f32(b[i]);
  return sum;
}

IWB_AVX2 void axpy_f16_avx2(float a, const uint16_t* x, float* y, int64_t n) {
  const __m256 av = _mm256_set1_ps(a);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 xv = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x + i)));
    _mm256_storeu_ps(y + i, _mm256_fmadd_ps(av, xv, _mm256_loadu_ps(y + i)));
  }
  for (; i < n; ++i) y[i] += a * fp16_to_f32(x[i]);
}

IWB_AVX2 void f32_to_f16_row_avx2(const float* src, uint16_t* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), h);
  }
  for (; i < n; ++i) dst[i] = f32_to_fp16(src[i]);
}
#endif

float dot_f32_generic(const float* a, const float* b, int64_t n) {
  float s[8] = {};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int j = 0; j < 8; ++j) s[j] += a[i + j] * b[i + j];
  }
  float sum = ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
  for (; i < n; ++i) sum += a[i] * b[i];
  return sum;
}

}  // namespace

float dot_f32(const float* a, const float* b, int64_t n) {
#ifdef IWB_X86
  if (detail::has_avx2_fma_f16c()) return dot_f32_avx2(a, b, n);
#endif
  return dot_f32_generic(a, b, n);
}

void dot_rows_f32(const float* const* rows, int num_rows, const float* x, int64_t n, float* out) {
#ifdef IWB_X86
  if (detail::has_avx2_fma_f16c()) {
    dot_rows_f32_avx2(rows, num_rows, x, n, out);
    return;
  }
#endif
  for (int r = 0; r < num_rows; ++r) out[r] = dot_f32_generic(rows[r], x, n);
}

void dot_tile_f32(const float* const* rows, int num_rows, const float* const* xs, int num_x, int64_t n,
                  float* out, int out_stride) {
#ifdef IWB_X86
  if (detail::has_avx2_fma_f16c()) {
    dot_tile_f32_avx2(rows, num_rows, xs, num_x, n, out, out_stride);
    return;
  }
#endif
  for (int i = 0; i < num_rows; ++i) {
    for (int j = 0; j < num_x; ++j) out[i * out_stride + j] = dot_f32_generic(rows[i], xs[j], n);
  }
}

float dot_f32_f16(const float* a, const uint16_t* b, int64_t n) {
#ifdef IWB_X86
  if (detail::has_avx2_fma_f16c()) return dot_f32_f16_avx2(a, b, n);
#endif
  float sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += a[i] * fp16_to_f32(b[i]);
  return sum;
}

void axpy_f16(float a, const uint16_t* x, float* y, int64_t n) {
#ifdef IWB_X86
  if (detail::has_avx2_fma_f16c()) {
    axpy_f16_avx2(a, x, y, n);
    return;
  }
#endif
  for (int64_t i = 0; i < n; ++i) y[i] += a * fp16_to_f32(x[i]);
}

void scale_f32(float* y, float a, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] *= a;
}

void f32_to_f16_row(const float* src, uint16_t* dst, int64_t n) {
#ifdef IWB_X86
  if (detail::has_avx2_fma_f16c()) {
    f32_to_f16_row_avx2(src, dst, n);
    return;
  }
#endif
  for (int64_t i = 0; i < n; ++i) dst[i] = f32_to_fp16(src[i]);
}

}  // namespace iwb::simd
