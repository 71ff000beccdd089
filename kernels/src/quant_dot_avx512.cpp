// AVX-512 VNNI integer dot products of one quantized weight row with one 8-bit activation row
// (decode's matrix-vector products). Weights are unpacked to unsigned bytes in registers and
// multiplied with vpdpbusd (32-element types) or vpmaddubsw + vpdpwssd (K-quants, whose
// sub-block scales ride in the 16-bit multiply), so an integer sum per block is exact and
// each block costs one float multiply-add.
#include "quant_dot.h"

#if defined(__x86_64__) || defined(__i386__)
#include "quant_avx512_common.h"

#include <array>
#include <cstddef>

namespace iwb::detail {
namespace {

using namespace avx512;

// The float factors of four consecutive blocks, computed in one go: lanes 0-3 d_w * d_a (the
// scales of the integer sums), 4-7 d_w * s_a (times the offset), 8-11 m_w * s_a (the "+ m"
// of Q4_1/Q5_1). Building them block by block in scalar registers (an fp16 conversion, a
// multiply and a broadcast each) was what limited the kernel (Zen 5, one thread,
// bench_matmul_tokens, Q4_0 1536 x 8960 in L3: 0.36 -> 0.27 ms; Q8_0 0.43 -> 0.28 ms).
template <typename Block>
struct QuadFactors {
  static constexpr int kStride = sizeof(Block);
  // Second source of the fp16 gather: bytes 64..127, or the last 64 bytes of the four blocks
  // when they are shorter (never a read past them).
  static constexpr int kHighBase = 4 * kStride - 64 < 64 ? 4 * kStride - 64 : 64;
  static constexpr short word(int byte) {
    return static_cast<short>(byte < 64 ? byte / 2 : 32 + (byte - kHighBase) / 2);
  }
  static constexpr short d(int k) { return word(k * kStride); }
  static constexpr short m(int k) { return Legacy<Block>::kHasMin ? word(k * kStride + 2) : 0; }
};

template <typename Block>
IWB_AVX512 inline __m512 quad_weight_side(const Block* w) {
  using Q = QuadFactors<Block>;
  static_assert(Q::kHighBase >= 0 && Q::kHighBase % 2 == 0);
  const __m512i halves_index =
      _mm512_castsi256_si512(_mm256_setr_epi16(Q::d(0), Q::d(1), Q::d(2), Q::d(3), Q::d(0), Q::d(1), Q::d(2), Q::d(3),
                                               Q::m(0), Q::m(1), Q::m(2), Q::m(3), 0, 0, 0, 0));
  const auto* bytes = reinterpret_cast<const uint8_t*>(w);
  const __m512i halves =
      _mm512_permutex2var_epi16(_mm512_loadu_si512(bytes), halves_index, _mm512_loadu_si512(bytes + Q::kHighBase));
  return _mm512_cvtph_ps(_mm512_castsi512_si256(halves));
}

IWB_AVX512 inline __m512 quad_activation_side(const BlockQ8A* a) {
  // BlockQ8A is 10 floats: d at 10k, s at 10k + 1.
  return _mm512_permutex2var_ps(_mm512_loadu_ps(&a[0].d),
                                _mm512_setr_epi32(0, 10, 20, 30, 1, 11, 21, 31, 1, 11, 21, 31, 0, 0, 0, 0),
                                _mm512_loadu_ps(&a[0].d + 16));
}

template <typename Block>
IWB_AVX512 inline __m512 quad_factors(const Block* w, const BlockQ8A* a) {
  return _mm512_mul_ps(quad_weight_side(w), quad_activation_side(a));
}

// The integer sums of blocks 0 and 1 (as floats, 16 lanes each) times their scales.
// The pair's integer sums from weights already unpacked (two tokens share the unpacking).
IWB_AVX512 inline __m512 legacy_pair_unpacked(__m512i weights, const BlockQ8A* a, __m512 scale, __m512 acc) {
  const __m512i aq =
      _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(a[0].qs))),
                         _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a[1].qs)), 1);
  const __m512i p = _mm512_dpbusd_epi32(_mm512_setzero_si512(), weights, aq);
  return _mm512_fmadd_ps(_mm512_cvtepi32_ps(p), scale, acc);
}

template <typename Block>
IWB_AVX512 inline __m512 legacy_pair(const Block* w, const BlockQ8A* a, __m512 scale, __m512 acc) {
  return legacy_pair_unpacked(unpack_two(w), a, scale, acc);
}

// The end of both four-block kernels: the summed factors applied, and the one to three blocks
// the four-block loop left (from block b) one at a time.
template <typename Block>
IWB_AVX512 inline float finish_legacy(const Block* w, const BlockQ8A* a, int64_t b, int64_t nb, __m512 acc,
                                      __m512 factor_sum) {
  using T = Legacy<Block>;
  alignas(64) float factors[16];
  _mm512_store_ps(factors, factor_sum);
  float offset_sum = factors[4] + factors[5] + factors[6] + factors[7];  // sum of d_w * s_a
  // Sum of m_w * s_a (types without a min gather d_w into those lanes: unused).
  float min_sum = T::kHasMin ? factors[8] + factors[9] + factors[10] + factors[11] : 0.0f;
  float sum = _mm512_reduce_add_ps(acc);
  for (; b < nb; ++b) {
    const __m256i p = _mm256_dpbusd_epi32(_mm256_setzero_si256(), unpack_one(w[b]),
                                          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a[b].qs)));
    const __m256 pf = _mm256_cvtepi32_ps(p);
    __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(pf), _mm256_extractf128_ps(pf, 1));
    s4 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
    s4 = _mm_add_ss(s4, _mm_movehdup_ps(s4));
    const float d0 = half(w[b].d);
    sum += d0 * a[b].d * _mm_cvtss_f32(s4);
    offset_sum += d0 * a[b].s;
    if constexpr (T::kHasMin) min_sum += half(w[b].m) * a[b].s;
  }
  return sum - static_cast<float>(T::kOffset) * offset_sum + min_sum;
}

// Four blocks per iteration into two accumulators; the offsets and mins are summed as factors
// and applied once at the end. T tokens at once (two sequences decoding together): each group's
// weights are unpacked and their scales converted once, and every token's sums take the same
// steps in the same order, so each token's result is the one-token kernel's bit for bit.
template <typename Block, int T>
IWB_AVX512 inline __attribute__((always_inline)) void dot_legacy_tokens(const void* weight,
                                                                        const BlockQ8A* const* activations, int64_t n,
                                                                        float* out) {
  const auto* w = static_cast<const Block*>(weight);
  const int64_t nb = n / kQK8_0;
  const __m512i first_pair = _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi32(1), 1);
  const __m512i second_pair = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_set1_epi32(2)), _mm256_set1_epi32(3), 1);
  __m512 acc0[T], acc1[T], factor_sum[T];
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t) acc0[t] = acc1[t] = factor_sum[t] = _mm512_setzero_ps();
  int64_t b = 0;
  for (; b + 4 <= nb; b += 4) {
    const __m512 weight_side = quad_weight_side(w + b);
    const __m512i u0 = unpack_two(w + b), u1 = unpack_two(w + b + 2);
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      const BlockQ8A* a = activations[t] + b;
      const __m512 f = _mm512_mul_ps(weight_side, quad_activation_side(a));
      factor_sum[t] = _mm512_add_ps(factor_sum[t], f);
      acc0[t] = legacy_pair_unpacked(u0, a, _mm512_permutexvar_ps(first_pair, f), acc0[t]);
      acc1[t] = legacy_pair_unpacked(u1, a + 2, _mm512_permutexvar_ps(second_pair, f), acc1[t]);
    }
  }
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t) {
    out[t] = finish_legacy(w, activations[t], b, nb, _mm512_add_ps(acc0[t], acc1[t]), factor_sum[t]);
  }
}

template <typename Block>
IWB_AVX512 float vec_dot_legacy(const void* weight, const void* activation, int64_t n) {
  const BlockQ8A* a[1] = {static_cast<const BlockQ8A*>(activation)};
  float out;
  dot_legacy_tokens<Block, 1>(weight, a, n, &out);
  return out;
}

template <typename Block>
IWB_AVX512 void vec_dot2_legacy(const void* weight, const void* activation0, const void* activation1, int64_t n,
                                float* out) {
  const BlockQ8A* a[2] = {static_cast<const BlockQ8A*>(activation0), static_cast<const BlockQ8A*>(activation1)};
  dot_legacy_tokens<Block, 2>(weight, a, n, out);
}

template <typename Block>
IWB_AVX512 void vec_dot_tokens_legacy(const void* weight, const void* const* activations, int num_tokens, int64_t n,
                                      float* out) {
  const auto* const* a = reinterpret_cast<const BlockQ8A* const*>(activations);
  switch (num_tokens) {
    case 1: dot_legacy_tokens<Block, 1>(weight, a, n, out); break;
    case 2: dot_legacy_tokens<Block, 2>(weight, a, n, out); break;
    case 3: dot_legacy_tokens<Block, 3>(weight, a, n, out); break;
    case 4: dot_legacy_tokens<Block, 4>(weight, a, n, out); break;
    case 5: dot_legacy_tokens<Block, 5>(weight, a, n, out); break;
    case 6: dot_legacy_tokens<Block, 6>(weight, a, n, out); break;
    case 7: dot_legacy_tokens<Block, 7>(weight, a, n, out); break;
    default: dot_legacy_tokens<Block, 8>(weight, a, n, out); break;
  }
  static_assert(kMaxDecodeTokens == 8);
}

// Q4_0 / Q4_1 with AVX512-VBMI: the two 64-byte loads of a four-block group (the second
// masked to the group's end) serve everything. One vpermb per pair of blocks lays both blocks'
// nibble bytes out as [q0 q0 q1 q1] for the shift, in place of two 16-byte loads, an insert
// and a vpermq, and the fp16 scales come from the same two registers (Zen 5, one thread: the
// kernel alone on rows in L2 50 -> 62 Gweights/s; bench_matmul_tokens Q4_0 1536 x 8960
// 0.275 -> 0.25 ms).
template <typename Block>
struct VbmiNibbles {
  static constexpr int kStride = sizeof(Block);
  static constexpr int kQs = static_cast<int>(offsetof(Block, qs));
  static_assert(2 * kStride <= 64, "two blocks must fit one 64-byte load");
  static constexpr short d(int k) { return static_cast<short>((k / 2) * 32 + (k % 2) * kStride / 2); }
  static constexpr short m(int k) { return Legacy<Block>::kHasMin ? static_cast<short>(d(k) + 1) : 0; }
};

template <typename Block>
IWB_AVX512_VBMI float vec_dot_nibbles_vbmi(const void* weight, const void* activation, int64_t n) {
  using T = Legacy<Block>;
  using V = VbmiNibbles<Block>;
  static_assert(!T::kHasHigh);
  const auto* w = static_cast<const Block*>(weight);
  const auto* a = static_cast<const BlockQ8A*>(activation);
  const int64_t nb = n / kQK8_0;
  const __m512i halves_index =
      _mm512_castsi256_si512(_mm256_setr_epi16(V::d(0), V::d(1), V::d(2), V::d(3), V::d(0), V::d(1), V::d(2), V::d(3),
                                               V::m(0), V::m(1), V::m(2), V::m(3), 0, 0, 0, 0));
  // Byte k of [q0 q0 q1 q1]: block k / 32's byte k % 16 (low nibbles, then high after the shift).
  alignas(64) static constexpr auto kByteIndex = [] {
    std::array<uint8_t, 64> index{};
    for (int k = 0; k < 64; ++k) index[k] = static_cast<uint8_t>((k / 32) * V::kStride + V::kQs + k % 16);
    return index;
  }();
  const __m512i byte_index = _mm512_load_si512(kByteIndex.data());
  const __m512i shifts = _mm512_setr_epi64(0, 0, 0x0004000400040004LL, 0x0004000400040004LL, 0, 0, 0x0004000400040004LL,
                                           0x0004000400040004LL);
  const __m512i nibble = _mm512_set1_epi8(0x0F);
  const __m512i first_pair = _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi32(1), 1);
  const __m512i second_pair = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_set1_epi32(2)), _mm256_set1_epi32(3), 1);
  const __mmask64 two_blocks = (uint64_t{1} << (2 * V::kStride)) - 1;
  __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps(), factor_sum = _mm512_setzero_ps();
  int64_t b = 0;
  for (; b + 4 <= nb; b += 4) {
    const auto* bytes = reinterpret_cast<const uint8_t*>(w + b);
    const __m512i low = _mm512_loadu_si512(bytes);
    const __m512i high = _mm512_maskz_loadu_epi8(two_blocks, bytes + 2 * V::kStride);
    const __m512 weight_side =
        _mm512_cvtph_ps(_mm512_castsi512_si256(_mm512_permutex2var_epi16(low, halves_index, high)));
    const __m512 activation_side = _mm512_permutex2var_ps(
        _mm512_loadu_ps(&a[b].d), _mm512_setr_epi32(0, 10, 20, 30, 1, 11, 21, 31, 1, 11, 21, 31, 0, 0, 0, 0),
        _mm512_loadu_ps(&a[b].d + 16));
    const __m512 f = _mm512_mul_ps(weight_side, activation_side);
    factor_sum = _mm512_add_ps(factor_sum, f);
    const __m512i u0 = _mm512_and_si512(_mm512_srlv_epi16(_mm512_permutexvar_epi8(byte_index, low), shifts), nibble);
    const __m512i u1 = _mm512_and_si512(_mm512_srlv_epi16(_mm512_permutexvar_epi8(byte_index, high), shifts), nibble);
    const __m512i aq0 =
        _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(a[b].qs))),
                           _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a[b + 1].qs)), 1);
    const __m512i aq1 =
        _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(a[b + 2].qs))),
                           _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a[b + 3].qs)), 1);
    acc0 = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_dpbusd_epi32(_mm512_setzero_si512(), u0, aq0)),
                           _mm512_permutexvar_ps(first_pair, f), acc0);
    acc1 = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_dpbusd_epi32(_mm512_setzero_si512(), u1, aq1)),
                           _mm512_permutexvar_ps(second_pair, f), acc1);
  }
  return finish_legacy(w, a, b, nb, _mm512_add_ps(acc0, acc1), factor_sum);
}

// MXFP4: pairs of blocks through the unsigned table (value + 12) and vpdpbusd, the +12 taken off
// as 12 * d_w * s_a per block at the end, as Q4_0's 8. The scales are powers of two: one f32
// multiply per block builds d_w * d_a. (A VBMI variant with one 64-byte load per four blocks and
// the scales built in vector code, as vec_dot_nibbles_vbmi, measured no faster on the Xeon:
// bench_matmul_tokens, 1536 x 8960, one token, 0.63 ms either way, so it was not kept.)
IWB_AVX512 float vec_dot_mxfp4(const void* weight, const void* activation, int64_t n) {
  const auto* w = static_cast<const BlockMxfp4*>(weight);
  const auto* a = static_cast<const BlockQ8A*>(activation);
  const int64_t nb = n / kQKMxfp4;
  __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
  float offset_sum = 0.0f;
  int64_t b = 0;
  for (; b + 4 <= nb; b += 4) {
    float dw[4];
#pragma GCC unroll 4
    for (int k = 0; k < 4; ++k) {
      dw[k] = e8m0_to_f32_half(w[b + k].e);
      offset_sum += dw[k] * a[b + k].s;
    }
    const __m512 scale0 = _mm512_insertf32x8(_mm512_set1_ps(dw[0] * a[b].d), _mm256_set1_ps(dw[1] * a[b + 1].d), 1);
    const __m512 scale1 = _mm512_insertf32x8(_mm512_set1_ps(dw[2] * a[b + 2].d), _mm256_set1_ps(dw[3] * a[b + 3].d), 1);
    acc0 = legacy_pair(w + b, a + b, scale0, acc0);
    acc1 = legacy_pair(w + b + 2, a + b + 2, scale1, acc1);
  }
  // The one to three blocks the loop left, one at a time.
  float sum = _mm512_reduce_add_ps(_mm512_add_ps(acc0, acc1));
  for (; b < nb; ++b) {
    const __m256i p = _mm256_dpbusd_epi32(_mm256_setzero_si256(), unpack_one(w[b]),
                                          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a[b].qs)));
    const float dw = e8m0_to_f32_half(w[b].e);
    sum += dw * a[b].d * static_cast<float>(_mm512_reduce_add_epi32(_mm512_zextsi256_si512(p)));
    offset_sum += dw * a[b].s;
  }
  return sum - static_cast<float>(Legacy<BlockMxfp4>::kOffset) * offset_sum;
}

// ---- K-quants ----

// Q4_K / Q5_K: per 64-element chunk, 32 bytes of nibbles become [low | high] = sub-blocks
// 2c and 2c+1; vpmaddubsw pairs them with the activations and vpdpwssd applies each
// sub-block's 6-bit scale while accumulating. The mins meet the activations' bsums.
template <typename Block>
IWB_AVX512 float vec_dot_k4(const void* weight, const void* activation, int64_t n) {
  constexpr bool kHasHigh = std::is_same_v<Block, BlockQ5_K>;
  const auto* w = static_cast<const Block*>(weight);
  const auto* a = static_cast<const BlockQ8_K*>(activation);
  const __m512i nibble = _mm512_set1_epi8(0x0F);
  const __m512i shift = halves_epi16(0, 4);
  __m512i scale_index[4], high_bit[4];
#pragma GCC unroll 16
  for (int c = 0; c < 4; ++c) {
    scale_index[c] = halves_epi16(2 * c, 2 * c + 1);
    high_bit[c] = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_set1_epi8(static_cast<char>(1 << (2 * c)))),
                                     _mm256_set1_epi8(static_cast<char>(1 << (2 * c + 1))), 1);
  }
  __m512 acc = _mm512_setzero_ps();
  __m256 acc_min = _mm256_setzero_ps();
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    uint64_t sc, m;
    unpack_k4_scales(w[b].scales, &sc, &m);
    const __m512i scales = _mm512_castsi256_si512(_mm256_cvtepu8_epi16(_mm_cvtsi64_si128(static_cast<long long>(sc))));
    // Mins: m_j pairs with bsums[2j] + bsums[2j+1].
    const __m128i m8 = _mm_cvtsi64_si128(static_cast<long long>(m));
    const __m256i mins = _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(m8, m8));
    const __m256i min_prod = _mm256_madd_epi16(mins, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a[b].bsums)));
    acc_min = _mm256_fmadd_ps(_mm256_cvtepi32_ps(min_prod), _mm256_set1_ps(half(w[b].dmin) * a[b].d), acc_min);
    __m512i high;
    if constexpr (kHasHigh)
      high = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[b].qh)));
    // Two accumulators: four dependent vpdpwssd in a row would make latency the limit.
    __m512i sumi[2] = {_mm512_setzero_si512(), _mm512_setzero_si512()};
#pragma GCC unroll 4
    for (int c = 0; c < 4; ++c) {
      __m512i q = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[b].qs + 32 * c)));
      q = _mm512_and_si512(_mm512_srlv_epi16(q, shift), nibble);
      if constexpr (kHasHigh) {
        q = _mm512_mask_add_epi8(q, _mm512_test_epi8_mask(high, high_bit[c]), q, _mm512_set1_epi8(0x10));
      }
      const __m512i p = _mm512_maddubs_epi16(q, _mm512_loadu_si512(a[b].qs + 64 * c));
      sumi[c % 2] = _mm512_dpwssd_epi32(sumi[c % 2], p, _mm512_permutexvar_epi16(scale_index[c], scales));
    }
    acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(sumi[0], sumi[1])), _mm512_set1_ps(half(w[b].d) * a[b].d),
                          acc);
  }
  const __m256 acc8 = _mm256_add_ps(_mm512_castps512_ps256(acc), _mm512_extractf32x8_ps(acc, 1));
  const __m256 diff = _mm256_sub_ps(acc8, acc_min);
  __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(diff), _mm256_extractf128_ps(diff, 1));
  s4 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
  s4 = _mm_add_ss(s4, _mm_movehdup_ps(s4));
  return _mm_cvtss_f32(s4);
}

// Q6_K: per 128-element half, the 64 bytes of ql give runs 0|1 (low nibbles) and 2|3 (high
// nibbles); qh, shifted per run, adds bits 4-5. Quants stay unsigned (0..63); the -32 comes
// back as 32 * sum(scale * bsum). T tokens at once (two sequences decoding together): each
// super-block is unpacked once and every token's sums take the same steps in the same order,
// so each token's result is the one-token kernel's bit for bit (test_quant_dot).
template <int T>
IWB_AVX512 void dot_q6_k_tokens(const void* weight, const BlockQ8_K* const* activations, int64_t n, float* out) {
  const auto* w = static_cast<const BlockQ6_K*>(weight);
  const __m512i nibble = _mm512_set1_epi8(0x0F), top = _mm512_set1_epi8(0x30);
  const __m512i shift_01 = halves_epi16(4, 2), shift_23 = halves_epi16(0, 2);
  const __m512i index[4] = {quarter_indices(0), quarter_indices(4), quarter_indices(8), quarter_indices(12)};
  __m512 acc[T];
#pragma GCC unroll 2
  for (int t = 0; t < T; ++t) acc[t] = _mm512_setzero_ps();
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w[b].scales)));
    const __m512i scales = _mm512_castsi256_si512(sc16);
    __m512i sumi[T];
#pragma GCC unroll 2
    for (int t = 0; t < T; ++t) {
      const __m256i bias =
          _mm256_madd_epi16(sc16, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(activations[t][b].bsums)));
      sumi[t] = _mm512_castsi256_si512(_mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(bias, 5)));
      sumi[t] = _mm512_inserti64x4(sumi[t], _mm256_setzero_si256(), 1);
    }
#pragma GCC unroll 16
    for (int h = 0; h < 2; ++h) {
      const __m512i ql = _mm512_loadu_si512(w[b].ql + 64 * h);
      const __m512i qh = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[b].qh + 32 * h)));
      const __m512i run01 =
          _mm512_or_si512(_mm512_and_si512(ql, nibble), _mm512_and_si512(_mm512_sllv_epi16(qh, shift_01), top));
      const __m512i run23 = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(ql, 4), nibble),
                                            _mm512_and_si512(_mm512_srlv_epi16(qh, shift_23), top));
      const __m512i scales01 = _mm512_permutexvar_epi16(index[2 * h], scales);
      const __m512i scales23 = _mm512_permutexvar_epi16(index[2 * h + 1], scales);
#pragma GCC unroll 2
      for (int t = 0; t < T; ++t) {
        const __m512i p01 = _mm512_maddubs_epi16(run01, _mm512_loadu_si512(activations[t][b].qs + 128 * h));
        const __m512i p23 = _mm512_maddubs_epi16(run23, _mm512_loadu_si512(activations[t][b].qs + 128 * h + 64));
        sumi[t] = _mm512_dpwssd_epi32(sumi[t], p01, scales01);
        sumi[t] = _mm512_dpwssd_epi32(sumi[t], p23, scales23);
      }
    }
#pragma GCC unroll 2
    for (int t = 0; t < T; ++t) {
      acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sumi[t]), _mm512_set1_ps(half(w[b].d) * activations[t][b].d), acc[t]);
    }
  }
#pragma GCC unroll 2
  for (int t = 0; t < T; ++t) out[t] = _mm512_reduce_add_ps(acc[t]);
}

IWB_AVX512 float vec_dot_q6_k(const void* weight, const void* activation, int64_t n) {
  const BlockQ8_K* a[1] = {static_cast<const BlockQ8_K*>(activation)};
  float out;
  dot_q6_k_tokens<1>(weight, a, n, &out);
  return out;
}

IWB_AVX512 void vec_dot2_q6_k(const void* weight, const void* activation0, const void* activation1, int64_t n,
                              float* out) {
  const BlockQ8_K* a[2] = {static_cast<const BlockQ8_K*>(activation0), static_cast<const BlockQ8_K*>(activation1)};
  dot_q6_k_tokens<2>(weight, a, n, out);
}

}  // namespace

bool select_quant_dot_avx512(GgmlType type, DotKernels* out) {
  DotKernels k;
  switch (type) {
    case GgmlType::Q4_0:
      k.vec_dot = has_avx512_vbmi() ? vec_dot_nibbles_vbmi<BlockQ4_0> : vec_dot_legacy<BlockQ4_0>;
      break;
    case GgmlType::Q4_1:
      k.vec_dot = has_avx512_vbmi() ? vec_dot_nibbles_vbmi<BlockQ4_1> : vec_dot_legacy<BlockQ4_1>;
      break;
    case GgmlType::Q5_0:
      k.vec_dot = vec_dot_legacy<BlockQ5_0>;
      k.vec_dot2 = vec_dot2_legacy<BlockQ5_0>;
      k.vec_dot_tokens = vec_dot_tokens_legacy<BlockQ5_0>;
      break;
    case GgmlType::Q5_1:
      k.vec_dot = vec_dot_legacy<BlockQ5_1>;
      k.vec_dot2 = vec_dot2_legacy<BlockQ5_1>;
      k.vec_dot_tokens = vec_dot_tokens_legacy<BlockQ5_1>;
      break;
    case GgmlType::Q8_0:
      k.vec_dot = vec_dot_legacy<BlockQ8_0>;
      k.vec_dot2 = vec_dot2_legacy<BlockQ8_0>;
      k.vec_dot_tokens = vec_dot_tokens_legacy<BlockQ8_0>;
      break;
    case GgmlType::MXFP4: k.vec_dot = vec_dot_mxfp4; break;
    case GgmlType::Q4_K: k.vec_dot = vec_dot_k4<BlockQ4_K>; break;
    case GgmlType::Q5_K: k.vec_dot = vec_dot_k4<BlockQ5_K>; break;
    case GgmlType::Q6_K:
      k.vec_dot = vec_dot_q6_k;
      k.vec_dot2 = vec_dot2_q6_k;
      break;
    default: return false;
  }
  k.format = activation_format(type);
  k.quantize = select_activation_quantizer(k.format, CpuPath::Avx512);
  k.tile = select_quant_tile_avx512(type);
  k.gemm = k.format == ActivationFormat::Q8_K ? select_quant_gemm_kquant_avx512(type) : select_quant_gemm_avx512(type);
  // K-quants, 5..16 tokens (decoding several sequences): the token-lane kernels, which unpack
  // each row once for up to 16 tokens, keep every (row, token) sum in lanes and prefetch their
  // rows block by block, beat the 4x4 tiles and, on weights streamed from DRAM as a model's
  // are, the GEMM, whose per-call repacking so few tokens do not pay back (Zen 5, one thread,
  // quiet machine: Q4_K 1536 x 151936, 8 tokens 11.5 ms against the tiles' 14.8, 16 tokens 21.5
  // against the GEMM's 31.0; rows already in L3, 1536 x 8960: 0.63 against 0.78 ms at 8 tokens,
  // but 1.08 against the GEMM's 0.96 at 16). 2..4 tokens keep the tiles (the lanes took 0.49
  // against 0.33 ms at 2 tokens), except where decode_streaming() says otherwise (Intel: from 3).
  if (select_quant_lanes_avx512(type, &k)) {
    const int lanes_from = decode_streaming().k_lanes_min_tokens;
    k.lanes_min_tokens = lanes_from > 0 ? lanes_from : 5;
    k.gemm_min_tokens = kLaneMaxTokens + 1;
  }
  select_decode_kernels_avx512(type, &k);
  // AMX tiles, where the CPU and the OS allow them (has_amx_int8), replace the VNNI GEMM.
  if (const QuantGemmFn amx =
          k.format == ActivationFormat::Q8_K ? select_quant_gemm_kquant_amx(type) : select_quant_gemm_amx(type)) {
    k.gemm = amx;
    k.gemm_rows = kQuantGemmAmxRows;
    // Their activations quantized and laid out as B tiles once per matmul.
    const bool is_k = k.format == ActivationFormat::Q8_K;
    k.gemm_prepare = is_k ? quant_gemm_kquant_amx_prepare : quant_gemm_amx_prepare;
    k.gemm_prepared_group_bytes = is_k ? quant_gemm_kquant_amx_group_bytes : quant_gemm_amx_group_bytes;
    // They fetch their rows as they pack them: the driver's prefetch of each next panel, all
    // at once before the call, stalled the core (Xeon model 167, default model files, `iwb
    // bench` alternated: Q4_0 pp32 235 -> 262, pp64 418 -> 459; Q8_0 pp64 350 -> 398; Q4_K_M
    // pp32/pp64 +2-3%; pp512 +0-4%).
    k.gemm_fetches_rows = true;
    // Where the tiles take over (Xeon model 167, bench_matmul_tokens with 2 threads, weights
    // streamed: --copies 20 or 100, ms a call). K-quants: from 17 tokens, where the token lanes
    // need a second pass (Q4_K 20 tokens 0.83 / 0.84 ms at 1536x8960 / 8960x1536 against the
    // lanes' 0.87-0.92 / 1.05-1.08; Q6_K 0.95 / 0.91 against 1.27-1.32 / 1.28-1.30). Up to 16
    // the lanes' one pass and the tiles are even over a layer (Q4_K 16 tokens: the lanes 0.62-0.63
    // / 0.81, the tiles 0.71-0.76 / 0.66-0.68). Before the tiles took the weights as the A operand
    // (quant_gemm_kquants_amx.cpp), the lanes stayed faster up to 31 tokens. The 32-element
    // types: the AMX tiles from 4 tokens, past the decode steps (below; the 4 x 4 tiles ran up
    // to 7 once, up to 4 until the AMX GEMM fetched its own rows: 4 tokens Q4_0 0.78-0.88
    // against 0.93-0.96 ms at 1536x8960, 0.62-0.64 / 0.82-0.86 at 8960x1536; Q8_0 0.97-1.03 /
    // 1.01-1.03, 0.77-0.79 / 1.00-1.12).
    k.gemm_min_tokens = k.lanes != nullptr ? kLaneMaxTokens + 1 : 4;
  }
  // Several tokens' dots at once (*_dot_tokens) replace the 4 x 4 tiles, and on AMX hosts the
  // first GEMM sizes, up to where their per-token work catches up (Xeon model 167,
  // bench_matmul_tokens --threads 2 --copies 20, ms at 1536x8960 / 8960x1536, decode steps
  // against what ran before). The decode layouts of Q4_0 and Q8_0: Q4_0 3 tokens 0.34 / 0.34
  // against the tiles' 0.88 / 0.75, 5: 0.43-0.48 / 0.44-0.47 against AMX 0.84 / 0.63, 8:
  // 0.68-0.71 / 0.67-0.69 against AMX 0.76-0.84 / 0.58-0.63 (the gate and up products are the
  // first shape, the down product the second); Q8_0 8 tokens 0.82-0.90 / 0.90-0.95 against AMX
  // 1.0-1.09 / 0.79-0.80; without AMX (IWB_CPU_NO_AMX=1) Q4_0 7 tokens 0.61 / 0.60 against the
  // tiles' 1.42 / 1.29, 8 against the VNNI GEMM's 0.85 / 0.85. The legacy kernel on the format's
  // layout (Q5_0, Q5_1, and Q8_0 on rows that keep it), with more work per token: 4 tokens
  // Q8_0 0.77 / 0.85 against AMX 0.99 / 0.78, Q5_0 0.73 / 0.70 against 0.95 / 0.67, 5 tokens
  // even with AMX; without AMX 7 tokens Q8_0 1.28 / 1.39 against the tiles' 1.45 / 1.53, Q5_0
  // 1.18 / 1.21 against 1.61 / 1.50.
  // (select_decode_kernels_avx512 sets decode_max_tokens with the kernels.)
  if (k.vec_dot_tokens != nullptr) k.vec_max_tokens = has_amx_int8() ? 4 : 7;
  *out = k;
  return true;
}

}  // namespace iwb::detail

#else

namespace iwb::detail {
bool select_quant_dot_avx512(GgmlType, DotKernels*) { return false; }
}  // namespace iwb::detail

#endif
