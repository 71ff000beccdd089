// Row reductions (see reduce.h): AVX2 bodies where the CPU has them, plain loops otherwise.
#include "iwb/kernels/reduce.h"

#include "cpu_features.h"

#include <algorithm>
#include <cmath>

#if defined(__x86_64__) || defined(__i386__)
#include "simd_math_avx2.h"

#include <immintrin.h>
#endif

namespace iwb {
namespace {

#if defined(__x86_64__) || defined(__i386__)
#define IWB_REDUCE_AVX2 __attribute__((target("avx2,fma")))

// Index of the first x[i] == value from `from` on, or -1.
int64_t first_equal_scalar(const float* x, int64_t from, int64_t n, float value) {
  for (int64_t i = from; i < n; ++i) {
    if (x[i] == value) return i;
  }
  return -1;
}

// Two passes, both at the memory's pace: the largest value (four vectors of running maxima;
// vmaxps keeps the running one where x is NaN), then the first index holding it.
IWB_REDUCE_AVX2 int64_t argmax_avx2(const float* x, int64_t n) {
  __m256 m0 = _mm256_set1_ps(-INFINITY), m1 = m0, m2 = m0, m3 = m0;
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    m0 = _mm256_max_ps(_mm256_loadu_ps(x + i), m0);
    m1 = _mm256_max_ps(_mm256_loadu_ps(x + i + 8), m1);
    m2 = _mm256_max_ps(_mm256_loadu_ps(x + i + 16), m2);
    m3 = _mm256_max_ps(_mm256_loadu_ps(x + i + 24), m3);
  }
  float best = detail::hmax8(_mm256_max_ps(_mm256_max_ps(m0, m1), _mm256_max_ps(m2, m3)));
  for (; i < n; ++i) best = x[i] > best ? x[i] : best;
  const __m256 target = _mm256_set1_ps(best);
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) {
    const int mask = _mm256_movemask_ps(_mm256_cmp_ps(_mm256_loadu_ps(x + j), target, _CMP_EQ_OQ));
    if (mask != 0) return j + __builtin_ctz(static_cast<unsigned>(mask));
  }
  const int64_t at = first_equal_scalar(x, j, n, best);
  return at >= 0 ? at : 0;  // all NaN
}

// Terms summed in f32 per lane over 256 values, then into double lanes.
IWB_REDUCE_AVX2 double sum_exp_avx2(const float* x, int64_t n, float shift) {
  const __m256 s = _mm256_set1_ps(shift);
  __m256d total = _mm256_setzero_pd();
  int64_t i = 0;
  while (i + 8 <= n) {
    __m256 a = _mm256_setzero_ps(), b = _mm256_setzero_ps();
    const int64_t end = std::min<int64_t>(n, i + 256);
    for (; i + 16 <= end; i += 16) {
      a = _mm256_add_ps(a, detail::exp_avx2(_mm256_sub_ps(_mm256_loadu_ps(x + i), s)));
      b = _mm256_add_ps(b, detail::exp_avx2(_mm256_sub_ps(_mm256_loadu_ps(x + i + 8), s)));
    }
    if (i + 8 <= end) {
      a = _mm256_add_ps(a, detail::exp_avx2(_mm256_sub_ps(_mm256_loadu_ps(x + i), s)));
      i += 8;
    }
    const __m256 ab = _mm256_add_ps(a, b);
    total = _mm256_add_pd(total, _mm256_cvtps_pd(_mm256_castps256_ps128(ab)));
    total = _mm256_add_pd(total, _mm256_cvtps_pd(_mm256_extractf128_ps(ab, 1)));
  }
  alignas(32) double lanes[4];
  _mm256_store_pd(lanes, total);
  double sum = (lanes[0] + lanes[1]) + (lanes[2] + lanes[3]);
  for (; i < n; ++i) sum += std::exp(x[i] - shift);
  return sum;
}

IWB_REDUCE_AVX2 int64_t find_at_least_avx2(const float* x, int64_t from, int64_t n, float bar) {
  const __m256 b = _mm256_set1_ps(bar);
  int64_t i = from;
  for (; i + 16 <= n; i += 16) {
    const int lo = _mm256_movemask_ps(_mm256_cmp_ps(_mm256_loadu_ps(x + i), b, _CMP_GE_OQ));
    const int hi = _mm256_movemask_ps(_mm256_cmp_ps(_mm256_loadu_ps(x + i + 8), b, _CMP_GE_OQ));
    if ((lo | hi) != 0) return i + __builtin_ctz(static_cast<unsigned>(lo | (hi << 8)));
  }
  for (; i < n; ++i) {
    if (x[i] >= bar) return i;
  }
  return n;
}

bool use_avx2() {
  const detail::CpuPath path = detail::cpu_path();
  return path != detail::CpuPath::Portable;
}
#endif

}  // namespace

int64_t argmax_f32_ref(const float* x, int64_t n) {
  if (n <= 0) return -1;
  int64_t best = -1;
  for (int64_t i = 0; i < n; ++i) {
    if (std::isnan(x[i])) continue;
    if (best < 0 || x[i] > x[best]) best = i;
  }
  return best < 0 ? 0 : best;
}

int64_t argmax_f32(const float* x, int64_t n) {
  if (n <= 0) return -1;
#if defined(__x86_64__) || defined(__i386__)
  if (use_avx2()) return argmax_avx2(x, n);
#endif
  return argmax_f32_ref(x, n);
}

double sum_exp_f32_ref(const float* x, int64_t n, float shift) {
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += std::exp(static_cast<double>(x[i]) - shift);
  return sum;
}

double sum_exp_f32(const float* x, int64_t n, float shift) {
  if (n <= 0) return 0;
#if defined(__x86_64__) || defined(__i386__)
  if (use_avx2()) return sum_exp_avx2(x, n, shift);
#endif
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += std::exp(x[i] - shift);
  return sum;
}

int64_t find_at_least_f32_ref(const float* x, int64_t from, int64_t n, float bar) {
  for (int64_t i = std::max<int64_t>(from, 0); i < n; ++i) {
    if (x[i] >= bar) return i;
  }
  return std::max<int64_t>(n, 0);
}

int64_t find_at_least_f32(const float* x, int64_t from, int64_t n, float bar) {
#if defined(__x86_64__) || defined(__i386__)
  if (from >= 0 && use_avx2()) return from >= n ? std::max<int64_t>(n, 0) : find_at_least_avx2(x, from, n, bar);
#endif
  return find_at_least_f32_ref(x, from, n, bar);
}

}  // namespace iwb
