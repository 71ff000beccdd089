// AVX-512 and AVX2 quantizers of the activation rows the integer dot products consume: the
// f32 Q8_1 blocks (BlockQ8A) and Q8_K. Same rounding as the reference quantizers (half away
// from zero for Q8_1, half to even for Q8_K), so the quantized rows match them exactly.
#include "quant_dot.h"

#include <cmath>
#include <cstring>

#if defined(__x86_64__) || defined(__i386__)
// GCC 12 reports its own AVX-512 intrinsics as reading uninitialized values (bug 105593).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>
#define IWB_X86 1
#define IWB_AVX2 __attribute__((target("avx2,fma,f16c")))
#define IWB_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c")))
#endif

namespace iwb::detail {
namespace {

// 1 / d as the references compute it: 0 for an all-zero block or one whose d underflows.
float inverse_scale(float d) {
  float id = d != 0.0f ? 1.0f / d : 0.0f;
  return std::isfinite(id) ? id : 0.0f;
}

#ifdef IWB_X86

// ---- AVX-512 ----

// std::round for floats whose magnitude is below 2^23: truncate, then step away from zero
// when the dropped fraction is at least one half.
IWB_AVX512 inline __m512 round_half_away_512(__m512 v) {
  const __m512 t = _mm512_roundscale_ps(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
  const __mmask16 up = _mm512_cmp_ps_mask(_mm512_abs_ps(_mm512_sub_ps(v, t)), _mm512_set1_ps(0.5f), _CMP_GE_OQ);
  const __m512 one = _mm512_or_ps(_mm512_and_ps(v, _mm512_set1_ps(-0.0f)), _mm512_set1_ps(1.0f));
  return _mm512_mask_add_ps(t, up, t, one);
}

IWB_AVX512 void quantize_q8a_avx512(const float* x, void* dst, int64_t n) {
  auto* y = static_cast<BlockQ8A*>(dst);
  for (int64_t b = 0; b < n / kQK8_0; ++b, x += kQK8_0) {
    const __m512 v0 = _mm512_loadu_ps(x), v1 = _mm512_loadu_ps(x + 16);
    const float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(v0), _mm512_abs_ps(v1)));
    const float d = amax / 127.0f;
    const __m512 id = _mm512_set1_ps(inverse_scale(d));
    const __m512i q0 = _mm512_cvttps_epi32(round_half_away_512(_mm512_mul_ps(v0, id)));
    const __m512i q1 = _mm512_cvttps_epi32(round_half_away_512(_mm512_mul_ps(v1, id)));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(y[b].qs), _mm512_cvtepi32_epi8(q0));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(y[b].qs + 16), _mm512_cvtepi32_epi8(q1));
    y[b].d = d;
    y[b].s = d * static_cast<float>(_mm512_reduce_add_epi32(_mm512_add_epi32(q0, q1)));
  }
}

IWB_AVX512 void quantize_q8k_avx512(const float* x, void* dst, int64_t n) {
  auto* y = static_cast<BlockQ8_K*>(dst);
  for (int64_t b = 0; b < n / kQK_K; ++b, x += kQK_K) {
    __m512 vmax = _mm512_setzero_ps();
    for (int k = 0; k < 16; ++k) vmax = _mm512_max_ps(vmax, _mm512_abs_ps(_mm512_loadu_ps(x + 16 * k)));
    const float amax = _mm512_reduce_max_ps(vmax);
    if (amax == 0.0f) {
      std::memset(&y[b], 0, sizeof(y[b]));
      continue;
    }
    // The reference keeps the sign of the first element of largest magnitude.
    float max = amax;
    for (int k = 0; k < 16; ++k) {
      const __mmask16 hit =
          _mm512_cmp_ps_mask(_mm512_abs_ps(_mm512_loadu_ps(x + 16 * k)), _mm512_set1_ps(amax), _CMP_EQ_OQ);
      if (hit != 0) {
        max = x[16 * k + __builtin_ctz(hit)];
        break;
      }
    }
    const float iscale = -127.0f / max;
    const __m512 vs = _mm512_set1_ps(iscale);
    // Four 16-element pieces at a time, as one vector of bytes: stored once, and their sums
    // taken from the register (q + 128, -127..127 -> 1..255, as unsigned bytes summed 8 at a
    // time by vpsadbw) instead of a horizontal reduction per 16 elements. Four 16-byte stores
    // read back as one vector would stall on store forwarding.
    alignas(64) uint64_t sums[32];
    for (int j = 0; j < 4; ++j) {
      __m128i piece[4];
      for (int i = 0; i < 4; ++i) {
        // cvtps rounds half to even, as nearest_int does.
        const __m512i q = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(x + 64 * j + 16 * i), vs));
        piece[i] = _mm512_cvtepi32_epi8(_mm512_min_epi32(q, _mm512_set1_epi32(127)));
      }
      __m512i bytes = _mm512_castsi128_si512(piece[0]);
      bytes = _mm512_inserti32x4(bytes, piece[1], 1);
      bytes = _mm512_inserti32x4(bytes, piece[2], 2);
      bytes = _mm512_inserti32x4(bytes, piece[3], 3);
      _mm512_storeu_si512(y[b].qs + 64 * j, bytes);
      const __m512i biased = _mm512_xor_si512(bytes, _mm512_set1_epi8(static_cast<char>(0x80)));
      _mm512_store_si512(sums + 8 * j, _mm512_sad_epu8(biased, _mm512_setzero_si512()));
    }
    for (int k = 0; k < 16; ++k) {
      y[b].bsums[k] = static_cast<int16_t>(static_cast<int>(sums[2 * k] + sums[2 * k + 1]) - 16 * 128);
    }
    y[b].d = 1.0f / iscale;
  }
}

// ---- AVX2 ----

IWB_AVX2 inline __m256 round_half_away_256(__m256 v) {
  const __m256 sign = _mm256_set1_ps(-0.0f);
  const __m256 t = _mm256_round_ps(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
  const __m256 frac = _mm256_andnot_ps(sign, _mm256_sub_ps(v, t));
  const __m256 up = _mm256_cmp_ps(frac, _mm256_set1_ps(0.5f), _CMP_GE_OQ);
  const __m256 one = _mm256_or_ps(_mm256_and_ps(v, sign), _mm256_set1_ps(1.0f));
  return _mm256_add_ps(t, _mm256_and_ps(up, one));
}

IWB_AVX2 inline int hsum_epi32_256(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(1, 0, 3, 2)));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(2, 3, 0, 1)));
  return _mm_cvtsi128_si32(s);
}

IWB_AVX2 inline float hmax_ps_256(__m256 v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_movehdup_ps(m));
  return _mm_cvtss_f32(m);
}

// 16 int32 (two vectors, each -128..127) as 16 bytes in order.
IWB_AVX2 inline __m128i pack_16_epi8(__m256i a, __m256i b) {
  const __m256i words = _mm256_permute4x64_epi64(_mm256_packs_epi32(a, b), _MM_SHUFFLE(3, 1, 2, 0));
  return _mm_packs_epi16(_mm256_castsi256_si128(words), _mm256_extracti128_si256(words, 1));
}

IWB_AVX2 void quantize_q8a_avx2(const float* x, void* dst, int64_t n) {
  auto* y = static_cast<BlockQ8A*>(dst);
  const __m256 sign = _mm256_set1_ps(-0.0f);
  for (int64_t b = 0; b < n / kQK8_0; ++b, x += kQK8_0) {
    __m256 v[4];
    __m256 vmax = _mm256_setzero_ps();
    for (int k = 0; k < 4; ++k) {
      v[k] = _mm256_loadu_ps(x + 8 * k);
      vmax = _mm256_max_ps(vmax, _mm256_andnot_ps(sign, v[k]));
    }
    const float d = hmax_ps_256(vmax) / 127.0f;
    const __m256 id = _mm256_set1_ps(inverse_scale(d));
    __m256i q[4];
    for (int k = 0; k < 4; ++k) q[k] = _mm256_cvttps_epi32(round_half_away_256(_mm256_mul_ps(v[k], id)));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(y[b].qs), pack_16_epi8(q[0], q[1]));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(y[b].qs + 16), pack_16_epi8(q[2], q[3]));
    const int sum = hsum_epi32_256(_mm256_add_epi32(_mm256_add_epi32(q[0], q[1]), _mm256_add_epi32(q[2], q[3])));
    y[b].d = d;
    y[b].s = d * static_cast<float>(sum);
  }
}

IWB_AVX2 void quantize_q8k_avx2(const float* x, void* dst, int64_t n) {
  auto* y = static_cast<BlockQ8_K*>(dst);
  const __m256 sign = _mm256_set1_ps(-0.0f);
  for (int64_t b = 0; b < n / kQK_K; ++b, x += kQK_K) {
    __m256 vmax = _mm256_setzero_ps();
    for (int k = 0; k < 32; ++k) vmax = _mm256_max_ps(vmax, _mm256_andnot_ps(sign, _mm256_loadu_ps(x + 8 * k)));
    const float amax = hmax_ps_256(vmax);
    if (amax == 0.0f) {
      std::memset(&y[b], 0, sizeof(y[b]));
      continue;
    }
    float max = amax;
    for (int j = 0; j < kQK_K; ++j) {
      if (std::fabs(x[j]) == amax) {
        max = x[j];
        break;
      }
    }
    const float iscale = -127.0f / max;
    const __m256 vs = _mm256_set1_ps(iscale);
    const __m256i top = _mm256_set1_epi32(127);
    for (int k = 0; k < 16; ++k) {
      const __m256i q0 = _mm256_min_epi32(_mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + 16 * k), vs)), top);
      const __m256i q1 = _mm256_min_epi32(_mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + 16 * k + 8), vs)), top);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(y[b].qs + 16 * k), pack_16_epi8(q0, q1));
      y[b].bsums[k] = static_cast<int16_t>(hsum_epi32_256(_mm256_add_epi32(q0, q1)));
    }
    y[b].d = 1.0f / iscale;
  }
}

#endif  // IWB_X86

}  // namespace

QuantizeActivationFn select_activation_quantizer(ActivationFormat format, CpuPath path) {
  const bool is_q8k = format == ActivationFormat::Q8_K;
  if (format == ActivationFormat::None) return nullptr;
#ifdef IWB_X86
  if (path == CpuPath::Avx512) return is_q8k ? quantize_q8k_avx512 : quantize_q8a_avx512;
  if (path == CpuPath::Avx2 || path == CpuPath::AvxVnni) return is_q8k ? quantize_q8k_avx2 : quantize_q8a_avx2;
#endif
  return is_q8k ? quantize_q8k_portable : quantize_q8a_portable;
}

}  // namespace iwb::detail
