// Decode attention (see paged_attention_decode.h). Per item, for each tile of 64 keys: the
// scores of its R query rows (four or two keys at a time, each key's row read once and multiplied
// into R accumulators, the 16 keys' vectors then summed into one vector of 16 scores), the
// online softmax per row, and the values added into R x C output vectors held in registers
// (C columns of 16 at a time, R x C <= 24). A quantized cache side is expanded to f32 per tile
// first (and the queries and outputs rotated, as the tiled kernel does).
#include "paged_attention_decode.h"

#include "paged_attention_decode_driver.h"

#if defined(__x86_64__) || defined(__i386__)
#include "simd_math_avx512.h"

#include <algorithm>
#include <cmath>

#define IWB_AVX512 __attribute__((target("avx512f,avx512dq,avx2,fma,f16c")))

namespace iwb::detail {
namespace {

constexpr int64_t kKeyTile = kDecodeKeyTile;
constexpr int kMaxRows = kDecodeMaxRows;

// Values d .. d + 15 of a row (d a multiple of 16).
template <DecodeRows kRows>
IWB_AVX512 inline __m512 load16(const void* row, int64_t d) {
  if constexpr (kRows == DecodeRows::F16) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(static_cast<const uint16_t*>(row) + d)));
  } else if constexpr (kRows == DecodeRows::Q8_0) {
    // Block d / 32: its f16 scale times the 16 int8 from d % 32 (dequantize_q8_0's d * q).
    const auto* block = static_cast<const uint8_t*>(row) + d / 32 * 34;
    const __m512 scale = _mm512_set1_ps(_cvtsh_ss(*reinterpret_cast<const uint16_t*>(block)));
    const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(block + 2 + d % 32));
    return _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q)), scale);
  } else if constexpr (kRows == DecodeRows::Q4_0) {
    // Block d / 32: its scale times (nibble - 8), low nibbles for d % 32 = 0, high for 16.
    const auto* block = static_cast<const uint8_t*>(row) + d / 32 * 18;
    const __m512 scale = _mm512_set1_ps(_cvtsh_ss(*reinterpret_cast<const uint16_t*>(block)));
    __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(block + 2));
    if (d % 32 != 0) q = _mm_srli_epi16(q, 4);
    const __m512i v =
        _mm512_sub_epi32(_mm512_cvtepu8_epi32(_mm_and_si128(q, _mm_set1_epi8(0x0F))), _mm512_set1_epi32(8));
    return _mm512_mul_ps(_mm512_cvtepi32_ps(v), scale);
  } else {
    return _mm512_loadu_ps(static_cast<const float*>(row) + d);
  }
}

// The 16 vectors' sums as one vector: element i = sum of v[i]'s elements.
IWB_AVX512 inline __m512 sum16(const __m512* v) {
  __m512 t[8], u[4];
#pragma GCC unroll 8
  for (int i = 0; i < 8; ++i) {  // per 128-bit lane: [a0+a2, b0+b2, a1+a3, b1+b3]
    t[i] = _mm512_add_ps(_mm512_unpacklo_ps(v[2 * i], v[2 * i + 1]), _mm512_unpackhi_ps(v[2 * i], v[2 * i + 1]));
  }
#pragma GCC unroll 4
  for (int i = 0; i < 4; ++i) {  // per lane: the lane's sums of v[4i .. 4i + 3]
    const __m512d a = _mm512_castps_pd(t[2 * i]), b = _mm512_castps_pd(t[2 * i + 1]);
    u[i] = _mm512_add_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(a, b)), _mm512_castpd_ps(_mm512_unpackhi_pd(a, b)));
  }
  // Lanes summed: lane k of the result holds u[k]'s four totals.
  const __m512 y = _mm512_add_ps(_mm512_shuffle_f32x4(u[0], u[1], 0x88), _mm512_shuffle_f32x4(u[0], u[1], 0xDD));
  const __m512 z = _mm512_add_ps(_mm512_shuffle_f32x4(u[2], u[3], 0x88), _mm512_shuffle_f32x4(u[2], u[3], 0xDD));
  return _mm512_add_ps(_mm512_shuffle_f32x4(y, z, 0x88), _mm512_shuffle_f32x4(y, z, 0xDD));
}

// s[r * kKeyTile + j] = q[r] . key[j] for j < nk (entries up to the next multiple of 16: 0).
template <int R, DecodeRows kRows>
IWB_AVX512 void score_tile(const float* q, int64_t dk, const void* const* keys, int64_t nk, float* s, __m512* part,
                           const DecodeAhead& ahead) {
  for (int64_t j0 = 0; j0 < nk; j0 += 16) {
    const int64_t n = std::min<int64_t>(16, nk - j0);
    int64_t j = 0;
    // Four keys at a time where their 4R accumulators, four key vectors and a query vector fit
    // the 32 registers (R <= 6): each query vector is loaded once per four keys, and the loop's
    // and prefetches' overhead is shared by four (Xeon model 207, bench_paged_attention with the
    // cache in L2, one thread: 10.1-10.4 -> 12.8 GB/s of cache; from memory, two threads, +3-4%).
    if constexpr (4 * R + 5 <= 32) {
      for (; j + 4 <= n; j += 4) {
#pragma GCC unroll 4
        for (int i = 0; i < 4; ++i) ahead.fetch_k(j0 + j + i);
        __m512 acc[4][R];
#pragma GCC unroll 4
        for (int i = 0; i < 4; ++i) {
#pragma GCC unroll 8
          for (int r = 0; r < R; ++r) acc[i][r] = _mm512_setzero_ps();
        }
        const void* kr[4] = {keys[j0 + j], keys[j0 + j + 1], keys[j0 + j + 2], keys[j0 + j + 3]};
        for (int64_t d = 0; d < dk; d += 16) {
          __m512 x[4];
#pragma GCC unroll 4
          for (int i = 0; i < 4; ++i) x[i] = load16<kRows>(kr[i], d);
#pragma GCC unroll 8
          for (int r = 0; r < R; ++r) {
            const __m512 qv = _mm512_loadu_ps(q + r * dk + d);
#pragma GCC unroll 4
            for (int i = 0; i < 4; ++i) acc[i][r] = _mm512_fmadd_ps(qv, x[i], acc[i][r]);
          }
        }
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r) {
#pragma GCC unroll 4
          for (int i = 0; i < 4; ++i) part[r * 16 + j + i] = acc[i][r];
        }
      }
    }
    for (; j + 2 <= n; j += 2) {  // two keys: 2R independent chains of multiply-adds
      ahead.fetch_k(j0 + j);
      ahead.fetch_k(j0 + j + 1);
      __m512 a0[R], a1[R];
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) a0[r] = a1[r] = _mm512_setzero_ps();
      const void* k0 = keys[j0 + j];
      const void* k1 = keys[j0 + j + 1];
      for (int64_t d = 0; d < dk; d += 16) {
        const __m512 x0 = load16<kRows>(k0, d), x1 = load16<kRows>(k1, d);
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r) {
          const __m512 qv = _mm512_loadu_ps(q + r * dk + d);
          a0[r] = _mm512_fmadd_ps(qv, x0, a0[r]);
          a1[r] = _mm512_fmadd_ps(qv, x1, a1[r]);
        }
      }
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        part[r * 16 + j] = a0[r];
        part[r * 16 + j + 1] = a1[r];
      }
    }
    for (; j < n; ++j) {
      ahead.fetch_k(j0 + j);
      __m512 a[R];
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) a[r] = _mm512_setzero_ps();
      for (int64_t d = 0; d < dk; d += 16) {
        const __m512 x = load16<kRows>(keys[j0 + j], d);
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r) a[r] = _mm512_fmadd_ps(_mm512_loadu_ps(q + r * dk + d), x, a[r]);
      }
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) part[r * 16 + j] = a[r];
    }
    for (; j < 16; ++j) {
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) part[r * 16 + j] = _mm512_setzero_ps();
    }
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) _mm512_storeu_ps(s + r * kKeyTile + j0, sum16(part + r * 16));
  }
}

// One row's tile of nk scores through the online softmax: soft-capped, then replaced by
// exp(score - m_new); m and l move on, corr = exp(m_old - m_new) rescales the row's output.
IWB_AVX512 void softmax_tile(float* s, int64_t nk, float softcap, float& m, float& l, float& corr) {
  const int64_t chunks = (nk + 15) / 16;
  __m512 vmax = _mm512_set1_ps(-INFINITY);
  for (int64_t c = 0; c < chunks; ++c) {
    const __mmask16 mask = static_cast<__mmask16>(nk - 16 * c >= 16 ? 0xFFFF : (1u << (nk - 16 * c)) - 1);
    __m512 x = _mm512_maskz_loadu_ps(mask, s + 16 * c);
    if (softcap > 0.0f) x = soft_cap_avx512(x, softcap);
    x = _mm512_mask_mov_ps(_mm512_set1_ps(-INFINITY), mask, x);
    _mm512_storeu_ps(s + 16 * c, x);
    vmax = _mm512_max_ps(vmax, x);
  }
  const float m_new = std::max(m, _mm512_reduce_max_ps(vmax));
  const __m512 mv = _mm512_set1_ps(m_new);
  __m512 vsum = _mm512_setzero_ps();
  for (int64_t c = 0; c < chunks; ++c) {
    const __mmask16 mask = static_cast<__mmask16>(nk - 16 * c >= 16 ? 0xFFFF : (1u << (nk - 16 * c)) - 1);
    const __m512 e = _mm512_maskz_mov_ps(mask, exp_avx512(_mm512_sub_ps(_mm512_loadu_ps(s + 16 * c), mv)));
    _mm512_storeu_ps(s + 16 * c, e);
    vsum = _mm512_add_ps(vsum, e);
  }
  corr = std::exp(m - m_new);  // 0 on the first tile (m = -inf) without a sink
  l = l * corr + _mm512_reduce_add_ps(vsum);
  m = m_new;
}

// o[r][col0 .. col0 + 16C) = o * corr[r] + sum_j p[r][j] * value[j], in registers over the tile;
// bytes [fetch_offset, fetch_offset + fetch_bytes) of each key's V row ahead prefetched.
template <int R, int C, DecodeRows kRows>
IWB_AVX512 void add_values(float* o, int64_t dv, int64_t col0, const float* p, const float* corr,
                           const void* const* values, int64_t nk, const DecodeAhead& ahead, int64_t fetch_offset,
                           int64_t fetch_bytes) {
  __m512 acc[R][C];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    const __m512 c = _mm512_set1_ps(corr[r]);
#pragma GCC unroll 8
    for (int x = 0; x < C; ++x) acc[r][x] = _mm512_mul_ps(_mm512_loadu_ps(o + r * dv + col0 + 16 * x), c);
  }
  for (int64_t j = 0; j < nk; ++j) {
    ahead.fetch_v(j, fetch_offset, fetch_bytes);
    __m512 v[C];
#pragma GCC unroll 8
    for (int x = 0; x < C; ++x) v[x] = load16<kRows>(values[j], col0 + 16 * x);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const __m512 pj = _mm512_set1_ps(p[r * kKeyTile + j]);
#pragma GCC unroll 8
      for (int x = 0; x < C; ++x) acc[r][x] = _mm512_fmadd_ps(pj, v[x], acc[r][x]);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 8
    for (int x = 0; x < C; ++x) _mm512_storeu_ps(o + r * dv + col0 + 16 * x, acc[r][x]);
  }
}

// Each column pass prefetches the part of the next rows it will read (f16, Q8_0), or, for rows
// expanded from a quantized side, the first pass the whole source row.
template <int R, DecodeRows kRows>
IWB_AVX512 void add_values_all(float* o, int64_t dv, const float* p, const float* corr, const void* const* values,
                               int64_t nk, const DecodeAhead& ahead) {
  constexpr int C = R <= 3 ? 8 : R <= 6 ? 4 : 2;  // R x C accumulators, at most 24 registers
  auto fetch_offset = [&](int64_t col) -> int64_t {
    return kRows == DecodeRows::F16    ? 2 * col
           : kRows == DecodeRows::Q8_0 ? col / 32 * 34
           : kRows == DecodeRows::Q4_0 ? col / 32 * 18
                                       : 0;
  };
  auto fetch_bytes = [&](int64_t col, int64_t cols) -> int64_t {
    return kRows == DecodeRows::F16    ? 2 * cols
           : kRows == DecodeRows::Q8_0 ? (col + cols + 31) / 32 * 34 - col / 32 * 34
           : kRows == DecodeRows::Q4_0 ? (col + cols + 31) / 32 * 18 - col / 32 * 18
           : col == 0                  ? ahead.v_bytes
                                       : 0;
  };
  int64_t col = 0;
  for (; col + 16 * C <= dv; col += 16 * C) {
    add_values<R, C, kRows>(o, dv, col, p, corr, values, nk, ahead, fetch_offset(col), fetch_bytes(col, 16 * C));
  }
  for (; col < dv; col += 16) {
    add_values<R, 1, kRows>(o, dv, col, p, corr, values, nk, ahead, fetch_offset(col), fetch_bytes(col, 16));
  }
}

// The tile kernels run_paged_attention_decode calls (paged_attention_decode_driver.h).
struct Avx512DecodeKernels {
  static constexpr int64_t kColumnUnit = 16;
  static constexpr bool kReadsBlocks = true;
  template <int R>
  IWB_AVX512 static void score_tile(const float* q, int64_t dk, const void* const* keys, DecodeRows rows, int64_t nk,
                                    float* s, float* part, const DecodeAhead& ahead) {
    auto* vectors = reinterpret_cast<__m512*>(part);
    static_assert(kMaxRows * 16 * 16 <= kDecodePartFloats);
    switch (rows) {
      case DecodeRows::F16: iwb::detail::score_tile<R, DecodeRows::F16>(q, dk, keys, nk, s, vectors, ahead); break;
      case DecodeRows::Q8_0: iwb::detail::score_tile<R, DecodeRows::Q8_0>(q, dk, keys, nk, s, vectors, ahead); break;
      case DecodeRows::Q4_0: iwb::detail::score_tile<R, DecodeRows::Q4_0>(q, dk, keys, nk, s, vectors, ahead); break;
      case DecodeRows::F32: iwb::detail::score_tile<R, DecodeRows::F32>(q, dk, keys, nk, s, vectors, ahead); break;
    }
  }
  IWB_AVX512 static void softmax_tile(float* s, int64_t nk, float softcap, float& m, float& l, float& corr) {
    iwb::detail::softmax_tile(s, nk, softcap, m, l, corr);
  }
  template <int R>
  IWB_AVX512 static void add_values_all(float* o, int64_t dv, const float* p, const float* corr,
                                        const void* const* values, DecodeRows rows, int64_t nk,
                                        const DecodeAhead& ahead) {
    switch (rows) {
      case DecodeRows::F16: iwb::detail::add_values_all<R, DecodeRows::F16>(o, dv, p, corr, values, nk, ahead); break;
      case DecodeRows::Q8_0: iwb::detail::add_values_all<R, DecodeRows::Q8_0>(o, dv, p, corr, values, nk, ahead); break;
      case DecodeRows::Q4_0: iwb::detail::add_values_all<R, DecodeRows::Q4_0>(o, dv, p, corr, values, nk, ahead); break;
      case DecodeRows::F32: iwb::detail::add_values_all<R, DecodeRows::F32>(o, dv, p, corr, values, nk, ahead); break;
    }
  }
};

}  // namespace

bool paged_attention_decode(const PagedAttentionArgs& a) {
  if (cpu_path() == CpuPath::Avx512) return run_paged_attention_decode<Avx512DecodeKernels>(a);
  return paged_attention_decode_avx2(a);
}

}  // namespace iwb::detail

#else

namespace iwb::detail {
bool paged_attention_decode(const PagedAttentionArgs&) { return false; }
}  // namespace iwb::detail

#endif
