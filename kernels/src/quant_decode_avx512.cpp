// Decode's Q4_0, Q8_0, Q4_K and Q5_K dot products on activation layouts of their own (AVX-512;
// Q4_0 and Q8_0 with VBMI): a few tokens' activations are quantized once per call anyway, so
// they can be laid out the way the weights unpack, and the kernels need no per-block shuffles
// on the activation side (one to eight tokens at once for Q4_0 and Q8_0).
//
// Q4_0's 18-byte blocks leave its nibbles at no fixed place in a vector; the general kernel
// (vec_dot_nibbles_vbmi) gathers them, and the activations' 40-byte blocks, with several
// port-5 permutes and one float conversion and multiply-add per two blocks, which held it to
// ~14 GB/s of weights per Xeon core, below the memory's share of a core. Here four blocks take
// one byte permute for the nibbles and one for the scales; their integer sums, the -8 offset
// folded in as an integer (the activation side carries -8 x its lane sums), need one
// conversion and multiply-add per four blocks. Q8_0 shares that layout: its 34-byte blocks take
// two byte permutes per four (values 0..15 and 16..31 of each block, as the activations hold
// them) and an XOR to unsigned (+128, the activations carrying -128 x their lane sums), where
// the general kernel's per-token work (scales and offsets per block pair) made several
// tokens cost nearly what they cost one at a time.
//
// Q4_K: a 64-byte load holds four sub-blocks' nibbles (two chunks); one shift and two ANDs
// give all of them, each meets its activations in one vpdpbusd (unsigned nibbles times signed
// bytes, sums of four), and since those lane sums fit 16 bits (4 x 15 x 127) two vectors pack
// into one and a vpdpwssd applies the sub-block scales. The general kernel (vec_dot_k4) took a
// vpmaddubsw and a vpdpwssd per 64 values and a shift per 32 bytes. Q5_K adds its fifth bits
// with a byte test and a masked add per vector.
#include "quant_dot.h"

#if defined(__x86_64__) || defined(__i386__)
#include "quant_avx512_common.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <type_traits>

namespace iwb::detail {
namespace {

using namespace avx512;

// Four blocks (128 values) of one token. Lane l of a 16-lane vector belongs to block l / 4, as
// vpdpbusd's sums over the weights' bytes 4l..4l+3 do.
struct NibbleGroupQ8 {
  int8_t lo[64];       // block k's values 0..15 at 16k..16k+15 (they meet the low nibbles)
  int8_t hi[64];       // block k's values 16..31 at 16k.. (the high nibbles)
  int32_t offset[16];  // -8 x (lo + hi bytes of lane l): Q4_0's offset, exact in integers (Q8_0: -128)
  float d[16];         // block l / 4's scale, in each of its four lanes
};
static_assert(sizeof(NibbleGroupQ8) == 256);

constexpr int kGroupBlocks = 4;
constexpr int kGroupBytes = kGroupBlocks * static_cast<int>(sizeof(BlockQ4_0));  // 72

size_t nibble_groups_bytes(int64_t num_elements) {
  const int64_t blocks = num_elements / kQK4_0;
  return static_cast<size_t>((blocks + kGroupBlocks - 1) / kGroupBlocks) * sizeof(NibbleGroupQ8);
}

// Round to nearest as the Q8_1 quantizers do (d = max |x| / 127); a short last group's missing
// blocks are zeros, which add nothing. kOffset: what the weights' unsigned bytes exceed their
// values by (Q4_0 8, Q8_0 128), taken off through the lane sums.
template <int kOffset>
IWB_AVX512 void quantize_groups(const float* src, void* dst, int64_t num_elements) {
  auto* groups = static_cast<NibbleGroupQ8*>(dst);
  const int64_t blocks = num_elements / kQK4_0;
  const int64_t num_groups = (blocks + kGroupBlocks - 1) / kGroupBlocks;
  const __m512i lane_firsts = _mm512_setr_epi32(0, 4, 8, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0);
  for (int64_t g = 0; g < num_groups; ++g) {
    NibbleGroupQ8& out = groups[g];
    for (int k = 0; k < kGroupBlocks; ++k) {
      const int64_t b = g * kGroupBlocks + k;
      if (b >= blocks) {
        std::fill_n(out.lo + 16 * k, 16, int8_t{0});
        std::fill_n(out.hi + 16 * k, 16, int8_t{0});
        std::fill_n(out.offset + 4 * k, 4, 0);
        std::fill_n(out.d + 4 * k, 4, 0.0f);
        continue;
      }
      const __m512 x0 = _mm512_loadu_ps(src + b * kQK4_0), x1 = _mm512_loadu_ps(src + b * kQK4_0 + 16);
      const float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(x0), _mm512_abs_ps(x1)));
      const float d = amax / 127.0f;
      const __m512 id = _mm512_set1_ps(d != 0.0f ? 1.0f / d : 0.0f);
      const __m512i q0 = _mm512_cvtps_epi32(_mm512_mul_ps(x0, id)), q1 = _mm512_cvtps_epi32(_mm512_mul_ps(x1, id));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(out.lo + 16 * k), _mm512_cvtsepi32_epi8(q0));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(out.hi + 16 * k), _mm512_cvtsepi32_epi8(q1));
      // Lane j of the block sums values 4j..4j+3 and 16+4j..16+4j+3.
      __m512i s = _mm512_add_epi32(q0, q1);
      s = _mm512_add_epi32(s, _mm512_shuffle_epi32(s, _MM_PERM_CDAB));
      s = _mm512_add_epi32(s, _mm512_shuffle_epi32(s, _MM_PERM_BADC));
      const __m128i lanes = _mm512_castsi512_si128(_mm512_permutexvar_epi32(lane_firsts, s));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(out.offset + 4 * k),
                       _mm_mullo_epi32(lanes, _mm_set1_epi32(-kOffset)));
      _mm_storeu_ps(out.d + 4 * k, _mm_set1_ps(d));
    }
  }
}

// The byte permutes of a four-block group, whose 72 bytes are read as `low` (bytes 0..63) and
// `high` (bytes 36..71, indices 64..99 of the two-source permute).
struct GroupIndex {
  alignas(64) std::array<uint8_t, 64> nibbles{};  // block k's 16 quant bytes at 16k..
  alignas(64) std::array<uint8_t, 64> scales{};   // block k's fp16 d in words 4k..4k+3 (low 32 bytes)
};
constexpr GroupIndex make_group_index() {
  GroupIndex index;
  for (int k = 0; k < kGroupBlocks; ++k) {
    for (int i = 0; i < 16; ++i) {
      const int byte = k * static_cast<int>(sizeof(BlockQ4_0)) + 2 + i;
      index.nibbles[16 * k + i] = static_cast<uint8_t>(byte < 64 ? byte : 64 + byte - 36);
    }
    for (int j = 0; j < 4; ++j) {
      index.scales[2 * (4 * k + j)] = static_cast<uint8_t>(k * sizeof(BlockQ4_0));
      index.scales[2 * (4 * k + j) + 1] = static_cast<uint8_t>(k * sizeof(BlockQ4_0) + 1);
    }
  }
  return index;
}
alignas(64) constexpr GroupIndex kGroupIndex = make_group_index();

// A group's weights unpacked: nibbles (low, high) and the four blocks' scales.
struct UnpackedGroup {
  __m512i lo, hi;
  __m512 dw;
};

IWB_AVX512_VBMI inline UnpackedGroup unpack_group(const uint8_t* bytes, int blocks) {
  const __m512i nibble = _mm512_set1_epi8(0x0F);
  // A short group reads only its own bytes (masked loads never fault past them).
  const int length = blocks * static_cast<int>(sizeof(BlockQ4_0));
  const __mmask64 low_mask = length >= 64 ? ~__mmask64{0} : (__mmask64{1} << length) - 1;
  const __mmask64 high_mask = length > 36 ? (__mmask64{1} << (length - 36)) - 1 : 0;
  const __m512i low = _mm512_maskz_loadu_epi8(low_mask, bytes);
  const __m512i high = _mm512_maskz_loadu_epi8(high_mask, bytes + 36);
  const __m512i qs = _mm512_permutex2var_epi8(low, _mm512_load_si512(kGroupIndex.nibbles.data()), high);
  UnpackedGroup u;
  u.lo = _mm512_and_si512(qs, nibble);
  u.hi = _mm512_and_si512(_mm512_srli_epi16(qs, 4), nibble);
  u.dw = _mm512_cvtph_ps(
      _mm512_castsi512_si256(_mm512_permutexvar_epi8(_mm512_load_si512(kGroupIndex.scales.data()), low)));
  return u;
}

// Q8_0 on the same activation layout: four 34-byte blocks (136 bytes) as two vectors, block k's
// values 0..15 at 16k.. of `lo` and 16..31 at 16k.. of `hi`, made unsigned (+128, which the
// activations' offset takes off again), and the four scales. `lo` and the scales come from
// bytes 0..127, `hi` from bytes 8..135 (a two-source byte permute each).
constexpr int kByteGroupBytes = kGroupBlocks * static_cast<int>(sizeof(BlockQ8_0));  // 136

struct ByteGroupIndex {
  alignas(64) std::array<uint8_t, 64> lo{};      // into bytes 0..127
  alignas(64) std::array<uint8_t, 64> hi{};      // into bytes 8..135
  alignas(64) std::array<uint8_t, 64> scales{};  // into bytes 0..127: block k's d in words 4k..4k+3
};
constexpr ByteGroupIndex make_byte_group_index() {
  ByteGroupIndex index;
  constexpr int kStride = static_cast<int>(sizeof(BlockQ8_0));
  for (int k = 0; k < kGroupBlocks; ++k) {
    for (int i = 0; i < 16; ++i) {
      index.lo[16 * k + i] = static_cast<uint8_t>(k * kStride + 2 + i);
      index.hi[16 * k + i] = static_cast<uint8_t>(k * kStride + 2 + 16 + i - 8);
    }
    for (int j = 0; j < 4; ++j) {
      index.scales[2 * (4 * k + j)] = static_cast<uint8_t>(k * kStride);
      index.scales[2 * (4 * k + j) + 1] = static_cast<uint8_t>(k * kStride + 1);
    }
  }
  return index;
}
alignas(64) constexpr ByteGroupIndex kByteGroupIndex = make_byte_group_index();

// The mask of a 64-byte load at `from` that stays within a group's first `length` bytes.
inline __mmask64 bytes_mask(int from, int length) {
  const int n = std::clamp(length - from, 0, 64);
  return n == 64 ? ~__mmask64{0} : (__mmask64{1} << n) - 1;
}

IWB_AVX512_VBMI inline UnpackedGroup unpack_byte_group(const uint8_t* bytes, int blocks) {
  const int length = blocks * static_cast<int>(sizeof(BlockQ8_0));
  const __m512i b0 = _mm512_maskz_loadu_epi8(bytes_mask(0, length), bytes);
  const __m512i b64 = _mm512_maskz_loadu_epi8(bytes_mask(64, length), bytes + 64);
  const __m512i b8 = _mm512_maskz_loadu_epi8(bytes_mask(8, length), bytes + 8);
  const __m512i b72 = _mm512_maskz_loadu_epi8(bytes_mask(72, length), bytes + 72);
  const __m512i sign = _mm512_set1_epi8(static_cast<char>(0x80));
  UnpackedGroup u;
  u.lo = _mm512_xor_si512(_mm512_permutex2var_epi8(b0, _mm512_load_si512(kByteGroupIndex.lo.data()), b64), sign);
  u.hi = _mm512_xor_si512(_mm512_permutex2var_epi8(b8, _mm512_load_si512(kByteGroupIndex.hi.data()), b72), sign);
  u.dw = _mm512_cvtph_ps(
      _mm512_castsi512_si256(_mm512_permutex2var_epi8(b0, _mm512_load_si512(kByteGroupIndex.scales.data()), b64)));
  return u;
}

IWB_AVX512_VBMI inline __m512 group_dot(const UnpackedGroup& u, const NibbleGroupQ8& a, __m512 acc) {
  __m512i sums = _mm512_loadu_si512(a.offset);
  sums = _mm512_dpbusd_epi32(sums, u.lo, _mm512_loadu_si512(a.lo));
  sums = _mm512_dpbusd_epi32(sums, u.hi, _mm512_loadu_si512(a.hi));
  return _mm512_fmadd_ps(_mm512_cvtepi32_ps(sums), _mm512_mul_ps(u.dw, _mm512_loadu_ps(a.d)), acc);
}

// Groups in pairs into two accumulators. T tokens at once (sequences decoding together, a
// draft verified): each group is unpacked once and every token's sums take the same steps in
// the same order, so each token's result is the one-token kernel's bit for bit. Block: Q4_0
// (nibbles) or Q8_0 (bytes), on the same activation layout.
template <typename Block, int T>
IWB_AVX512_VBMI inline __attribute__((always_inline)) void groups_tokens(const void* weight,
                                                                         const NibbleGroupQ8* const* activations,
                                                                         int64_t n, float* out) {
  constexpr bool kIsQ8 = std::is_same_v<Block, BlockQ8_0>;
  constexpr int kBytes = kIsQ8 ? kByteGroupBytes : kGroupBytes;
  auto unpack = [](const uint8_t* bytes, int blocks)
                    IWB_AVX512_VBMI { return kIsQ8 ? unpack_byte_group(bytes, blocks) : unpack_group(bytes, blocks); };
  const auto* w = static_cast<const uint8_t*>(weight);
  const int64_t blocks = n / kQK4_0;
  const int64_t full = blocks / kGroupBlocks;
  __m512 acc0[T], acc1[T];
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t) acc0[t] = acc1[t] = _mm512_setzero_ps();
  int64_t g = 0;
  for (; g + 2 <= full; g += 2) {
    const UnpackedGroup u0 = unpack(w + g * kBytes, kGroupBlocks);
    const UnpackedGroup u1 = unpack(w + (g + 1) * kBytes, kGroupBlocks);
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      acc0[t] = group_dot(u0, activations[t][g], acc0[t]);
      acc1[t] = group_dot(u1, activations[t][g + 1], acc1[t]);
    }
  }
  if (g < full) {
    const UnpackedGroup u = unpack(w + g * kBytes, kGroupBlocks);
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) acc0[t] = group_dot(u, activations[t][g], acc0[t]);
    ++g;
  }
  if (const int rest = static_cast<int>(blocks - full * kGroupBlocks); rest > 0) {
    const UnpackedGroup u = unpack(w + g * kBytes, rest);
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) acc1[t] = group_dot(u, activations[t][g], acc1[t]);
  }
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t) out[t] = _mm512_reduce_add_ps(_mm512_add_ps(acc0[t], acc1[t]));
}

template <typename Block>
IWB_AVX512_VBMI float vec_dot_groups(const void* weight, const void* activation, int64_t n) {
  const NibbleGroupQ8* a[1] = {static_cast<const NibbleGroupQ8*>(activation)};
  float out;
  groups_tokens<Block, 1>(weight, a, n, &out);
  return out;
}

template <typename Block>
IWB_AVX512_VBMI void vec_dot2_groups(const void* weight, const void* act0, const void* act1, int64_t n, float* out) {
  const NibbleGroupQ8* a[2] = {static_cast<const NibbleGroupQ8*>(act0), static_cast<const NibbleGroupQ8*>(act1)};
  groups_tokens<Block, 2>(weight, a, n, out);
}

template <typename Block>
IWB_AVX512_VBMI void vec_dot_tokens_groups(const void* weight, const void* const* activations, int num_tokens,
                                           int64_t n, float* out) {
  const auto* const* a = reinterpret_cast<const NibbleGroupQ8* const*>(activations);
  switch (num_tokens) {
    case 1: groups_tokens<Block, 1>(weight, a, n, out); break;
    case 2: groups_tokens<Block, 2>(weight, a, n, out); break;
    case 3: groups_tokens<Block, 3>(weight, a, n, out); break;
    case 4: groups_tokens<Block, 4>(weight, a, n, out); break;
    case 5: groups_tokens<Block, 5>(weight, a, n, out); break;
    case 6: groups_tokens<Block, 6>(weight, a, n, out); break;
    case 7: groups_tokens<Block, 7>(weight, a, n, out); break;
    default: groups_tokens<Block, 8>(weight, a, n, out); break;
  }
  static_assert(kMaxDecodeTokens == 8);
}

// ---- Q4_K ----

// One super-block (256 values) of one token. The sub-blocks (32 values) are stored in the order
// the weights unpack: per half h (64 weight bytes: chunks 2h, 2h+1), [4h, 4h+2] meet the low
// nibbles and [4h+1, 4h+3] the high ones.
struct SuperBlockQ8 {
  int8_t qs[256];
  // Words 8..15: each sub-block's sum of values, sub-block order; 0..7 zero. One vpmaddwd with
  // the unpacked scale and min words (8 scales, 8 mins) gives the mins' products, no insert.
  int16_t sums[16];
  float d;
  uint8_t padding[28];
};
static_assert(sizeof(SuperBlockQ8) == 320);

constexpr int kSubBlockSlot[8] = {0, 64, 32, 96, 128, 192, 160, 224};  // byte offset of sub-block s

size_t super_blocks_bytes(int64_t num_elements) {
  return static_cast<size_t>(num_elements / kQK_K) * sizeof(SuperBlockQ8);
}

IWB_AVX512 void quantize_super_blocks(const float* src, void* dst, int64_t num_elements) {
  auto* blocks = static_cast<SuperBlockQ8*>(dst);
  for (int64_t b = 0; b < num_elements / kQK_K; ++b) {
    const float* x = src + b * kQK_K;
    __m512 amax = _mm512_setzero_ps();
    for (int i = 0; i < kQK_K; i += 16) amax = _mm512_max_ps(amax, _mm512_abs_ps(_mm512_loadu_ps(x + i)));
    const float d = _mm512_reduce_max_ps(amax) / 127.0f;
    const __m512 id = _mm512_set1_ps(d != 0.0f ? 1.0f / d : 0.0f);
    SuperBlockQ8& out = blocks[b];
    for (int sb = 0; sb < 8; ++sb) {
      const __m512i q0 = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(x + 32 * sb), id));
      const __m512i q1 = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(x + 32 * sb + 16), id));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(out.qs + kSubBlockSlot[sb]), _mm512_cvtsepi32_epi8(q0));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(out.qs + kSubBlockSlot[sb] + 16), _mm512_cvtsepi32_epi8(q1));
      out.sums[8 + sb] = static_cast<int16_t>(_mm512_reduce_add_epi32(_mm512_add_epi32(q0, q1)));
    }
    std::fill_n(out.sums, 8, int16_t{0});
    out.d = d;
    std::fill_n(out.padding, sizeof out.padding, uint8_t{0});
  }
}

// vpermw indices that give packed word w of half h the scale of its sub-block: words 8L..8L+3
// of 128-bit lane L came from the low nibbles' vector, 8L+4..8L+7 from the high ones'; lanes 0
// and 1 hold sub-blocks 4h and 4h+1, lanes 2 and 3 4h+2 and 4h+3.
struct ScaleIndex {
  alignas(64) std::array<int16_t, 32> half[2]{};
};
constexpr ScaleIndex make_scale_index() {
  ScaleIndex index;
  for (int h = 0; h < 2; ++h) {
    for (int w = 0; w < 32; ++w) index.half[h][w] = static_cast<int16_t>(4 * h + (w / 8 >= 2 ? 2 : 0) + (w % 8) / 4);
  }
  return index;
}
alignas(64) constexpr ScaleIndex kScaleIndex = make_scale_index();

// Q5_K's fifth bits: qh byte l, bit 2c (2c + 1), is that of value l of sub-block 2c (2c + 1).
// Per half h, the bit of each byte of the low (high) nibbles' vector: sub-blocks 4h and 4h + 2
// (4h + 1 and 4h + 3) in its two 32-byte halves.
IWB_AVX512 inline __m512i fifth_bit_selector(int first_sub_block) {
  return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_set1_epi8(static_cast<char>(1 << first_sub_block))),
                            _mm256_set1_epi8(static_cast<char>(1 << (first_sub_block + 2))), 1);
}

// T tokens' dots of one row (out[t]): each row super-block's nibbles and scales unpacked once
// for all of them (sequences decoding together, a draft verified: matmul_driver.cpp's decode
// steps). Each token's sums go through the same operations in the same order whatever T, so
// out[t] equals the one-token kernel's result bit for bit.
template <typename Block, int T>
IWB_AVX512 inline __attribute__((always_inline)) void k_super_blocks_tokens(const void* weight,
                                                                            const SuperBlockQ8* const* acts, int64_t n,
                                                                            float* out) {
  constexpr bool kHasHigh = std::is_same_v<Block, BlockQ5_K>;
  const auto* w = static_cast<const Block*>(weight);
  const __m512i nibble = _mm512_set1_epi8(0x0F);
  const __m512i index0 = _mm512_load_si512(kScaleIndex.half[0].data());
  const __m512i index1 = _mm512_load_si512(kScaleIndex.half[1].data());
  const __m512i sixteen = _mm512_set1_epi8(0x10);
  const __m512i low_bits[2] = {fifth_bit_selector(0), fifth_bit_selector(4)};
  const __m512i high_bits[2] = {fifth_bit_selector(1), fifth_bit_selector(5)};
  // One accumulator a token, the mins' products taken off it too: eight tokens' accumulators
  // and sums then leave registers for the row's unpacked vectors (no spills at T = 8).
  __m512 acc[T];
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t) acc[t] = _mm512_setzero_ps();
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    // Words 0..7 the sub-block scales, 8..15 the mins (unpack_k4_scales_vector has the figures).
    const __m256i scales_mins = _mm256_cvtepu8_epi16(unpack_k4_scales_vector(w[b].scales));
    const __m512i scales = _mm512_castsi256_si512(scales_mins);
    __m512i sums[T];
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) sums[t] = _mm512_setzero_si512();
    __m512i qh;
    if constexpr (kHasHigh) qh = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[b].qh)));
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
      const __m512i x = _mm512_loadu_si512(w[b].qs + 64 * h);
      __m512i lo = _mm512_and_si512(x, nibble);
      __m512i hi = _mm512_and_si512(_mm512_srli_epi16(x, 4), nibble);
      if constexpr (kHasHigh) {  // values up to 31: lane sums still fit 16 bits (4 x 31 x 127)
        lo = _mm512_mask_add_epi8(lo, _mm512_test_epi8_mask(qh, low_bits[h]), lo, sixteen);
        hi = _mm512_mask_add_epi8(hi, _mm512_test_epi8_mask(qh, high_bits[h]), hi, sixteen);
      }
      const __m512i scale_words = _mm512_permutexvar_epi16(h == 0 ? index0 : index1, scales);
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t) {
        const __m512i p_lo =
            _mm512_dpbusd_epi32(_mm512_setzero_si512(), lo, _mm512_loadu_si512(acts[t][b].qs + 128 * h));
        const __m512i p_hi =
            _mm512_dpbusd_epi32(_mm512_setzero_si512(), hi, _mm512_loadu_si512(acts[t][b].qs + 128 * h + 64));
        sums[t] = _mm512_dpwssd_epi32(sums[t], _mm512_packs_epi32(p_lo, p_hi), scale_words);
      }
    }
    // d and dmin (adjacent halves) converted together, times the activations' scale, go through
    // memory: the multiply-adds then take them as broadcast operands, which cost a load each
    // instead of a shuffle-port broadcast (512-bit code leaves two vector ports, and this
    // kernel keeps both busy: the epilogue went from 10 to 6 vector instructions per token; on
    // Ice Lake, rows in L2 on one core, bench_matmul_tokens 1536x768: 15.6-15.9 -> 16.2-16.5
    // GB/s; whole decodes did not tell the difference from the host's noise).
    const __m128 w_d_dmin =
        _mm_cvtph_ps(_mm_cvtsi32_si128(static_cast<int>(load_u32(reinterpret_cast<const uint8_t*>(&w[b].d)))));
    alignas(16) float d_dmin[T][4];
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) _mm_store_ps(d_dmin[t], _mm_mul_ps(w_d_dmin, _mm_broadcast_ss(&acts[t][b].d)));
    // The array's address escapes, so the compiler stores it and reads it back as broadcast
    // operands (without this it moved the floats through general registers and broadcast them).
    asm volatile("" : : "r"(d_dmin) : "memory");
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sums[t]), _mm512_set1_ps(d_dmin[t][0]), acc[t]);
      // Mins: m_j times sub-block j's sum (words 8..15 meet the sums; 0..7 meet zeros).
      const __m256i min_prod =
          _mm256_madd_epi16(scales_mins, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(acts[t][b].sums)));
      acc[t] =
          _mm512_fnmadd_ps(_mm512_zextps256_ps512(_mm256_cvtepi32_ps(min_prod)), _mm512_set1_ps(d_dmin[t][1]), acc[t]);
    }
  }
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t) out[t] = _mm512_reduce_add_ps(acc[t]);
}

template <typename Block>
IWB_AVX512 float vec_dot_k_super_blocks(const void* weight, const void* activation, int64_t n) {
  const SuperBlockQ8* acts[1] = {static_cast<const SuperBlockQ8*>(activation)};
  float out;
  k_super_blocks_tokens<Block, 1>(weight, acts, n, &out);
  return out;
}

template <typename Block>
IWB_AVX512 void vec_dot2_k_super_blocks(const void* weight, const void* act0, const void* act1, int64_t n, float* out) {
  const SuperBlockQ8* acts[2] = {static_cast<const SuperBlockQ8*>(act0), static_cast<const SuperBlockQ8*>(act1)};
  k_super_blocks_tokens<Block, 2>(weight, acts, n, out);
}

template <typename Block>
IWB_AVX512 void vec_dot_tokens_k_super_blocks(const void* weight, const void* const* activations, int num_tokens,
                                              int64_t n, float* out) {
  const auto* const* a = reinterpret_cast<const SuperBlockQ8* const*>(activations);
  switch (num_tokens) {
    case 1: k_super_blocks_tokens<Block, 1>(weight, a, n, out); break;
    case 2: k_super_blocks_tokens<Block, 2>(weight, a, n, out); break;
    case 3: k_super_blocks_tokens<Block, 3>(weight, a, n, out); break;
    case 4: k_super_blocks_tokens<Block, 4>(weight, a, n, out); break;
    case 5: k_super_blocks_tokens<Block, 5>(weight, a, n, out); break;
    case 6: k_super_blocks_tokens<Block, 6>(weight, a, n, out); break;
    case 7: k_super_blocks_tokens<Block, 7>(weight, a, n, out); break;
    default: k_super_blocks_tokens<Block, 8>(weight, a, n, out); break;
  }
  static_assert(kMaxDecodeTokens == 8);
}

// Q4_0's or Q8_0's kernels on the four-block group layout (kOffset: the weights' unsigned
// excess, which the activations' lane sums take off).
template <typename Block, int kOffset>
void set_group_kernels(DotKernels* k) {
  k->decode_quantize = quantize_groups<kOffset>;
  k->decode_dot = vec_dot_groups<Block>;
  k->decode_dot2 = vec_dot2_groups<Block>;
  k->decode_dot_tokens = vec_dot_tokens_groups<Block>;
  k->decode_activation_bytes = nibble_groups_bytes;
  k->decode_group_blocks = kGroupBlocks;
  k->decode_layout_max_bytes = static_cast<size_t>(decode_streaming().q4_0_layout_max_bytes);
  k->decode_max_tokens = kMaxDecodeTokens;
}

}  // namespace

bool select_decode_kernels_avx512(GgmlType type, DotKernels* k) {
  if (type == GgmlType::Q4_0 && has_avx512_vbmi()) {
    set_group_kernels<BlockQ4_0, 8>(k);
    return true;
  }
  // Q8_0 on Q4_0's activation layout: against the general kernel (Xeon model 167,
  // bench_matmul_tokens --threads 2 --copies 20, ms at 1536x8960 / 8960x1536) one token 0.44 /
  // 0.46-0.48 against 0.45-0.52 / 0.47-0.48, two 0.45-0.46 / 0.49-0.51 against 0.53-0.54 /
  // 0.55-0.57, and several at once far less per token (3: 0.49-0.51 / 0.56 against 0.70-0.73
  // / 0.72-0.74; 8: 0.82-0.90 / 0.90-0.95 against 1.52 / 1.69-1.72).
  // Long rows keep the general dot where Q4_0's do (AMD Zen 5, rows of 8,960 inputs: there
  // Q4_0's layout lost because its activations, 256 bytes per 128 inputs, cost a core more than
  // its weights' stream; Q8_0's stream is twice Q4_0's, so it may not lose, but that is
  // unmeasured).
  if (type == GgmlType::Q8_0 && has_avx512_vbmi()) {
    set_group_kernels<BlockQ8_0, 128>(k);
    return true;
  }
  if (type == GgmlType::Q4_K || type == GgmlType::Q5_K) {
    k->decode_quantize = quantize_super_blocks;  // one layout for both: mixed groups share it
    k->decode_dot = type == GgmlType::Q4_K ? vec_dot_k_super_blocks<BlockQ4_K> : vec_dot_k_super_blocks<BlockQ5_K>;
    k->decode_dot2 = type == GgmlType::Q4_K ? vec_dot2_k_super_blocks<BlockQ4_K> : vec_dot2_k_super_blocks<BlockQ5_K>;
    k->decode_dot_tokens =
        type == GgmlType::Q4_K ? vec_dot_tokens_k_super_blocks<BlockQ4_K> : vec_dot_tokens_k_super_blocks<BlockQ5_K>;
    k->decode_activation_bytes = super_blocks_bytes;
    k->decode_group_blocks = 1;
    k->decode_max_tokens = std::clamp(decode_streaming().k_decode_max_tokens, 2, kMaxDecodeTokens);
    return true;
  }
  return false;
}

}  // namespace iwb::detail

#else

namespace iwb::detail {
bool select_decode_kernels_avx512(GgmlType, DotKernels*) { return false; }
}  // namespace iwb::detail

#endif
