// AVX2 dequantization of the block types models mostly ship in. Same arithmetic as the
// reference loops (dequantize_legacy.cpp, dequantize_kquants.cpp), eight lanes at a time.
#include "dequantize_avx2.h"

#include "iwb/kernels/dequantize.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

#include <cstring>

#define IWB_AVX2 __attribute__((target("avx2,fma,f16c")))

namespace iwb::detail {
namespace {

// Eight unsigned bytes (the low 8 of v) as floats.
IWB_AVX2 inline __m256 u8x8_to_ps(__m128i v) { return _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(v)); }

// Writes scale * q - offset for the 32 unsigned bytes of q (dst[0..31]).
IWB_AVX2 inline void store_affine_32(__m256i q, float scale, float offset, float* dst) {
  const __m256 s = _mm256_set1_ps(scale), o = _mm256_set1_ps(-offset);
  const __m128i lo = _mm256_castsi256_si128(q), hi = _mm256_extracti128_si256(q, 1);
  _mm256_storeu_ps(dst + 0, _mm256_fmadd_ps(u8x8_to_ps(lo), s, o));
  _mm256_storeu_ps(dst + 8, _mm256_fmadd_ps(u8x8_to_ps(_mm_srli_si128(lo, 8)), s, o));
  _mm256_storeu_ps(dst + 16, _mm256_fmadd_ps(u8x8_to_ps(hi), s, o));
  _mm256_storeu_ps(dst + 24, _mm256_fmadd_ps(u8x8_to_ps(_mm_srli_si128(hi, 8)), s, o));
}

IWB_AVX2 inline float half(uint16_t h) { return _cvtsh_ss(h); }

}  // namespace

IWB_AVX2 void dequantize_f16_avx2(const uint16_t* src, float* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i))));
  }
  for (; i < n; ++i) dst[i] = half(src[i]);
}

IWB_AVX2 void dequantize_bf16_avx2(const uint16_t* src, float* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i)));
    _mm256_storeu_ps(dst + i, _mm256_castsi256_ps(_mm256_slli_epi32(w, 16)));
  }
  for (; i < n; ++i) dst[i] = bf16_to_f32(src[i]);
}

IWB_AVX2 void dequantize_q4_0_avx2(const BlockQ4_0* src, float* dst, int64_t num_blocks) {
  const __m128i mask = _mm_set1_epi8(0x0F);
  for (int64_t b = 0; b < num_blocks; ++b) {
    const float d = half(src[b].d);
    const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src[b].qs));
    const __m256i both = _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(q, 4), mask), _mm_and_si128(q, mask));
    store_affine_32(both, d, 8.0f * d, dst + b * kQK4_0);  // d * (q - 8)
  }
}

IWB_AVX2 void dequantize_q5_0_avx2(const BlockQ5_0* src, float* dst, int64_t num_blocks) {
  const __m128i mask = _mm_set1_epi8(0x0F);
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  const __m256i one = _mm256_set1_epi32(1);
  for (int64_t b = 0; b < num_blocks; ++b) {
    const BlockQ5_0& block = src[b];
    const __m256 d = _mm256_set1_ps(half(block.d));
    const __m256 bias = _mm256_set1_ps(-16.0f * half(block.d));
    uint32_t qh;
    std::memcpy(&qh, block.qh, sizeof qh);
    const __m256i qh_v = _mm256_set1_epi32(static_cast<int>(qh));
    const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(block.qs));
    const __m128i lo = _mm_and_si128(q, mask), hi = _mm_and_si128(_mm_srli_epi16(q, 4), mask);
    const __m128i groups[4] = {lo, _mm_srli_si128(lo, 8), hi, _mm_srli_si128(hi, 8)};
    float* out = dst + b * kQK5_0;
    for (int g = 0; g < 4; ++g) {
      // Bit (8g + lane) of qh is the fifth bit of element 8g + lane.
      const __m256i shift = _mm256_add_epi32(lane, _mm256_set1_epi32(8 * g));
      const __m256i high = _mm256_slli_epi32(_mm256_and_si256(_mm256_srlv_epi32(qh_v, shift), one), 4);
      const __m256i qi = _mm256_or_si256(_mm256_cvtepu8_epi32(groups[g]), high);
      _mm256_storeu_ps(out + 8 * g, _mm256_fmadd_ps(_mm256_cvtepi32_ps(qi), d, bias));
    }
  }
}

IWB_AVX2 void dequantize_q8_0_avx2(const BlockQ8_0* src, float* dst, int64_t num_blocks) {
  for (int64_t b = 0; b < num_blocks; ++b) {
    const __m256 d = _mm256_set1_ps(half(src[b].d));
    const int8_t* qs = src[b].qs;
    float* out = dst + b * kQK8_0;
    for (int g = 0; g < 4; ++g) {
      const __m128i q = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(qs + 8 * g));
      _mm256_storeu_ps(out + 8 * g, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q)), d));
    }
  }
}

IWB_AVX2 void dequantize_q4_k_avx2(const BlockQ4_K* src, float* dst, int64_t num_blocks) {
  const __m256i mask = _mm256_set1_epi8(0x0F);
  for (int64_t b = 0; b < num_blocks; ++b) {
    const BlockQ4_K& block = src[b];
    const float d = half(block.d), dmin = half(block.dmin);
    float* out = dst + b * kQK_K;
    for (int chunk = 0; chunk < 4; ++chunk) {
      uint8_t sc_lo, m_lo, sc_hi, m_hi;
      unpack_scale_min_k4(2 * chunk, block.scales, &sc_lo, &m_lo);
      unpack_scale_min_k4(2 * chunk + 1, block.scales, &sc_hi, &m_hi);
      const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(block.qs + chunk * 32));
      store_affine_32(_mm256_and_si256(q, mask), d * sc_lo, dmin * m_lo, out + chunk * 64);
      store_affine_32(_mm256_and_si256(_mm256_srli_epi16(q, 4), mask), d * sc_hi, dmin * m_hi, out + chunk * 64 + 32);
    }
  }
}

IWB_AVX2 void dequantize_q6_k_avx2(const BlockQ6_K* src, float* dst, int64_t num_blocks) {
  const __m256i m4 = _mm256_set1_epi8(0x0F), m_hi = _mm256_set1_epi8(0x30);
  for (int64_t b = 0; b < num_blocks; ++b) {
    const BlockQ6_K& block = src[b];
    const float d = half(block.d);
    for (int h = 0; h < 2; ++h) {
      const uint8_t* ql = block.ql + h * 64;
      const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ql));
      const __m256i c = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ql + 32));
      const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(block.qh + h * 32));
      // The four 32-element runs of this half: 6-bit quants as bytes 0..63. The 16-bit shifts
      // move bits across byte boundaries only where the masks then clear them.
      const __m256i q[4] = {
          _mm256_or_si256(_mm256_and_si256(a, m4), _mm256_and_si256(_mm256_slli_epi16(qh, 4), m_hi)),
          _mm256_or_si256(_mm256_and_si256(c, m4), _mm256_and_si256(_mm256_slli_epi16(qh, 2), m_hi)),
          _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(a, 4), m4), _mm256_and_si256(qh, m_hi)),
          _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(c, 4), m4), _mm256_and_si256(_mm256_srli_epi16(qh, 2), m_hi)),
      };
      const int8_t* sc = block.scales + h * 8;
      float* y = dst + b * kQK_K + h * 128;
      for (int run = 0; run < 4; ++run) {
        // Elements 0..15 of a run use scale sc[2*run], 16..31 use sc[2*run + 1].
        const float s0 = d * sc[2 * run], s1 = d * sc[2 * run + 1];
        const __m128i lo = _mm256_castsi256_si128(q[run]), hi = _mm256_extracti128_si256(q[run], 1);
        float* o = y + run * 32;
        const __m256 v0 = _mm256_set1_ps(s0), b0 = _mm256_set1_ps(-32.0f * s0);
        const __m256 v1 = _mm256_set1_ps(s1), b1 = _mm256_set1_ps(-32.0f * s1);
        _mm256_storeu_ps(o + 0, _mm256_fmadd_ps(u8x8_to_ps(lo), v0, b0));
        _mm256_storeu_ps(o + 8, _mm256_fmadd_ps(u8x8_to_ps(_mm_srli_si128(lo, 8)), v0, b0));
        _mm256_storeu_ps(o + 16, _mm256_fmadd_ps(u8x8_to_ps(hi), v1, b1));
        _mm256_storeu_ps(o + 24, _mm256_fmadd_ps(u8x8_to_ps(_mm_srli_si128(hi, 8)), v1, b1));
      }
    }
  }
}

}  // namespace iwb::detail

#endif
