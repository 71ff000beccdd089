// Weight unpacking shared by the AVX-512 integer dot products and their register-blocked tile
// twins (private to kernels/src; include only from files whose functions carry IWB_AVX512).
#pragma once

#include "quant_dot.h"
#include "quant_unpack_common.h"

// GCC 12 reports its own AVX-512 intrinsics (their undefined upper halves) as uninitialized
// when they inline (GCC bug 105593); the code is fine.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>

#include <cstddef>
#include <cstring>
#include <type_traits>

#define IWB_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,avx2,fma,f16c,bmi,bmi2")))
// The same plus AVX512-VBMI's byte permutes, for kernels chosen only where has_avx512_vbmi().
#define IWB_AVX512_VBMI \
  __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,avx512vbmi,avx2,fma,f16c,bmi,bmi2")))

namespace iwb::detail::avx512 {

IWB_AVX512 inline float half(uint16_t h) { return _cvtsh_ss(h); }

inline uint32_t load_u32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// ---- 32-element types: weights as unsigned bytes u, x = d * (u - offset) (+ m); MXFP4's d is
// its power-of-two scale (block_scale) ----

template <typename Block>
struct Legacy;
template <>
struct Legacy<BlockQ4_0> {
  static constexpr int kOffset = 8;
  static constexpr bool kHasMin = false, kHasHigh = false;
};
template <>
struct Legacy<BlockQ4_1> {
  static constexpr int kOffset = 0;
  static constexpr bool kHasMin = true, kHasHigh = false;
};
template <>
struct Legacy<BlockQ5_0> {
  static constexpr int kOffset = 16;
  static constexpr bool kHasMin = false, kHasHigh = true;
};
template <>
struct Legacy<BlockQ5_1> {
  static constexpr int kOffset = 0;
  static constexpr bool kHasMin = true, kHasHigh = true;
};
// Q8_0's signed bytes are read as w + 128 (a flipped sign bit): vpdpbusd wants one unsigned side.
template <>
struct Legacy<BlockQ8_0> {
  static constexpr int kOffset = 128;
  static constexpr bool kHasMin = false, kHasHigh = false;
};
// MXFP4's signed E2M1 values (doubled, -12..12) are read as value + 12 (0..24), through a table.
template <>
struct Legacy<BlockMxfp4> {
  static constexpr int kOffset = 12;
  static constexpr bool kHasMin = false, kHasHigh = false;
};

// kMxfp4Values + 12 per code: the unsigned view of MXFP4 the kernels multiply.
alignas(16) inline constexpr uint8_t kMxfp4Unsigned[16] = {12, 13, 14, 15, 16, 18, 20, 24, 12, 11, 10, 9, 8, 6, 4, 0};
static_assert(kMxfp4Unsigned[7] == kMxfp4Values[7] + 12 && kMxfp4Unsigned[15] == kMxfp4Values[15] + 12);

// A block's scale as f32: its fp16 d, or MXFP4's power of two.
template <typename Block>
IWB_AVX512 inline float block_scale(const Block& b) {
  if constexpr (std::is_same_v<Block, BlockMxfp4>) {
    return e8m0_to_f32_half(b.e);
  } else {
    return half(b.d);
  }
}

// The block scales d (and Q4_1/Q5_1's m, the 2 bytes after d) of block b of 16 rows, as f32:
// the fp16 types in two gathers of each row's first 4 bytes (a scalar load, insert and
// conversion per row took 40% of the AMX GEMM's packing, and the packing a third of a Q4_0
// product of 32 tokens), MXFP4's E8M0 exponents one by one. RowOffsets: each row's bytes from
// row 0, made once per 16 rows.
struct RowOffsets {
  __m512i lo, hi;  // rows 0..7, 8..15
};
template <typename Block>
IWB_AVX512 inline RowOffsets row_offsets(const Block* const* rows) {
  alignas(64) int64_t off[16];
  for (int i = 0; i < 16; ++i) off[i] = reinterpret_cast<const char*>(rows[i]) - reinterpret_cast<const char*>(rows[0]);
  return {_mm512_load_si512(off), _mm512_load_si512(off + 8)};
}
template <typename Block>
IWB_AVX512 inline void block_scales(const Block* const* rows, const RowOffsets& offsets, int64_t b, float* d,
                                    float* m) {
  if constexpr (std::is_same_v<Block, BlockMxfp4>) {
    for (int i = 0; i < 16; ++i) d[i] = block_scale(rows[i][b]);
  } else {
    static_assert(offsetof(Block, d) == 0);
    const auto* base = reinterpret_cast<const char*>(rows[0] + b);
    const __m512i words = _mm512_inserti64x4(_mm512_castsi256_si512(_mm512_i64gather_epi32(offsets.lo, base, 1)),
                                             _mm512_i64gather_epi32(offsets.hi, base, 1), 1);
    _mm512_storeu_ps(d, _mm512_cvtph_ps(_mm512_cvtepi32_epi16(words)));
    if constexpr (Legacy<Block>::kHasMin) {
      static_assert(offsetof(Block, m) == 2);
      _mm512_storeu_ps(m, _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(words, 16))));
    }
  }
}

// One block's 32 unsigned weights in element order.
template <typename Block>
IWB_AVX512 inline __m256i unpack_one(const Block& b) {
  if constexpr (std::is_same_v<Block, BlockMxfp4>) {
    const __m128i x = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.qs));
    const __m256i codes = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(x, 4), x), _mm256_set1_epi8(0x0F));
    return _mm256_shuffle_epi8(
        _mm256_broadcastsi128_si256(_mm_load_si128(reinterpret_cast<const __m128i*>(kMxfp4Unsigned))), codes);
  } else if constexpr (std::is_same_v<Block, BlockQ8_0>) {
    return _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qs)), _mm256_set1_epi8(-128));
  } else {
    const __m128i x = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.qs));
    __m256i u = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(x, 4), x), _mm256_set1_epi8(0x0F));
    if constexpr (Legacy<Block>::kHasHigh) {
      u = _mm256_mask_add_epi8(u, static_cast<__mmask32>(load_u32(b.qh)), u, _mm256_set1_epi8(0x10));
    }
    return u;
  }
}

// Two consecutive blocks' 64 unsigned weights in element order.
template <typename Block>
IWB_AVX512 inline __m512i unpack_two(const Block* b) {
  if constexpr (std::is_same_v<Block, BlockQ8_0>) {
    const __m512i w =
        _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b[0].qs))),
                           _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b[1].qs)), 1);
    return _mm512_xor_si512(w, _mm512_set1_epi8(-128));
  } else {
    const __m256i x =
        _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b[0].qs))),
                                _mm_loadu_si128(reinterpret_cast<const __m128i*>(b[1].qs)), 1);
    // [q0, q0, q1, q1] shifted by [0, 4, 0, 4]: low nibbles (elements 0..15), then high (16..31).
    __m512i u = _mm512_permutexvar_epi64(_mm512_setr_epi64(0, 1, 0, 1, 2, 3, 2, 3), _mm512_castsi256_si512(x));
    const __m512i shifts = _mm512_setr_epi64(0, 0, 0x0004000400040004LL, 0x0004000400040004LL, 0, 0,
                                             0x0004000400040004LL, 0x0004000400040004LL);
    u = _mm512_and_si512(_mm512_srlv_epi16(u, shifts), _mm512_set1_epi8(0x0F));
    if constexpr (std::is_same_v<Block, BlockMxfp4>) {
      u = _mm512_shuffle_epi8(_mm512_broadcast_i32x4(_mm_load_si128(reinterpret_cast<const __m128i*>(kMxfp4Unsigned))),
                              u);
    }
    if constexpr (Legacy<Block>::kHasHigh) {
      const uint64_t high = static_cast<uint64_t>(load_u32(b[0].qh)) | (static_cast<uint64_t>(load_u32(b[1].qh)) << 32);
      u = _mm512_mask_add_epi8(u, static_cast<__mmask64>(high), u, _mm512_set1_epi8(0x10));
    }
    return u;
  }
}

// 16-bit lane indices [lo x 16, hi x 16] for vpermw.
IWB_AVX512 inline __m512i halves_epi16(int lo, int hi) {
  return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_set1_epi16(static_cast<short>(lo))),
                            _mm256_set1_epi16(static_cast<short>(hi)), 1);
}

// 16-bit lane indices [i x 8, i+1 x 8, i+2 x 8, i+3 x 8]: the Q6_K scales of 64 elements.
IWB_AVX512 inline __m512i quarter_indices(int first) {
  return _mm512_inserti64x4(
      _mm512_castsi256_si512(
          _mm256_set_m128i(_mm_set1_epi16(static_cast<short>(first + 1)), _mm_set1_epi16(static_cast<short>(first)))),
      _mm256_set_m128i(_mm_set1_epi16(static_cast<short>(first + 3)), _mm_set1_epi16(static_cast<short>(first + 2))),
      1);
}

// ---- K-quants: 64 unsigned weights at a time, in element order ----

// 64 unsigned weights (elements 64c .. 64c+63) of one super-block row.
template <typename Block>
IWB_AVX512 inline __m512i unpack_chunk(const Block& b, int c) {
  if constexpr (std::is_same_v<Block, BlockQ6_K>) {
    const int h = c / 2;
    const __m512i ql = _mm512_loadu_si512(b.ql + 64 * h);
    const __m512i qh = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qh + 32 * h)));
    const __m512i nibble = _mm512_set1_epi8(0x0F), top = _mm512_set1_epi8(0x30);
    if (c % 2 == 0)
      return _mm512_or_si512(_mm512_and_si512(ql, nibble),
                             _mm512_and_si512(_mm512_sllv_epi16(qh, halves_epi16(4, 2)), top));
    return _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(ql, 4), nibble),
                           _mm512_and_si512(_mm512_srlv_epi16(qh, halves_epi16(0, 2)), top));
  } else {
    __m512i q = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qs + 32 * c)));
    q = _mm512_and_si512(_mm512_srlv_epi16(q, halves_epi16(0, 4)), _mm512_set1_epi8(0x0F));
    if constexpr (std::is_same_v<Block, BlockQ5_K>) {
      const __m512i high = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qh)));
      const __m512i bit = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_set1_epi8(static_cast<char>(1 << (2 * c)))),
                                             _mm256_set1_epi8(static_cast<char>(1 << (2 * c + 1))), 1);
      q = _mm512_mask_add_epi8(q, _mm512_test_epi8_mask(high, bit), q, _mm512_set1_epi8(0x10));
    }
    return q;
  }
}

// Per 256-bit half, an 8 x 8 transpose of 32-bit values: z[i] = [row i | row i+8] (8 dwords
// each) becomes z[k] = [dword k of rows 0..7 | dword k of rows 8..15]: the GEMMs' panel layout
// (4 bytes of one weight row per 32-bit column, also an AMX B tile row's "VNNI" order).
IWB_AVX512 inline void transpose_dword_halves(__m512i z[8]) {
  __m512i t[8], u[8];
#pragma GCC unroll 4
  for (int i = 0; i < 4; ++i) {
    t[2 * i] = _mm512_unpacklo_epi32(z[2 * i], z[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_epi32(z[2 * i], z[2 * i + 1]);
  }
#pragma GCC unroll 2
  for (int h = 0; h < 2; ++h) {  // rows 0-3 (h = 0) and 4-7 (h = 1) of each half
    u[4 * h + 0] = _mm512_unpacklo_epi64(t[4 * h], t[4 * h + 2]);
    u[4 * h + 1] = _mm512_unpackhi_epi64(t[4 * h], t[4 * h + 2]);
    u[4 * h + 2] = _mm512_unpacklo_epi64(t[4 * h + 1], t[4 * h + 3]);
    u[4 * h + 3] = _mm512_unpackhi_epi64(t[4 * h + 1], t[4 * h + 3]);
  }
  // u[e] (e < 4) holds dwords e and e + 4 of rows 0-3 in its low and high 128 bits (per half),
  // u[4 + e] the same of rows 4-7.
  const __m512i low = _mm512_setr_epi64(0, 1, 8, 9, 4, 5, 12, 13), high = _mm512_setr_epi64(2, 3, 10, 11, 6, 7, 14, 15);
#pragma GCC unroll 4
  for (int e = 0; e < 4; ++e) {
    z[e] = _mm512_permutex2var_epi64(u[e], low, u[4 + e]);
    z[e + 4] = _mm512_permutex2var_epi64(u[e], high, u[4 + e]);
  }
}

}  // namespace iwb::detail::avx512
