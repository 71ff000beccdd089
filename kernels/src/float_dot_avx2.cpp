// AVX2 dot products of F16, BF16 and F32 weight rows with f32 activations, for CPUs without
// AVX-512: the weights widened to f32 in registers (vcvtph2ps, a 16-bit shift for BF16) and
// multiplied with FMA, 8 lanes at a time. Decode and a few tokens dot one row at a time (in
// matmul_driver.cpp's prefetched streams); from 5 tokens a GEMM repacks 16 rows, widened and
// transposed, so one FMA of a broadcast activation advances 8 rows (no horizontal sums).
// Without them decode took the dequantizing path too, which widens each 4-row tile into a
// buffer first: F16 decode of the default model reached 37% of the read-only bandwidth on a
// Zen 3 (4.1 tokens/s against llama.cpp's 9.6).
#include "quant_dot.h"
#include "quant_unpack_common.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

#include <algorithm>
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

// ---- many tokens: a GEMM on panels of kFloatGemmAvx2Rows rows ----

// The panel: for each input element k, the 16 rows' weights as f32 (two vectors), widened and
// transposed once per call, so one FMA of a broadcast activation advances 8 rows.
template <typename Load>
IWB_FLOAT_AVX2 void pack_float_rows(const uint8_t* weight, size_t stride, int num_rows, int64_t n, float* buffer) {
  using E = typename Load::Element;
  const E* rows[kFloatGemmAvx2Rows];
  for (int i = 0; i < kFloatGemmAvx2Rows; ++i)
    rows[i] = reinterpret_cast<const E*>(weight + std::min(i, num_rows - 1) * stride);
  int64_t k = 0;
  for (; k + 8 <= n; k += 8) {
    for (int h = 0; h < 2; ++h) {
      __m256i r[8];
#pragma GCC unroll 8
      for (int i = 0; i < 8; ++i) r[i] = _mm256_castps_si256(Load::eight(rows[8 * h + i] + k));
      transpose_dwords(r);
#pragma GCC unroll 8
      for (int e = 0; e < 8; ++e)
        _mm256_store_si256(reinterpret_cast<__m256i*>(buffer + (k + e) * kFloatGemmAvx2Rows + 8 * h), r[e]);
    }
  }
  for (; k < n; ++k) {
    for (int i = 0; i < kFloatGemmAvx2Rows; ++i) buffer[k * kFloatGemmAvx2Rows + i] = Load::one(rows[i] + k);
  }
}

// acc[2t], acc[2t + 1] (lane i = row i, 8 + i) += dot(rows, token t) for T tokens: 2T
// independent FMA chains (12 for 6 tokens, enough for FMA's latency at two per cycle).
template <int T>
IWB_FLOAT_AVX2 void float_tokens(const float* packed, int64_t n, const float* const* x, __m256* acc) {
  for (int64_t k = 0; k < n; ++k) {
    const __m256 w0 = _mm256_load_ps(packed + k * kFloatGemmAvx2Rows);
    const __m256 w1 = _mm256_load_ps(packed + k * kFloatGemmAvx2Rows + 8);
#pragma GCC unroll 6
    for (int t = 0; t < T; ++t) {
      const __m256 xv = _mm256_broadcast_ss(x[t] + k);
      acc[2 * t] = _mm256_fmadd_ps(w0, xv, acc[2 * t]);
      acc[2 * t + 1] = _mm256_fmadd_ps(w1, xv, acc[2 * t + 1]);
    }
  }
}

template <int T>
IWB_FLOAT_AVX2 void float_group(const float* packed, int64_t n, const uint8_t* activation, size_t activation_stride,
                                int64_t t0, const float* bias, int num_rows, float* out, int64_t out_stride) {
  alignas(32) float lanes[kFloatGemmAvx2Rows] = {};
  if (bias != nullptr) std::copy(bias, bias + num_rows, lanes);
  const float* x[T];
  __m256 acc[2 * T];
#pragma GCC unroll 6
  for (int t = 0; t < T; ++t) {
    x[t] = reinterpret_cast<const float*>(activation + (t0 + t) * activation_stride);
    acc[2 * t] = _mm256_load_ps(lanes);
    acc[2 * t + 1] = _mm256_load_ps(lanes + 8);
  }
  float_tokens<T>(packed, n, x, acc);
  // Unrolled, so acc stays in registers (a loop indexing it would keep it in memory, and the
  // k loop would store all 12 accumulators every step: 33 against 59 GOP/s on Zen 3).
#pragma GCC unroll 6
  for (int t = 0; t < T; ++t) {
    float* y = out + (t0 + t) * out_stride;
    if (num_rows == kFloatGemmAvx2Rows) {
      _mm256_storeu_ps(y, acc[2 * t]);
      _mm256_storeu_ps(y + 8, acc[2 * t + 1]);
    } else {
      _mm256_store_ps(lanes, acc[2 * t]);
      _mm256_store_ps(lanes + 8, acc[2 * t + 1]);
      std::copy(lanes, lanes + num_rows, y);
    }
  }
}

template <typename Load>
IWB_FLOAT_AVX2 void gemm_float(const uint8_t* weight, size_t weight_stride, int num_rows, const uint8_t* activation,
                               size_t activation_stride, int64_t num_tokens, int64_t n, const float* bias, float* out,
                               int64_t out_stride, uint8_t* buffer) {
  auto* packed = reinterpret_cast<float*>(buffer);
  pack_float_rows<Load>(weight, weight_stride, num_rows, n, packed);
  constexpr int kGroup = 6;
  int64_t t0 = 0;
  for (; t0 + kGroup <= num_tokens; t0 += kGroup) {
    float_group<kGroup>(packed, n, activation, activation_stride, t0, bias, num_rows, out, out_stride);
  }
  // The last 1-5 tokens in one group of their own: one at a time, each ran two FMA chains
  // against the four cycles of FMA latency, a quarter of the rate (a 5-token call, the
  // smallest GEMM, took five such passes over the panel). Every token's sums are added in the
  // same order in any group, so its result does not depend on the group it fell in.
  switch (num_tokens - t0) {
    case 5: float_group<5>(packed, n, activation, activation_stride, t0, bias, num_rows, out, out_stride); break;
    case 4: float_group<4>(packed, n, activation, activation_stride, t0, bias, num_rows, out, out_stride); break;
    case 3: float_group<3>(packed, n, activation, activation_stride, t0, bias, num_rows, out, out_stride); break;
    case 2: float_group<2>(packed, n, activation, activation_stride, t0, bias, num_rows, out, out_stride); break;
    case 1: float_group<1>(packed, n, activation, activation_stride, t0, bias, num_rows, out, out_stride); break;
    default: break;
  }
}

}  // namespace

size_t float_gemm_avx2_buffer_bytes(int64_t n) { return static_cast<size_t>(n) * kFloatGemmAvx2Rows * sizeof(float); }

bool select_float_dot_avx2(GgmlType type, DotKernels* out) {
  DotKernels k;
  switch (type) {
    case GgmlType::F16:
      k.vec_dot = vec_dot_float<LoadF16>;
      k.gemm = gemm_float<LoadF16>;
      break;
    case GgmlType::BF16:
      k.vec_dot = vec_dot_float<LoadBf16>;
      k.gemm = gemm_float<LoadBf16>;
      break;
    case GgmlType::F32:
      k.vec_dot = vec_dot_float<LoadF32>;
      k.gemm = gemm_float<LoadF32>;
      break;
    default: return false;
  }
  k.gemm_rows = kFloatGemmAvx2Rows;
  // From the token count at which the row dots would hand over to the dequantizing path
  // (matmul_driver.cpp's kMaxRowDotTokens), as the quantized types' AVX2 GEMM.
  k.gemm_min_tokens = 5;
  *out = k;
  return true;
}

}  // namespace iwb::detail

#else

namespace iwb::detail {
size_t float_gemm_avx2_buffer_bytes(int64_t) { return 0; }
bool select_float_dot_avx2(GgmlType, DotKernels*) { return false; }
}  // namespace iwb::detail

#endif
