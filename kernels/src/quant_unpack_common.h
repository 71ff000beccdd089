// Unpacking helpers shared by the CPU kernel families (private to kernels/src): the Q4_K/Q5_K
// scale bytes (scalar, any target; or in a vector, SSSE3), the Q5 fifth-bit expansion of the
// 256-bit kernels and the 8 x 8 transpose of the AVX2 GEMMs' panels (AVX2: callable from
// functions whose target includes AVX2, the AVX2, AVX-VNNI and AVX-512 files).
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>

namespace iwb::detail {

// The 6-bit scales (bytes 0..7 of *sc) and mins (*m) of a Q4_K/Q5_K block, as
// unpack_scale_min_k4 lays them out, four at a time.
inline void unpack_k4_scales(const uint8_t* packed, uint64_t* sc, uint64_t* m) {
  uint32_t s[3];
  std::memcpy(s, packed, sizeof s);
  const uint32_t sc_lo = s[0] & 0x3f3f3f3fu, m_lo = s[1] & 0x3f3f3f3fu;
  const uint32_t sc_hi = (s[2] & 0x0f0f0f0fu) | (((s[0] >> 6) & 0x03030303u) << 4);
  const uint32_t m_hi = ((s[2] >> 4) & 0x0f0f0f0fu) | (((s[1] >> 6) & 0x03030303u) << 4);
  *sc = sc_lo | (static_cast<uint64_t>(sc_hi) << 32);
  *m = m_lo | (static_cast<uint64_t>(m_hi) << 32);
}

#if defined(__x86_64__) || defined(__i386__)
// The same in a vector register: bytes 0..7 the scales, 8..15 the mins. Reads 16 bytes from
// `packed` (the 12 scale bytes and 4 of what follows them in the block). In the AVX-512 decode
// kernel (Xeon model 207) this replaced the scalar unpack and the moves of its two words into
// vectors: rows in L1 16-20% faster, in L3 3-4%, streamed from memory through the decode
// driver's loop 3-4% with one thread and about 3% with two (docs/benchmarks.md, twenty-ninth
// session: measured in one process, alternating, as separate runs could not resolve it).
__attribute__((target("ssse3"))) inline __m128i unpack_k4_scales_vector(const uint8_t* packed) {
  const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(packed));
  // p: s0..3 (scales 0..3), s8..11 (their low nibbles: scales 4..7), s4..7 (mins 0..3), s8..11
  // (high nibbles: mins 4..7); q: the bytes whose top two bits complete scales and mins 4..7.
  const __m128i p = _mm_shuffle_epi8(v, _mm_setr_epi8(0, 1, 2, 3, 8, 9, 10, 11, 4, 5, 6, 7, 8, 9, 10, 11));
  const __m128i q = _mm_shuffle_epi8(v, _mm_setr_epi8(-1, -1, -1, -1, 0, 1, 2, 3, -1, -1, -1, -1, 4, 5, 6, 7));
  const __m128i low = _mm_and_si128(
      p, _mm_setr_epi8(0x3f, 0x3f, 0x3f, 0x3f, 0x0f, 0x0f, 0x0f, 0x0f, 0x3f, 0x3f, 0x3f, 0x3f, 0, 0, 0, 0));
  const __m128i top =
      _mm_and_si128(_mm_srli_epi16(p, 4), _mm_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x0f, 0x0f, 0x0f, 0x0f));
  // (byte >> 6) << 4: the 16-bit shift moves each byte's bits 6..7 to 4..5.
  const __m128i high = _mm_and_si128(_mm_srli_epi16(q, 2), _mm_set1_epi8(0x30));
  return _mm_or_si128(_mm_or_si128(low, top), high);
}
#endif

// Byte j of an unpacked scale or min word.
inline int k4_byte(uint64_t word, int j) { return static_cast<int>((word >> (8 * j)) & 0xFF); }

#if defined(__x86_64__) || defined(__i386__)
// 0x10 in byte j where bit j of `bits` is set (the fifth bit of Q5_0/Q5_1 element j).
__attribute__((target("avx2"))) inline __m256i expand_high_bits(uint32_t bits) {
  const __m256i spread =
      _mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int>(bits)),
                          _mm256_setr_epi64x(0, 0x0101010101010101LL, 0x0202020202020202LL, 0x0303030303030303LL));
  const __m256i bit = _mm256_set1_epi64x(static_cast<long long>(0x8040201008040201ULL));
  return _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit), _mm256_set1_epi8(0x10));
}

// 8 x 8 transpose of 32-bit values: r[i] = the 8 dwords of row i becomes r[k] = dword k (bytes
// 4k .. 4k+3, or float k) of rows 0..7: the AVX2 GEMMs' panel layout.
__attribute__((target("avx2"))) inline void transpose_dwords(__m256i r[8]) {
  __m256i t[8], u[8];
#pragma GCC unroll 4
  for (int i = 0; i < 4; ++i) {
    t[2 * i] = _mm256_unpacklo_epi32(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm256_unpackhi_epi32(r[2 * i], r[2 * i + 1]);
  }
#pragma GCC unroll 2
  for (int h = 0; h < 2; ++h) {  // rows 0-3 (h = 0) and 4-7 (h = 1)
    u[4 * h + 0] = _mm256_unpacklo_epi64(t[4 * h], t[4 * h + 2]);
    u[4 * h + 1] = _mm256_unpackhi_epi64(t[4 * h], t[4 * h + 2]);
    u[4 * h + 2] = _mm256_unpacklo_epi64(t[4 * h + 1], t[4 * h + 3]);
    u[4 * h + 3] = _mm256_unpackhi_epi64(t[4 * h + 1], t[4 * h + 3]);
  }
  // u[e] holds dwords e (low 128 bits) and e + 4 (high) of rows 0-3, u[4 + e] those of rows 4-7.
#pragma GCC unroll 4
  for (int e = 0; e < 4; ++e) {
    r[e] = _mm256_permute2x128_si256(u[e], u[4 + e], 0x20);
    r[e + 4] = _mm256_permute2x128_si256(u[e], u[4 + e], 0x31);
  }
}

#endif

}  // namespace iwb::detail
