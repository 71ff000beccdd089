// AVX-512 dot products of F16, BF16 and F32 weight rows with f32 activations: the weights are
// widened to f32 in registers (vcvtph2ps, a 16-bit shift for BF16) and multiplied with FMA,
// 16 lanes at a time. Decode runs one row at a time; a few tokens run tiles of 4 rows x up to 4
// tokens; many tokens repack 32 rows, widened and transposed, so one FMA of a broadcast
// activation advances 16 rows (a GEMM micro-kernel: no horizontal sums). f32 throughout.
#include "quant_dot.h"

#if defined(__x86_64__) || defined(__i386__)
#include "quant_avx512_common.h"
#include "simd_math_avx512.h"

#include <algorithm>

namespace iwb::detail {
namespace {

using namespace avx512;

// 16 weights as f32 (count < 16: the rest read as zero, nothing past the row is touched).
struct LoadF16 {
  using Element = uint16_t;
  IWB_AVX512 static __m512 full(const uint16_t* p) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  }
  IWB_AVX512 static __m512 part(const uint16_t* p, __mmask16 m) {
    return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, p));
  }
};
struct LoadBf16 {
  using Element = uint16_t;
  IWB_AVX512 static __m512 widen(__m256i h) {
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  }
  IWB_AVX512 static __m512 full(const uint16_t* p) {
    return widen(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  }
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
    for (int k = 0; k < 4; ++k)
      acc[k] = _mm512_fmadd_ps(Load::full(w + i + 16 * k), _mm512_loadu_ps(x + i + 16 * k), acc[k]);
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
  for (int k = 0; k < 8; ++k)
    s[k] = _mm512_add_ps(_mm512_unpacklo_ps(v[2 * k], v[2 * k + 1]), _mm512_unpackhi_ps(v[2 * k], v[2 * k + 1]));
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
  for (int t = 0; t < 4; ++t)
    x[t] = reinterpret_cast<const float*>(activation + std::min(t, T - 1) * activation_stride);
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

// ---- many tokens: 32 packed rows ----

constexpr int kFloatGemmRows = 32;

// rows[0..31] (k0 .. k0+15, masked past n) widened and transposed: buffer[(k0 + j) * 32 + i].
template <typename Load>
IWB_AVX512 void pack_float_rows(const typename Load::Element* const* rows, int64_t n, float* buffer) {
  for (int64_t k0 = 0; k0 < n; k0 += 16) {
    const int64_t len = std::min<int64_t>(16, n - k0);
    const __mmask16 m = static_cast<__mmask16>((1u << len) - 1);
    for (int h = 0; h < 2; ++h) {
      __m512 block[16];
#pragma GCC unroll 16
      for (int i = 0; i < 16; ++i)
        block[i] = len == 16 ? Load::full(rows[16 * h + i] + k0) : Load::part(rows[16 * h + i] + k0, m);
      transpose_16x16(block);
      for (int64_t j = 0; j < len; ++j) _mm512_store_ps(buffer + (k0 + j) * kFloatGemmRows + 16 * h, block[j]);
    }
  }
}

template <int T>
IWB_AVX512 void gemm_float_tokens(const float* packed, int64_t n, const float* const* x, __m512 bias_lo, __m512 bias_hi,
                                  __mmask16 mask_lo, __mmask16 mask_hi, float* const* out) {
  __m512 lo[T], hi[T];
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t) {
    lo[t] = bias_lo;
    hi[t] = bias_hi;
  }
  for (int64_t k = 0; k < n; ++k) {
    const __m512 w0 = _mm512_load_ps(packed + k * kFloatGemmRows),
                 w1 = _mm512_load_ps(packed + k * kFloatGemmRows + 16);
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      const __m512 xb = _mm512_set1_ps(x[t][k]);
      lo[t] = _mm512_fmadd_ps(w0, xb, lo[t]);
      hi[t] = _mm512_fmadd_ps(w1, xb, hi[t]);
    }
  }
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t) {
    _mm512_mask_storeu_ps(out[t], mask_lo, lo[t]);
    _mm512_mask_storeu_ps(out[t] + 16, mask_hi, hi[t]);
  }
}

template <typename Load>
IWB_AVX512 void gemm_float(const uint8_t* weight, size_t weight_stride, int num_rows, const uint8_t* activation,
                           size_t activation_stride, int64_t num_tokens, int64_t n, const float* bias, float* out,
                           int64_t out_stride, uint8_t* buffer) {
  using E = typename Load::Element;
  const E* rows[kFloatGemmRows];
  for (int i = 0; i < kFloatGemmRows; ++i)
    rows[i] = reinterpret_cast<const E*>(weight + std::min(i, num_rows - 1) * weight_stride);
  auto* packed = reinterpret_cast<float*>(buffer);
  pack_float_rows<Load>(rows, n, packed);
  const __mmask16 mask_lo = static_cast<__mmask16>(num_rows >= 16 ? 0xFFFF : (1u << num_rows) - 1);
  const __mmask16 mask_hi = static_cast<__mmask16>(num_rows <= 16   ? 0
                                                   : num_rows >= 32 ? 0xFFFF
                                                                    : (1u << (num_rows - 16)) - 1);
  const __m512 bias_lo = bias ? _mm512_maskz_loadu_ps(mask_lo, bias) : _mm512_setzero_ps();
  const __m512 bias_hi = bias ? _mm512_maskz_loadu_ps(mask_hi, bias + 16) : _mm512_setzero_ps();
  int64_t t0 = 0;
  auto pointers = [&](int count, const float** x, float** o) {
    for (int t = 0; t < count; ++t) {
      x[t] = reinterpret_cast<const float*>(activation + (t0 + t) * activation_stride);
      o[t] = out + (t0 + t) * out_stride;
    }
  };
  for (; t0 + 8 <= num_tokens; t0 += 8) {
    const float* x[8];
    float* o[8];
    pointers(8, x, o);
    gemm_float_tokens<8>(packed, n, x, bias_lo, bias_hi, mask_lo, mask_hi, o);
  }
  for (; t0 < num_tokens; ++t0) {
    const float* x[1];
    float* o[1];
    pointers(1, x, o);
    gemm_float_tokens<1>(packed, n, x, bias_lo, bias_hi, mask_lo, mask_hi, o);
  }
}

}  // namespace

size_t float_gemm_buffer_bytes(int64_t n) {
  return static_cast<size_t>((n + 15) / 16 * 16) * kFloatGemmRows * sizeof(float);
}

bool select_float_dot_avx512(GgmlType type, DotKernels* out) {
  DotKernels k;
  switch (type) {
    case GgmlType::F16:
      k.vec_dot = vec_dot_float<LoadF16>;
      k.tile = tile_float_by_tokens<LoadF16>;
      k.gemm = gemm_float<LoadF16>;
      break;
    case GgmlType::BF16:
      k.vec_dot = vec_dot_float<LoadBf16>;
      k.tile = tile_float_by_tokens<LoadBf16>;
      k.gemm = gemm_float<LoadBf16>;
      break;
    case GgmlType::F32:
      k.vec_dot = vec_dot_float<LoadF32>;
      k.tile = tile_float_by_tokens<LoadF32>;
      k.gemm = gemm_float<LoadF32>;
      break;
    default: return false;
  }
  k.gemm_rows = kFloatGemmRows;
  // Both kernels are FMA-bound; the GEMM's gain (no horizontal sums: 105 against 94 GMAC/s per
  // core on Zen 5) pays for widening and transposing 32 rows from about 64 tokens on.
  k.gemm_min_tokens = 64;
  // AMX bf16 tiles (F16, BF16), where the CPU and the OS allow them, replace the FMA GEMM.
  if (const QuantGemmFn amx = select_float_gemm_amx(type)) {
    k.gemm = amx;
    k.gemm_rows = kFloatGemmAmxRows;
    // The activations are split into bf16 hi + lo tiles once per call, by all threads.
    k.gemm_prepare = float_gemm_amx_prepare;
    k.gemm_prepared_group_bytes = float_gemm_amx_group_bytes;
    // It fetches its rows as it packs them (float_gemm_amx.cpp); the driver's prefetch of each
    // next 128-row panel before the call (384 KiB at 1536 columns) stalled the core as it did
    // the int8 GEMMs' (default model F16, alternated: pp32 106-112 -> 122-128 tokens/s, pp128
    // 237-243 -> 242-262, pp512 even).
    k.gemm_fetches_rows = true;
    // From where the tiles beat the FMA tiles (Xeon model 167, bench_matmul_tokens with 2
    // threads, --copies 8, ms a call, 1536x8960 / 8960x1536). Since the weights are the tiles'
    // A operand (float_gemm_amx.cpp): F16 (three products per pair of splits) at 8 tokens
    // 1.50-1.57 / 1.46-1.50 against 1.72-2.04 / 1.76-1.84, even at 6, slower at 4 (1.57-1.63 /
    // 1.46-1.54 against 1.34-1.43 / 1.30-1.39); BF16 (two) at 4 tokens 1.22-1.24 / 1.25-1.29
    // against 1.27-1.40 / 1.34-1.43. (Before: F16 from 20, BF16 from 8; 32 for both before that.)
    k.gemm_min_tokens = type == GgmlType::BF16 ? 4 : 8;
  }
  *out = k;  // format None: the activations stay f32
  return true;
}

}  // namespace iwb::detail

#else

namespace iwb::detail {
size_t float_gemm_buffer_bytes(int64_t) { return 0; }
bool select_float_dot_avx512(GgmlType, DotKernels*) { return false; }
}  // namespace iwb::detail

#endif
