// AVX2 integer dot products of one quantized weight row with one 8-bit activation row, for
// CPUs without AVX-512 VNNI: vpmaddubsw (unsigned weights x signed activations, pairs summed
// to 16 bits, which the quant ranges keep from saturating) then vpmaddwd to 32 bits, with the
// K-quants' sub-block scales as vpmaddwd's second operand.
#include "quant_dot.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

#include <cstring>
#include <type_traits>

#define IWB_AVX2 __attribute__((target("avx2,fma,f16c,bmi,bmi2")))

namespace iwb::detail {
namespace {

IWB_AVX2 inline float half(uint16_t h) { return _cvtsh_ss(h); }

inline uint32_t load_u32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

IWB_AVX2 inline float hsum_ps(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

IWB_AVX2 inline __m256i loadu(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }

// Bit j of `bits` as 0x10 in byte j (the fifth bit of Q5_0/Q5_1 element j).
IWB_AVX2 inline __m256i expand_high_bits(uint32_t bits) {
  const __m256i spread = _mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int>(bits)),
                                             _mm256_setr_epi64x(0, 0x0101010101010101LL, 0x0202020202020202LL,
                                                                0x0303030303030303LL));
  const __m256i bit = _mm256_set1_epi64x(static_cast<long long>(0x8040201008040201ULL));
  return _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit), _mm256_set1_epi8(0x10));
}

// Eight 32-bit sums of u[i] * s[i] (u unsigned, products paired without saturation).
IWB_AVX2 inline __m256i dot_u8_s8(__m256i u, __m256i s) {
  return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
}

// 32-element types with nibbles: x = d * (u - offset) (+ m), u unsigned 4 or 5 bits.
template <typename Block, int kOffset, bool kHasMin, bool kHasHigh>
IWB_AVX2 float vec_dot_nibbles(const void* weight, const void* activation, int64_t n) {
  const auto* w = static_cast<const Block*>(weight);
  const auto* a = static_cast<const BlockQ8A*>(activation);
  const __m256i nibble = _mm256_set1_epi8(0x0F);
  __m256 acc = _mm256_setzero_ps();
  float offset_sum = 0.0f, min_sum = 0.0f;
  for (int64_t b = 0; b < n / kQK8_0; ++b) {
    const __m128i x = _mm_loadu_si128(reinterpret_cast<const __m128i*>(w[b].qs));
    __m256i u = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(x, 4), x), nibble);
    if constexpr (kHasHigh) u = _mm256_or_si256(u, expand_high_bits(load_u32(w[b].qh)));
    const __m256i p = dot_u8_s8(u, loadu(a[b].qs));
    const float d = half(w[b].d);
    acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_set1_ps(d * a[b].d), acc);
    if constexpr (kOffset != 0) offset_sum += d * a[b].s;
    if constexpr (kHasMin) min_sum += half(w[b].m) * a[b].s;
  }
  return hsum_ps(acc) - static_cast<float>(kOffset) * offset_sum + min_sum;
}

// Q8_0: signed x signed through the sign trick (|w| and a with w's sign).
IWB_AVX2 float vec_dot_q8_0(const void* weight, const void* activation, int64_t n) {
  const auto* w = static_cast<const BlockQ8_0*>(weight);
  const auto* a = static_cast<const BlockQ8A*>(activation);
  __m256 acc = _mm256_setzero_ps();
  for (int64_t b = 0; b < n / kQK8_0; ++b) {
    const __m256i q = loadu(w[b].qs);
    const __m256i p = dot_u8_s8(_mm256_sign_epi8(q, q), _mm256_sign_epi8(loadu(a[b].qs), q));
    acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_set1_ps(half(w[b].d) * a[b].d), acc);
  }
  return hsum_ps(acc);
}

inline void unpack_k4_scales(const uint8_t* packed, uint8_t sc[8], uint8_t m[8]) {
  uint32_t s[3];
  std::memcpy(s, packed, sizeof s);
  const uint32_t words[4] = {s[0] & 0x3f3f3f3fu, (s[2] & 0x0f0f0f0fu) | (((s[0] >> 6) & 0x03030303u) << 4),
                             s[1] & 0x3f3f3f3fu, ((s[2] >> 4) & 0x0f0f0f0fu) | (((s[1] >> 6) & 0x03030303u) << 4)};
  std::memcpy(sc, words, 8);
  std::memcpy(m, words + 2, 8);
}

template <typename Block>
IWB_AVX2 float vec_dot_k4(const void* weight, const void* activation, int64_t n) {
  constexpr bool kHasHigh = std::is_same_v<Block, BlockQ5_K>;
  const auto* w = static_cast<const Block*>(weight);
  const auto* a = static_cast<const BlockQ8_K*>(activation);
  const __m256i nibble = _mm256_set1_epi8(0x0F);
  __m256 acc = _mm256_setzero_ps(), acc_min = _mm256_setzero_ps();
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    uint8_t sc[8], m[8];
    unpack_k4_scales(w[b].scales, sc, m);
    uint64_t m64;
    std::memcpy(&m64, m, 8);
    const __m128i m8 = _mm_cvtsi64_si128(static_cast<long long>(m64));
    const __m256i min_prod = _mm256_madd_epi16(_mm256_cvtepu8_epi16(_mm_unpacklo_epi8(m8, m8)), loadu(a[b].bsums));
    acc_min = _mm256_fmadd_ps(_mm256_cvtepi32_ps(min_prod), _mm256_set1_ps(half(w[b].dmin) * a[b].d), acc_min);
    __m256i high;
    if constexpr (kHasHigh) high = loadu(w[b].qh);
    __m256i sumi = _mm256_setzero_si256();
    #pragma GCC unroll 16
    for (int c = 0; c < 4; ++c) {
      const __m256i x = loadu(w[b].qs + 32 * c);
      __m256i lo = _mm256_and_si256(x, nibble), hi = _mm256_and_si256(_mm256_srli_epi16(x, 4), nibble);
      if constexpr (kHasHigh) {
        const __m256i bit_lo = _mm256_set1_epi8(static_cast<char>(1 << (2 * c)));
        const __m256i bit_hi = _mm256_set1_epi8(static_cast<char>(1 << (2 * c + 1)));
        const __m256i v16 = _mm256_set1_epi8(0x10);
        lo = _mm256_or_si256(lo, _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(high, bit_lo), bit_lo), v16));
        hi = _mm256_or_si256(hi, _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(high, bit_hi), bit_hi), v16));
      }
      const __m256i p_lo = _mm256_maddubs_epi16(lo, loadu(a[b].qs + 64 * c));
      const __m256i p_hi = _mm256_maddubs_epi16(hi, loadu(a[b].qs + 64 * c + 32));
      sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(p_lo, _mm256_set1_epi16(sc[2 * c])));
      sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(p_hi, _mm256_set1_epi16(sc[2 * c + 1])));
    }
    acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sumi), _mm256_set1_ps(half(w[b].d) * a[b].d), acc);
  }
  return hsum_ps(_mm256_sub_ps(acc, acc_min));
}

IWB_AVX2 float vec_dot_q6_k(const void* weight, const void* activation, int64_t n) {
  const auto* w = static_cast<const BlockQ6_K*>(weight);
  const auto* a = static_cast<const BlockQ8_K*>(activation);
  const __m256i nibble = _mm256_set1_epi8(0x0F), top = _mm256_set1_epi8(0x30);
  __m256 acc = _mm256_setzero_ps();
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w[b].scales)));
    // The stored quants are q + 32; sum(scale * 32 * a) comes off through the bsums.
    __m256i sumi = _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(_mm256_madd_epi16(sc16, loadu(a[b].bsums)), 5));
    #pragma GCC unroll 16
    for (int h = 0; h < 2; ++h) {
      const __m256i ql_a = loadu(w[b].ql + 64 * h), ql_c = loadu(w[b].ql + 64 * h + 32);
      const __m256i qh = loadu(w[b].qh + 32 * h);
      const __m256i runs[4] = {
          _mm256_or_si256(_mm256_and_si256(ql_a, nibble), _mm256_and_si256(_mm256_slli_epi16(qh, 4), top)),
          _mm256_or_si256(_mm256_and_si256(ql_c, nibble), _mm256_and_si256(_mm256_slli_epi16(qh, 2), top)),
          _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql_a, 4), nibble), _mm256_and_si256(qh, top)),
          _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql_c, 4), nibble), _mm256_and_si256(_mm256_srli_epi16(qh, 2), top)),
      };
      #pragma GCC unroll 16
      for (int r = 0; r < 4; ++r) {
        const int g = 8 * h + 2 * r;  // scales of elements 0..15 and 16..31 of this run
        const __m256i scale = _mm256_set_m128i(_mm_set1_epi16(w[b].scales[g + 1]), _mm_set1_epi16(w[b].scales[g]));
        const __m256i p = _mm256_maddubs_epi16(runs[r], loadu(a[b].qs + 128 * h + 32 * r));
        sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(p, scale));
      }
    }
    acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sumi), _mm256_set1_ps(half(w[b].d) * a[b].d), acc);
  }
  return hsum_ps(acc);
}

}  // namespace

bool select_quant_dot_avx2(GgmlType type, DotKernels* out) {
  DotKernels k;
  switch (type) {
    case GgmlType::Q4_0: k.vec_dot = vec_dot_nibbles<BlockQ4_0, 8, false, false>; break;
    case GgmlType::Q4_1: k.vec_dot = vec_dot_nibbles<BlockQ4_1, 0, true, false>; break;
    case GgmlType::Q5_0: k.vec_dot = vec_dot_nibbles<BlockQ5_0, 16, false, true>; break;
    case GgmlType::Q5_1: k.vec_dot = vec_dot_nibbles<BlockQ5_1, 0, true, true>; break;
    case GgmlType::Q8_0: k.vec_dot = vec_dot_q8_0; break;
    case GgmlType::Q4_K: k.vec_dot = vec_dot_k4<BlockQ4_K>; break;
    case GgmlType::Q5_K: k.vec_dot = vec_dot_k4<BlockQ5_K>; break;
    case GgmlType::Q6_K: k.vec_dot = vec_dot_q6_k; break;
    default: return false;
  }
  k.format = activation_format(type);
  k.quantize = select_activation_quantizer(k.format, CpuPath::Avx2);
  *out = k;
  return true;
}

}  // namespace iwb::detail

#else

namespace iwb::detail {
bool select_quant_dot_avx2(GgmlType, DotKernels*) { return false; }
}  // namespace iwb::detail

#endif
