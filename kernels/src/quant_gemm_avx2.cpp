// AVX2 prefill GEMM of the quantized types for CPUs without AVX-512 (AMD Zen 2/3, Intel client
// cores): the 256-bit twin of quant_gemm_avx512.cpp and quant_gemm_kquants_avx512.cpp. A panel
// of 8 weight rows is unpacked to unsigned bytes once per call and transposed so that 32-bit
// lane i of a vector holds 4 consecutive weights of row i; one vpmaddubsw against 4 broadcast
// activation bytes then advances all 8 rows, with no horizontal sums (lane i is output row i).
//
// Without VNNI, vpmaddubsw leaves 16-bit pair sums. They are added in 16 bits for as many
// steps as the weights' range keeps below 32767 (|activation| <= 127: 8 steps for 4-bit
// codes, 4 for 5-bit and MXFP4, 2 for Q6_K's 6-bit), then one vpmaddwd applies the
// (sub-)block's integer scale, or 1, and widens to 32 bits: about two vector operations per
// 32 multiply-adds, where the dequantizing path's f32 FMAs do 8.
// Q8_0's signed weights take the sign trick instead (|w| times a with w's sign), one step at a
// time.
#include "quant_dot.h"
#include "quant_unpack_common.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <type_traits>

#define IWB_AVX2_GEMM __attribute__((target("avx2,fma,f16c")))

namespace iwb::detail {
namespace {

constexpr int kRows = 8;         // rows of a panel: the 32-bit lanes of a vector
constexpr int kGroupTokens = 4;  // tokens that share each packed weight load

IWB_AVX2_GEMM inline float half(uint16_t h) { return _cvtsh_ss(h); }

inline int32_t load_i32(const void* p) {
  int32_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

IWB_AVX2_GEMM inline __m256i broadcast_4(const int8_t* x) { return _mm256_set1_epi32(load_i32(x)); }

// a + b, kept in this order: GCC otherwise reassociates a chain of 16-bit adds into a tree
// that holds every product of a sub-block at once, and spills half of them (Zen 3, Q4_K 8960
// x 1536 with 512 tokens: 136 GOP/s per core with the spills).
IWB_AVX2_GEMM inline __m256i add_in_order(__m256i a, __m256i b) {
  __m256i sum = _mm256_add_epi16(a, b);
  __asm__("" : "+x"(sum));
  return sum;
}

// Low nibbles of 16 bytes (elements 0..15), then their high nibbles (16..31).
IWB_AVX2_GEMM inline __m256i nibbles(const uint8_t* qs) {
  const __m128i x = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  return _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(x, 4), x), _mm256_set1_epi8(0x0F));
}

// ---- 32-element types: x = d * (u - offset) (+ m), u unsigned; Q8_0 signed ----

// kOffset: what the unsigned codes carry above the value; kMaxCode: their largest value
// (which sets how many steps add up in 16 bits).
template <typename Block>
struct Legacy;
template <>
struct Legacy<BlockQ4_0> {
  static constexpr int kOffset = 8, kMaxCode = 15;
  static constexpr bool kHasMin = false;
};
template <>
struct Legacy<BlockQ4_1> {
  static constexpr int kOffset = 0, kMaxCode = 15;
  static constexpr bool kHasMin = true;
};
template <>
struct Legacy<BlockQ5_0> {
  static constexpr int kOffset = 16, kMaxCode = 31;
  static constexpr bool kHasMin = false;
};
template <>
struct Legacy<BlockQ5_1> {
  static constexpr int kOffset = 0, kMaxCode = 31;
  static constexpr bool kHasMin = true;
};
template <>  // signed: the sign trick, no offset
struct Legacy<BlockQ8_0> {
  static constexpr int kOffset = 0, kMaxCode = 128;
  static constexpr bool kHasMin = false;
};
// MXFP4's doubled E2M1 values (-12..12) read as value + 12 through a table.
template <>
struct Legacy<BlockMxfp4> {
  static constexpr int kOffset = 12, kMaxCode = 24;
  static constexpr bool kHasMin = false;
};

// Steps of 4 bytes whose 16-bit pair sums (each up to 2 * max_code * 127) add up without
// overflow, as a power of two up to 8.
constexpr int steps_in_16_bits(int max_code) {
  int steps = 8;
  while (steps > 1 && steps * 2 * max_code * 127 > 32767) steps /= 2;
  return steps;
}
static_assert(steps_in_16_bits(15) == 8 && steps_in_16_bits(31) == 4 && steps_in_16_bits(24) == 4);
static_assert(steps_in_16_bits(63) == 2 && steps_in_16_bits(128) == 1);

template <typename Block>
IWB_AVX2_GEMM inline float block_scale(const Block& b) {
  if constexpr (std::is_same_v<Block, BlockMxfp4>) {
    return e8m0_to_f32_half(b.e);
  } else {
    return half(b.d);
  }
}

// One block's 32 weights in element order: unsigned codes, or Q8_0's signed bytes.
template <typename Block>
IWB_AVX2_GEMM inline __m256i unpack_block(const Block& b) {
  if constexpr (std::is_same_v<Block, BlockQ8_0>) {
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qs));
  } else if constexpr (std::is_same_v<Block, BlockMxfp4>) {
    const __m128i values = _mm_loadu_si128(reinterpret_cast<const __m128i*>(kMxfp4Values));
    const __m128i table = _mm_add_epi8(values, _mm_set1_epi8(12));
    return _mm256_shuffle_epi8(_mm256_broadcastsi128_si256(table), nibbles(b.qs));
  } else if constexpr (std::is_same_v<Block, BlockQ5_0> || std::is_same_v<Block, BlockQ5_1>) {
    uint32_t qh;
    std::memcpy(&qh, b.qh, sizeof qh);
    return _mm256_or_si256(nibbles(b.qs), expand_high_bits(qh));
  } else {
    return nibbles(b.qs);
  }
}

// Bytes of one packed block of 8 rows: 8 weight vectors, 8 scales, 8 "+ m".
constexpr int64_t kLegacyBlockBytes = 8 * 32 + 2 * kRows * sizeof(float);

template <typename Block>
IWB_AVX2_GEMM void pack_legacy(const uint8_t* weight, size_t stride, int num_rows, int64_t nb, uint8_t* buffer) {
  const Block* rows[kRows];
  for (int i = 0; i < kRows; ++i) rows[i] = reinterpret_cast<const Block*>(weight + std::min(i, num_rows - 1) * stride);
  for (int64_t b = 0; b < nb; ++b) {
    uint8_t* out = buffer + b * kLegacyBlockBytes;
    __m256i r[8];
#pragma GCC unroll 8
    for (int i = 0; i < kRows; ++i) r[i] = unpack_block(rows[i][b]);
    transpose_dwords(r);
#pragma GCC unroll 8
    for (int k = 0; k < 8; ++k) _mm256_store_si256(reinterpret_cast<__m256i*>(out + 32 * k), r[k]);
    auto* d = reinterpret_cast<float*>(out + 256);
    for (int i = 0; i < kRows; ++i) d[i] = block_scale(rows[i][b]);
    if constexpr (Legacy<Block>::kHasMin) {
      for (int i = 0; i < kRows; ++i) d[kRows + i] = half(rows[i][b].m);
    }
  }
}

// acc[t] (lane i = row i) += dot(row i, token t) over nb blocks, for T tokens.
template <typename Block, int T>
IWB_AVX2_GEMM void legacy_tokens(const uint8_t* packed, int64_t nb, const BlockQ8A* const* a, __m256* acc) {
  using L = Legacy<Block>;
  constexpr int kSteps = steps_in_16_bits(L::kMaxCode);
  const __m256i ones = _mm256_set1_epi16(1);
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* w = packed + b * kLegacyBlockBytes;
    __m256i sum[T];
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) sum[t] = _mm256_setzero_si256();
#pragma GCC unroll 8
    for (int k0 = 0; k0 < 8; k0 += kSteps) {
      __m256i pairs[T];
#pragma GCC unroll 8
      for (int k = k0; k < k0 + kSteps; ++k) {
        const __m256i wk = _mm256_load_si256(reinterpret_cast<const __m256i*>(w + 32 * k));
        if constexpr (std::is_same_v<Block, BlockQ8_0>) {
          const __m256i magnitude = _mm256_sign_epi8(wk, wk);
#pragma GCC unroll 4
          for (int t = 0; t < T; ++t) {
            pairs[t] = _mm256_maddubs_epi16(magnitude, _mm256_sign_epi8(broadcast_4(a[t][b].qs + 4 * k), wk));
          }
        } else {
#pragma GCC unroll 4
          for (int t = 0; t < T; ++t) {
            const __m256i p = _mm256_maddubs_epi16(wk, broadcast_4(a[t][b].qs + 4 * k));
            pairs[t] = k == k0 ? p : add_in_order(pairs[t], p);
          }
        }
      }
#pragma GCC unroll 4
      for (int t = 0; t < T; ++t) sum[t] = _mm256_add_epi32(sum[t], _mm256_madd_epi16(pairs[t], ones));
    }
    const __m256 d = _mm256_load_ps(reinterpret_cast<const float*>(w + 256));
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) {
      const BlockQ8A& x = a[t][b];
      acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum[t]), _mm256_mul_ps(d, _mm256_set1_ps(x.d)), acc[t]);
      if constexpr (L::kOffset != 0)
        acc[t] = _mm256_fmadd_ps(d, _mm256_set1_ps(-static_cast<float>(L::kOffset) * x.s), acc[t]);
      if constexpr (L::kHasMin) {
        acc[t] = _mm256_fmadd_ps(_mm256_load_ps(reinterpret_cast<const float*>(w + 256) + kRows), _mm256_set1_ps(x.s),
                                 acc[t]);
      }
    }
  }
}

// ---- K-quants: super-blocks of 256, integer scales per 32 (Q4_K, Q5_K) or 16 (Q6_K) ----

// Bytes of one packed super-block of 8 rows: 64 weight vectors, then the scale vectors (Q6_K:
// 16 group scales, 8 scale pairs, 8 d; Q4_K/Q5_K use less: 8 scales, 8 mins, 8 d, 8 dmin).
constexpr int64_t kKWeightBytes = 64 * 32;
constexpr int64_t kKSuperBytes = kKWeightBytes + (16 + 8 + 1) * 32;

template <typename Block>
constexpr int kquant_max_code() {
  return std::is_same_v<Block, BlockQ6_K> ? 63 : std::is_same_v<Block, BlockQ5_K> ? 31 : 15;
}

// Elements 32j .. 32j+31 of a super-block as unsigned codes.
template <typename Block>
IWB_AVX2_GEMM inline __m256i unpack_sub_block(const Block& b, int j) {
  const __m256i nibble = _mm256_set1_epi8(0x0F);
  if constexpr (std::is_same_v<Block, BlockQ6_K>) {
    const int h = j / 4, r = j % 4;
    const __m256i ql = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.ql + 64 * h + 32 * (r % 2)));
    const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qh + 32 * h));
    const __m256i low = r < 2 ? _mm256_and_si256(ql, nibble) : _mm256_and_si256(_mm256_srli_epi16(ql, 4), nibble);
    // Bits 2r, 2r+1 of qh are bits 4, 5 of the code.
    const __m256i top = r == 0   ? _mm256_slli_epi16(qh, 4)
                        : r == 1 ? _mm256_slli_epi16(qh, 2)
                        : r == 2 ? qh
                                 : _mm256_srli_epi16(qh, 2);
    return _mm256_or_si256(low, _mm256_and_si256(top, _mm256_set1_epi8(0x30)));
  } else {
    const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qs + 32 * (j / 2)));
    __m256i u = j % 2 == 0 ? _mm256_and_si256(q, nibble) : _mm256_and_si256(_mm256_srli_epi16(q, 4), nibble);
    if constexpr (std::is_same_v<Block, BlockQ5_K>) {
      const __m256i high = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qh));
      const __m256i bit = _mm256_set1_epi8(static_cast<char>(1 << j));
      u = _mm256_or_si256(
          u, _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(high, bit), bit), _mm256_set1_epi8(0x10)));
    }
    return u;
  }
}

inline int32_t pair16(int lo, int hi) {
  return static_cast<int32_t>(static_cast<uint16_t>(lo) | (static_cast<uint32_t>(hi) << 16));
}

template <typename Block>
IWB_AVX2_GEMM void pack_kquant(const uint8_t* weight, size_t stride, int num_rows, int64_t nb, uint8_t* buffer) {
  const Block* rows[kRows];
  for (int i = 0; i < kRows; ++i) rows[i] = reinterpret_cast<const Block*>(weight + std::min(i, num_rows - 1) * stride);
  for (int64_t b = 0; b < nb; ++b) {
    uint8_t* out = buffer + b * kKSuperBytes;
    for (int j = 0; j < 8; ++j) {
      __m256i r[8];
#pragma GCC unroll 8
      for (int i = 0; i < kRows; ++i) r[i] = unpack_sub_block(rows[i][b], j);
      transpose_dwords(r);
#pragma GCC unroll 8
      for (int k = 0; k < 8; ++k) _mm256_store_si256(reinterpret_cast<__m256i*>(out + 256 * j + 32 * k), r[k]);
    }
    auto* scales = reinterpret_cast<int32_t*>(out + kKWeightBytes);
    if constexpr (std::is_same_v<Block, BlockQ6_K>) {
      // [16 groups][8 rows] (scale, scale), [8 group pairs][8 rows] (scale 2p, scale 2p+1), [8] d.
      int32_t* pairs = scales + 16 * kRows;
      auto* d = reinterpret_cast<float*>(pairs + 8 * kRows);
      for (int i = 0; i < kRows; ++i) {
        const int8_t* sc = rows[i][b].scales;
        for (int g = 0; g < 16; ++g) scales[g * kRows + i] = pair16(sc[g], sc[g]);
        for (int p = 0; p < 8; ++p) pairs[p * kRows + i] = pair16(sc[2 * p], sc[2 * p + 1]);
        d[i] = half(rows[i][b].d);
      }
    } else {
      // [8 sub-blocks][8 rows] (scale, scale), [8 sub-blocks][8 rows] (min, min), [8] d, [8] dmin.
      int32_t* mins = scales + 8 * kRows;
      auto* d = reinterpret_cast<float*>(mins + 8 * kRows);
      for (int i = 0; i < kRows; ++i) {
        uint64_t sc, m;
        unpack_k4_scales(rows[i][b].scales, &sc, &m);
        for (int j = 0; j < 8; ++j) scales[j * kRows + i] = pair16(k4_byte(sc, j), k4_byte(sc, j));
        for (int j = 0; j < 8; ++j) mins[j * kRows + i] = pair16(k4_byte(m, j), k4_byte(m, j));
        d[i] = half(rows[i][b].d);
        d[kRows + i] = half(rows[i][b].dmin);
      }
    }
  }
}

IWB_AVX2_GEMM inline __m256i load_vector(const int32_t* p) {
  return _mm256_load_si256(reinterpret_cast<const __m256i*>(p));
}

// acc[t] (lane i = row i) += dot(row i, token t) over nb super-blocks, for T tokens.
template <typename Block, int T>
IWB_AVX2_GEMM void kquant_tokens(const uint8_t* packed, int64_t nb, const BlockQ8_K* const* a, __m256* acc) {
  constexpr bool kIsQ6 = std::is_same_v<Block, BlockQ6_K>;
  constexpr int kSteps = steps_in_16_bits(kquant_max_code<Block>());
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* w = packed + b * kKSuperBytes;
    const auto* scales = reinterpret_cast<const int32_t*>(w + kKWeightBytes);
    __m256i sum[T];
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) sum[t] = _mm256_setzero_si256();
    for (int j = 0; j < 8; ++j) {
      const uint8_t* ws = w + 256 * j;
#pragma GCC unroll 8
      for (int k0 = 0; k0 < 8; k0 += kSteps) {
        __m256i pairs[T];
#pragma GCC unroll 8
        for (int k = k0; k < k0 + kSteps; ++k) {
          const __m256i wk = _mm256_load_si256(reinterpret_cast<const __m256i*>(ws + 32 * k));
#pragma GCC unroll 4
          for (int t = 0; t < T; ++t) {
            const __m256i p = _mm256_maddubs_epi16(wk, broadcast_4(a[t][b].qs + 32 * j + 4 * k));
            pairs[t] = k == k0 ? p : add_in_order(pairs[t], p);
          }
        }
        // Q6_K: steps 0-3 are group 2j, 4-7 group 2j + 1.
        const __m256i scale = load_vector(scales + (kIsQ6 ? 2 * j + k0 / 4 : j) * kRows);
#pragma GCC unroll 4
        for (int t = 0; t < T; ++t) sum[t] = _mm256_add_epi32(sum[t], _mm256_madd_epi16(pairs[t], scale));
      }
    }
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) {
      const BlockQ8_K& x = a[t][b];
      const __m256 xd = _mm256_set1_ps(x.d);
      if constexpr (kIsQ6) {
        // The stored codes are q + 32: take 32 * sum(scale * bsum) off.
        const int32_t* scale_pairs = scales + 16 * kRows;
        __m256i offset = _mm256_setzero_si256();
#pragma GCC unroll 8
        for (int p = 0; p < 8; ++p) {
          offset = _mm256_add_epi32(offset, _mm256_madd_epi16(load_vector(scale_pairs + p * kRows),
                                                              _mm256_set1_epi32(load_i32(x.bsums + 2 * p))));
        }
        const __m256i total = _mm256_sub_epi32(sum[t], _mm256_slli_epi32(offset, 5));
        const __m256 d = _mm256_load_ps(reinterpret_cast<const float*>(scale_pairs + 8 * kRows));
        acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(total), _mm256_mul_ps(d, xd), acc[t]);
      } else {
        // Sub-block j's min against its two sums of 16 activations, one dword of bsums as it
        // is (a broadcast load). Adding each sub-block's two sums in scalar code first took about
        // 30 instructions a token and super-block: Zen 3, one thread, 512 tokens, Q4_K and Q5_K
        // 1536 x 8960 and 8960 x 1536 were about 10% slower (Q4_K 8960 x 1536: 81.7 -> 74.5 ms).
        const int32_t* min_pairs = scales + 8 * kRows;
        __m256i mins = _mm256_setzero_si256();
#pragma GCC unroll 8
        for (int j = 0; j < 8; ++j) {
          mins = _mm256_add_epi32(mins, _mm256_madd_epi16(load_vector(min_pairs + j * kRows),
                                                          _mm256_set1_epi32(load_i32(x.bsums + 2 * j))));
        }
        const auto* d = reinterpret_cast<const float*>(min_pairs + 8 * kRows);
        acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum[t]), _mm256_mul_ps(_mm256_load_ps(d), xd), acc[t]);
        acc[t] = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(mins), _mm256_mul_ps(_mm256_load_ps(d + kRows), xd), acc[t]);
      }
    }
  }
}

// ---- the GEMM entry points (QuantGemmFn) ----

// Tokens in groups of kGroupTokens, the last 1-3 in one group of their own (one at a time,
// each reloaded the whole panel for a quarter of the work); acc starts at the bias, and only
// the panel's num_rows lanes are stored.
template <typename Act, int T, typename Kernel>
IWB_AVX2_GEMM void run_group(Kernel kernel, const uint8_t* packed, int64_t nb, const uint8_t* activation,
                             size_t activation_stride, int64_t t0, const float* bias, int num_rows, float* out,
                             int64_t out_stride) {
  alignas(32) float lanes[kRows] = {};
  if (bias != nullptr) std::copy(bias, bias + num_rows, lanes);
  const Act* a[T];
  __m256 acc[T];
#pragma GCC unroll 4
  for (int t = 0; t < T; ++t) {
    a[t] = reinterpret_cast<const Act*>(activation + (t0 + t) * activation_stride);
    acc[t] = _mm256_load_ps(lanes);
  }
  kernel(packed, nb, a, acc);
  // Unrolled, so acc can stay in registers through the kernel.
#pragma GCC unroll 4
  for (int t = 0; t < T; ++t) {
    float* y = out + (t0 + t) * out_stride;
    if (num_rows == kRows) {
      _mm256_storeu_ps(y, acc[t]);
    } else {
      _mm256_store_ps(lanes, acc[t]);
      std::copy(lanes, lanes + num_rows, y);
    }
  }
}

// Every token of the call: groups of kGroupTokens, then the rest (1-3) as one group.
// kernel_of(std::integral_constant<int, T>) gives the kernel for T tokens.
template <typename Act, typename KernelOf>
IWB_AVX2_GEMM void run_tokens(KernelOf kernel_of, const uint8_t* packed, int64_t nb, const uint8_t* activation,
                              size_t activation_stride, int64_t num_tokens, const float* bias, int num_rows, float* out,
                              int64_t out_stride) {
  auto group = [&](auto tokens, int64_t t0) {
    run_group<Act, decltype(tokens)::value>(kernel_of(tokens), packed, nb, activation, activation_stride, t0, bias,
                                            num_rows, out, out_stride);
  };
  int64_t t0 = 0;
  for (; t0 + kGroupTokens <= num_tokens; t0 += kGroupTokens) group(std::integral_constant<int, kGroupTokens>{}, t0);
  static_assert(kGroupTokens == 4);
  switch (num_tokens - t0) {
    case 3: group(std::integral_constant<int, 3>{}, t0); break;
    case 2: group(std::integral_constant<int, 2>{}, t0); break;
    case 1: group(std::integral_constant<int, 1>{}, t0); break;
    default: break;
  }
}

template <typename Block>
IWB_AVX2_GEMM void gemm_legacy(const uint8_t* weight, size_t weight_stride, int num_rows, const uint8_t* activation,
                               size_t activation_stride, int64_t num_tokens, int64_t n, const float* bias, float* out,
                               int64_t out_stride, uint8_t* buffer) {
  const int64_t nb = n / kQK8_0;
  pack_legacy<Block>(weight, weight_stride, num_rows, nb, buffer);
  run_tokens<BlockQ8A>([](auto tokens) { return legacy_tokens<Block, decltype(tokens)::value>; }, buffer, nb,
                       activation, activation_stride, num_tokens, bias, num_rows, out, out_stride);
}

template <typename Block>
IWB_AVX2_GEMM void gemm_kquant(const uint8_t* weight, size_t weight_stride, int num_rows, const uint8_t* activation,
                               size_t activation_stride, int64_t num_tokens, int64_t n, const float* bias, float* out,
                               int64_t out_stride, uint8_t* buffer) {
  const int64_t nb = n / kQK_K;
  pack_kquant<Block>(weight, weight_stride, num_rows, nb, buffer);
  run_tokens<BlockQ8_K>([](auto tokens) { return kquant_tokens<Block, decltype(tokens)::value>; }, buffer, nb,
                        activation, activation_stride, num_tokens, bias, num_rows, out, out_stride);
}

}  // namespace

size_t quant_gemm_avx2_buffer_bytes(GgmlType type, int64_t n) {
  if (!ggml_type_traits(type).is_quantized) return 0;
  if (ggml_type_traits(type).block_size == kQK_K) return static_cast<size_t>(n / kQK_K * kKSuperBytes);
  return static_cast<size_t>(n / kQK8_0 * kLegacyBlockBytes);
}

QuantGemmFn select_quant_gemm_avx2(GgmlType type) {
  switch (type) {
    case GgmlType::Q4_0: return gemm_legacy<BlockQ4_0>;
    case GgmlType::Q4_1: return gemm_legacy<BlockQ4_1>;
    case GgmlType::Q5_0: return gemm_legacy<BlockQ5_0>;
    case GgmlType::Q5_1: return gemm_legacy<BlockQ5_1>;
    case GgmlType::Q8_0: return gemm_legacy<BlockQ8_0>;
    case GgmlType::MXFP4: return gemm_legacy<BlockMxfp4>;
    case GgmlType::Q4_K: return gemm_kquant<BlockQ4_K>;
    case GgmlType::Q5_K: return gemm_kquant<BlockQ5_K>;
    case GgmlType::Q6_K: return gemm_kquant<BlockQ6_K>;
    default: return nullptr;
  }
}

}  // namespace iwb::detail

#else

namespace iwb::detail {
size_t quant_gemm_avx2_buffer_bytes(GgmlType, int64_t) { return 0; }
QuantGemmFn select_quant_gemm_avx2(GgmlType) { return nullptr; }
}  // namespace iwb::detail

#endif
