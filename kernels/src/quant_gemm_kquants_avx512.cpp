// AVX-512 VNNI prefill GEMM for the K-quants (Q4_K, Q5_K, Q6_K), the many-token twin of the
// 32-element types' GEMM (quant_gemm_avx512.cpp): 16 weight rows repacked so that 32-bit lane i
// holds 4 consecutive unsigned weights of row i, vpdpbusd against 4 broadcast activation bytes,
// then each sub-block's integer scale per lane (vpmulld) and, per super-block, the f32 scales.
// The Q4_K/Q5_K mins and the Q6_K offset of 32 meet the activations' bsums through vpdpwssd.
// Groups of 4 tokens share every packed weight load (558 against 402 GOPS per Zen 5 core for
// pairs of tokens with the weights reloaded per token).
#include "quant_dot.h"

#if defined(__x86_64__) || defined(__i386__)
#include "quant_avx512_common.h"

#include <algorithm>

namespace iwb::detail {
namespace {

using namespace avx512;

// Bytes of one packed super-block of 16 rows: 64 weight vectors, then the scale vectors.
constexpr int64_t kWeightBytes = 64 * 64;
constexpr int64_t kScaleBytes = 1664;  // Q6_K: 16 scale + 8 scale-pair + 1 d vectors (Q4_K uses less)
constexpr int64_t kSuperBytes = kWeightBytes + kScaleBytes;

// Packs super-block b of 16 rows into out (kSuperBytes, 64-byte aligned).
template <typename Block>
IWB_AVX512 void pack_super_block(const Block* const* rows, int64_t b, uint8_t* out) {
  for (int c = 0; c < 4; ++c) {
    __m512i u[16];
#pragma GCC unroll 16
    for (int i = 0; i < 16; ++i) u[i] = unpack_chunk(rows[i][b], c);
    for (int half = 0; half < 2; ++half) {  // slices 2c (low 256 bits) and 2c+1 (high)
      __m512i z[8];
#pragma GCC unroll 8
      for (int i = 0; i < 8; ++i) {
        z[i] = half == 0 ? _mm512_inserti64x4(u[i], _mm512_castsi512_si256(u[i + 8]), 1)
                         : _mm512_shuffle_i64x2(u[i], u[i + 8], _MM_SHUFFLE(3, 2, 3, 2));
      }
      transpose_dword_halves(z);
      uint8_t* slice = out + (2 * c + half) * 8 * 64;
#pragma GCC unroll 8
      for (int k = 0; k < 8; ++k) _mm512_store_si512(slice + 64 * k, z[k]);
    }
  }
  auto* scales = reinterpret_cast<int32_t*>(out + kWeightBytes);
  if constexpr (std::is_same_v<Block, BlockQ6_K>) {
    // [16 groups][16 rows] scales, [8 group pairs][16 rows] scale pairs (int16 x 2), [16] d.
    int32_t* pairs = scales + 16 * 16;
    auto* d = reinterpret_cast<float*>(pairs + 8 * 16);
    for (int i = 0; i < 16; ++i) {
      const int8_t* sc = rows[i][b].scales;
      for (int g = 0; g < 16; ++g) scales[g * 16 + i] = sc[g];
      for (int j = 0; j < 8; ++j) {
        pairs[j * 16 + i] = static_cast<int32_t>(static_cast<uint16_t>(sc[2 * j])) | (static_cast<int32_t>(sc[2 * j + 1]) << 16);
      }
      d[i] = half(rows[i][b].d);
    }
  } else {
    // [8 sub-blocks][16 rows] scales, [4 sub-block pairs][16 rows] min pairs, [16] d, [16] dmin.
    int32_t* mins = scales + 8 * 16;
    auto* d = reinterpret_cast<float*>(mins + 4 * 16);
    float* dmin = d + 16;
    for (int i = 0; i < 16; ++i) {
      uint64_t sc, m;
      unpack_k4_scales(rows[i][b].scales, &sc, &m);
      for (int j = 0; j < 8; ++j) scales[j * 16 + i] = static_cast<int32_t>((sc >> (8 * j)) & 0xFF);
      for (int j = 0; j < 4; ++j) {
        mins[j * 16 + i] = static_cast<int32_t>(((m >> (16 * j)) & 0xFF) | (((m >> (16 * j + 8)) & 0xFF) << 16));
      }
      d[i] = half(rows[i][b].d);
      dmin[i] = half(rows[i][b].dmin);
    }
  }
}

// Pairs of int16 sums (sub-blocks or groups 2j and 2j+1) of a Q8_K block's bsums, as dwords.
IWB_AVX512 inline void bsum_pairs(const BlockQ8_K& x, bool is_pairs_of_32, int32_t out[8]) {
  const __m256i bs = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.bsums));
  if (is_pairs_of_32) {  // sub-blocks of 32: bsums[2j] + bsums[2j+1], then pairs of those
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out), _mm256_cvtepi32_epi16(_mm256_madd_epi16(bs, _mm256_set1_epi16(1))));
  } else {  // groups of 16: the bsums as they are, two per dword
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), bs);
  }
}

// 4 activation bytes (elements 4k .. 4k+3 of a slice) broadcast to every lane.
IWB_AVX512 inline __m512i broadcast_4(const int8_t* x, int k) {
  return _mm512_set1_epi32(static_cast<int>(load_u32(reinterpret_cast<const uint8_t*>(x) + 4 * k)));
}

// acc[t] (lane i = row i) += dot(row i, token t) over nb super-blocks. Slices run outside the
// tokens, so each packed weight vector is loaded once for all T tokens; per slice and token,
// two chains of four vpdpbusd (its latency) give elements 0..15 and 16..31.
template <typename Block, int T>
IWB_AVX512 void gemm_group(const uint8_t* packed, int64_t nb, const BlockQ8_K* const* a, __m512* acc) {
  constexpr bool kIsQ6 = std::is_same_v<Block, BlockQ6_K>;
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* w = packed + b * kSuperBytes;
    const auto* scales = reinterpret_cast<const int32_t*>(w + kWeightBytes);
    __m512i sumi[T];
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) sumi[t] = _mm512_setzero_si512();
    for (int s = 0; s < 8; ++s) {
      const uint8_t* ws = w + s * 512;
      __m512i lo[T], hi[T];
#pragma GCC unroll 4
      for (int t = 0; t < T; ++t) lo[t] = hi[t] = _mm512_setzero_si512();
#pragma GCC unroll 4
      for (int k = 0; k < 4; ++k) {
        const __m512i w0 = _mm512_load_si512(ws + 64 * k), w1 = _mm512_load_si512(ws + 64 * (k + 4));
#pragma GCC unroll 4
        for (int t = 0; t < T; ++t) {
          const int8_t* x = a[t][b].qs + 32 * s;
          lo[t] = _mm512_dpbusd_epi32(lo[t], w0, broadcast_4(x, k));
          hi[t] = _mm512_dpbusd_epi32(hi[t], w1, broadcast_4(x, k + 4));
        }
      }
      if constexpr (kIsQ6) {
        const __m512i s0 = _mm512_load_si512(scales + (2 * s) * 16), s1 = _mm512_load_si512(scales + (2 * s + 1) * 16);
#pragma GCC unroll 4
        for (int t = 0; t < T; ++t) {
          sumi[t] = _mm512_add_epi32(sumi[t], _mm512_add_epi32(_mm512_mullo_epi32(lo[t], s0), _mm512_mullo_epi32(hi[t], s1)));
        }
      } else {
        const __m512i sc = _mm512_load_si512(scales + s * 16);
#pragma GCC unroll 4
        for (int t = 0; t < T; ++t) sumi[t] = _mm512_add_epi32(sumi[t], _mm512_mullo_epi32(_mm512_add_epi32(lo[t], hi[t]), sc));
      }
    }
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) {
      const BlockQ8_K& x = a[t][b];
      alignas(32) int32_t pairs[8];
      bsum_pairs(x, !kIsQ6, pairs);
      const __m512 xd = _mm512_set1_ps(x.d);
      if constexpr (kIsQ6) {
        // The stored quants are q + 32: take 32 * sum(scale * bsum) off.
        const int32_t* scale_pairs = scales + 16 * 16;
        __m512i off = _mm512_setzero_si512();
#pragma GCC unroll 8
        for (int j = 0; j < 8; ++j) off = _mm512_dpwssd_epi32(off, _mm512_load_si512(scale_pairs + j * 16), _mm512_set1_epi32(pairs[j]));
        const __m512i total = _mm512_sub_epi32(sumi[t], _mm512_slli_epi32(off, 5));
        const __m512 d = _mm512_load_ps(reinterpret_cast<const float*>(scale_pairs + 8 * 16));
        acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(total), _mm512_mul_ps(d, xd), acc[t]);
      } else {
        const int32_t* min_pairs = scales + 8 * 16;
        __m512i mins = _mm512_setzero_si512();
#pragma GCC unroll 4
        for (int j = 0; j < 4; ++j) mins = _mm512_dpwssd_epi32(mins, _mm512_load_si512(min_pairs + j * 16), _mm512_set1_epi32(pairs[j]));
        const auto* d = reinterpret_cast<const float*>(min_pairs + 4 * 16);
        acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sumi[t]), _mm512_mul_ps(_mm512_load_ps(d), xd), acc[t]);
        acc[t] = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(mins), _mm512_mul_ps(_mm512_load_ps(d + 16), xd), acc[t]);
      }
    }
  }
}

template <typename Block, int T>
IWB_AVX512 void gemm_tokens(const uint8_t* packed, int64_t nb, const uint8_t* activation, size_t activation_stride,
                            int64_t t0, __m512 bias, __mmask16 rows_mask, float* out, int64_t out_stride) {
  const BlockQ8_K* a[T];
  __m512 acc[T];
#pragma GCC unroll 4
  for (int t = 0; t < T; ++t) {
    a[t] = reinterpret_cast<const BlockQ8_K*>(activation + (t0 + t) * activation_stride);
    acc[t] = bias;
  }
  gemm_group<Block, T>(packed, nb, a, acc);
#pragma GCC unroll 4
  for (int t = 0; t < T; ++t) _mm512_mask_storeu_ps(out + (t0 + t) * out_stride, rows_mask, acc[t]);
}

template <typename Block>
IWB_AVX512 void gemm_kquant(const uint8_t* weight, size_t weight_stride, int num_rows, const uint8_t* activation,
                            size_t activation_stride, int64_t num_tokens, int64_t n, const float* bias, float* out,
                            int64_t out_stride, uint8_t* buffer) {
  const int64_t nb = n / kQK_K;
  const Block* rows[16];
  for (int i = 0; i < 16; ++i) rows[i] = reinterpret_cast<const Block*>(weight + std::min(i, num_rows - 1) * weight_stride);
  for (int64_t b = 0; b < nb; ++b) pack_super_block(rows, b, buffer + b * kSuperBytes);
  const __mmask16 rows_mask = static_cast<__mmask16>((1u << num_rows) - 1);
  const __m512 bv = bias ? _mm512_maskz_loadu_ps(rows_mask, bias) : _mm512_setzero_ps();
  int64_t t0 = 0;
  for (; t0 + 4 <= num_tokens; t0 += 4) gemm_tokens<Block, 4>(buffer, nb, activation, activation_stride, t0, bv, rows_mask, out, out_stride);
  for (; t0 < num_tokens; ++t0) gemm_tokens<Block, 1>(buffer, nb, activation, activation_stride, t0, bv, rows_mask, out, out_stride);
}

}  // namespace

size_t quant_gemm_kquant_buffer_bytes(int64_t n) { return static_cast<size_t>(n / kQK_K * kSuperBytes); }

QuantGemmFn select_quant_gemm_kquant_avx512(GgmlType type) {
  switch (type) {
    case GgmlType::Q4_K: return gemm_kquant<BlockQ4_K>;
    case GgmlType::Q5_K: return gemm_kquant<BlockQ5_K>;
    case GgmlType::Q6_K: return gemm_kquant<BlockQ6_K>;
    default: return nullptr;
  }
}

}  // namespace iwb::detail

#else

namespace iwb::detail {
size_t quant_gemm_kquant_buffer_bytes(int64_t) { return 0; }
QuantGemmFn select_quant_gemm_kquant_avx512(GgmlType) { return nullptr; }
}  // namespace iwb::detail

#endif
