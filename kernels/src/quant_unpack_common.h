// Unpacking helpers shared by the CPU kernel families (private to kernels/src): the Q4_K/Q5_K
// scale bytes (scalar, any target) and the Q5 fifth-bit expansion of the 256-bit kernels (AVX2:
// callable from functions whose target includes AVX2, the AVX2, AVX-VNNI and AVX-512 files).
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
#endif

}  // namespace iwb::detail
