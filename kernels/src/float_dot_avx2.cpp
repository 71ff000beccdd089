// AVX2 dot products of F16, BF16 and F32 weight rows with f32 activations, for CPUs without
// AVX-512: the weights widened to f32 in registers (vcvtph2ps, a 16-bit shift for BF16) and
// multiplied with FMA, 8 lanes at a time. They serve decode and a few tokens (one row at a
// time, in matmul_driver.cpp's prefetched streams); more tokens keep the dequantizing path.
// Without them decode took the dequantizing path too, which widens each 4-row tile into a
// buffer first: F16 decode of the default model reached 37% of the read-only bandwidth on a
// Zen 3 (4.1 tokens/s against llama.cpp's 9.6).
#include "quant_dot.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

#include <cstring>

#define IWB_FLOAT_AVX2 __attribute__((target("avx2,fma,f16c")))

namespace iwb::detail {
namespace {

// 8 weights as f32, and one (the row's tail).
struct LoadF16 {
  using Element = uint16_t;
  IWB_FLOAT_AVX2 static __m256 eight(const uint16_t* p) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
  IWB_FLOAT_AVX2 static float one(const uint16_t* p) { return _cvtsh_ss(*p); }
};
struct LoadBf16 {
  using Element = uint16_t;
  IWB_FLOAT_AVX2 static __m256 eight(const uint16_t* p) {
    const __m256i wide = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(wide, 16));
  }
  static float one(const uint16_t* p) {
    const uint32_t bits = static_cast<uint32_t>(*p) << 16;
    float f;
    std::memcpy(&f, &bits, sizeof f);
    return f;
  }
};
struct LoadF32 {
  using Element = float;
  IWB_FLOAT_AVX2 static __m256 eight(const float* p) { return _mm256_loadu_ps(p); }
  static float one(const float* p) { return *p; }
};

template <typename Load>
IWB_FLOAT_AVX2 float vec_dot_float(const void* weight, const void* activation, int64_t n) {
  const auto* w = static_cast<const typename Load::Element*>(weight);
  const auto* x = static_cast<const float*>(activation);
  // Four accumulators keep four FMAs in flight.
  __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
#pragma GCC unroll 4
    for (int k = 0; k < 4; ++k)
      acc[k] = _mm256_fmadd_ps(Load::eight(w + i + 8 * k), _mm256_loadu_ps(x + i + 8 * k), acc[k]);
  }
  for (; i + 8 <= n; i += 8) acc[0] = _mm256_fmadd_ps(Load::eight(w + i), _mm256_loadu_ps(x + i), acc[0]);
  const __m256 v = _mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3]));
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  float sum = _mm_cvtss_f32(s);
  for (; i < n; ++i) sum += Load::one(w + i) * x[i];
  return sum;
}

}  // namespace

bool select_float_dot_avx2(GgmlType type, DotKernels* out) {
  DotKernels k;
  switch (type) {
    case GgmlType::F16: k.vec_dot = vec_dot_float<LoadF16>; break;
    case GgmlType::BF16: k.vec_dot = vec_dot_float<LoadBf16>; break;
    case GgmlType::F32: k.vec_dot = vec_dot_float<LoadF32>; break;
    default: return false;
  }
  *out = k;
  return true;
}

}  // namespace iwb::detail

#else

namespace iwb::detail {
bool select_float_dot_avx2(GgmlType, DotKernels*) { return false; }
}  // namespace iwb::detail

#endif
