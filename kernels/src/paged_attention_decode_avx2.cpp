// Decode attention's tile kernels for AVX2 (see paged_attention_decode.h; the plan and the
// per-item loop are paged_attention_decode_driver.h's). Without these, CPUs without AVX-512
// took the per-pair loop, which reads each KV head's keys once per query head and was the
// limit at depth: the default model's tg32 @ d8192 ran at 7.3 tokens/s on a Zen 3 core pair,
// level with llama.cpp, against 24 at depth 0.
//
// The same shape as the AVX-512 kernels with 8 lanes and 16 registers: scores of up to four
// query rows at a time, two keys each (8 accumulators; five to eight rows go as four and the
// rest, the second pass reading the tile's keys from L1), the online softmax 8 scores at a time,
// and the values added into R x C output vectors of 8 held in registers (R x C <= 12).
#include "paged_attention_decode.h"

#include "paged_attention_decode_driver.h"

#if defined(__x86_64__) || defined(__i386__)
#include "simd_math_avx2.h"

#include <algorithm>
#include <cmath>

#define IWB_AVX2 __attribute__((target("avx2,fma,f16c")))

namespace iwb::detail {
namespace {

constexpr int64_t kKeyTile = kDecodeKeyTile;
constexpr int kScoreRows = 4;  // query rows per pass over a tile's keys

template <bool kF16>
IWB_AVX2 inline __m256 load8(const void* row, int64_t d) {
  if constexpr (kF16) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(static_cast<const uint16_t*>(row) + d)));
  } else {
    return _mm256_loadu_ps(static_cast<const float*>(row) + d);
  }
}

// The 8 vectors' sums as one vector: element i = sum of v[i]'s elements.
IWB_AVX2 inline __m256 sum8(const __m256* v) {
  // Per 128-bit lane: hadd(v0, v1) = [v0 pairs, v1 pairs]; a second hadd leaves each of four
  // vectors' lane sums, and the two lanes then add.
  const __m256 u0 = _mm256_hadd_ps(_mm256_hadd_ps(v[0], v[1]), _mm256_hadd_ps(v[2], v[3]));
  const __m256 u1 = _mm256_hadd_ps(_mm256_hadd_ps(v[4], v[5]), _mm256_hadd_ps(v[6], v[7]));
  return _mm256_add_ps(_mm256_permute2f128_ps(u0, u1, 0x20), _mm256_permute2f128_ps(u0, u1, 0x31));
}

// s[r * kKeyTile + j] = q[r] . key[j] for j < nk, R <= kScoreRows rows (entries up to the next
// multiple of 8: 0). ahead null: no prefetch (a second pass over the same keys).
template <int R, bool kF16>
IWB_AVX2 void score_rows(const float* q, int64_t dk, const void* const* keys, int64_t nk, float* s, __m256* part,
                         const DecodeAhead* ahead) {
  static_assert(R >= 1 && R <= kScoreRows);
  for (int64_t j0 = 0; j0 < nk; j0 += 8) {
    const int64_t n = std::min<int64_t>(8, nk - j0);
    int64_t j = 0;
    for (; j + 2 <= n; j += 2) {  // two keys: 2R independent chains of multiply-adds
      if (ahead != nullptr) {
        ahead->fetch_k(j0 + j);
        ahead->fetch_k(j0 + j + 1);
      }
      __m256 a0[R], a1[R];
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) a0[r] = a1[r] = _mm256_setzero_ps();
      const void* k0 = keys[j0 + j];
      const void* k1 = keys[j0 + j + 1];
      for (int64_t d = 0; d < dk; d += 8) {
        const __m256 x0 = load8<kF16>(k0, d), x1 = load8<kF16>(k1, d);
#pragma GCC unroll 4
        for (int r = 0; r < R; ++r) {
          const __m256 qv = _mm256_loadu_ps(q + r * dk + d);
          a0[r] = _mm256_fmadd_ps(qv, x0, a0[r]);
          a1[r] = _mm256_fmadd_ps(qv, x1, a1[r]);
        }
      }
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) {
        part[r * 8 + j] = a0[r];
        part[r * 8 + j + 1] = a1[r];
      }
    }
    for (; j < n; ++j) {
      if (ahead != nullptr) ahead->fetch_k(j0 + j);
      __m256 a[R];
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) a[r] = _mm256_setzero_ps();
      for (int64_t d = 0; d < dk; d += 8) {
        const __m256 x = load8<kF16>(keys[j0 + j], d);
#pragma GCC unroll 4
        for (int r = 0; r < R; ++r) a[r] = _mm256_fmadd_ps(_mm256_loadu_ps(q + r * dk + d), x, a[r]);
      }
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) part[r * 8 + j] = a[r];
    }
    for (; j < 8; ++j) {
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) part[r * 8 + j] = _mm256_setzero_ps();
    }
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) _mm256_storeu_ps(s + r * kKeyTile + j0, sum8(part + r * 8));
  }
}

// Lanes below `count` (of 8) all ones.
IWB_AVX2 inline __m256 first_lanes(int64_t count) {
  return _mm256_castsi256_ps(
      _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(count)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7)));
}

// o[r][col0 .. col0 + 8C) = o * corr[r] + sum_j p[r][j] * value[j], in registers over the tile;
// bytes [fetch_offset, fetch_offset + fetch_bytes) of each key's V row ahead prefetched.
template <int R, int C, bool kF16>
IWB_AVX2 void add_values(float* o, int64_t dv, int64_t col0, const float* p, const float* corr,
                         const void* const* values, int64_t nk, const DecodeAhead& ahead, int64_t fetch_offset,
                         int64_t fetch_bytes) {
  __m256 acc[R][C];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    const __m256 c = _mm256_set1_ps(corr[r]);
#pragma GCC unroll 8
    for (int x = 0; x < C; ++x) acc[r][x] = _mm256_mul_ps(_mm256_loadu_ps(o + r * dv + col0 + 8 * x), c);
  }
  for (int64_t j = 0; j < nk; ++j) {
    ahead.fetch_v(j, fetch_offset, fetch_bytes);
    __m256 v[C];
#pragma GCC unroll 8
    for (int x = 0; x < C; ++x) v[x] = load8<kF16>(values[j], col0 + 8 * x);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const __m256 pj = _mm256_broadcast_ss(p + r * kKeyTile + j);
#pragma GCC unroll 8
      for (int x = 0; x < C; ++x) acc[r][x] = _mm256_fmadd_ps(pj, v[x], acc[r][x]);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 8
    for (int x = 0; x < C; ++x) _mm256_storeu_ps(o + r * dv + col0 + 8 * x, acc[r][x]);
  }
}

// Each column pass prefetches the part of the next rows it will read (f16), or, for rows
// expanded from a quantized side, the first pass the whole source row.
template <int R, bool kF16>
IWB_AVX2 void add_values_columns(float* o, int64_t dv, const float* p, const float* corr, const void* const* values,
                                 int64_t nk, const DecodeAhead& ahead) {
  constexpr int C = R <= 2 ? 4 : R <= 3 ? 3 : R <= 6 ? 2 : 1;  // R x C accumulators, at most 12 registers
  auto fetch_offset = [&](int64_t col) { return kF16 ? 2 * col : 0; };
  auto fetch_bytes = [&](int64_t col, int64_t cols) { return kF16 ? 2 * cols : col == 0 ? ahead.v_bytes : 0; };
  int64_t col = 0;
  for (; col + 8 * C <= dv; col += 8 * C) {
    add_values<R, C, kF16>(o, dv, col, p, corr, values, nk, ahead, fetch_offset(col), fetch_bytes(col, 8 * C));
  }
  for (; col < dv; col += 8) {
    add_values<R, 1, kF16>(o, dv, col, p, corr, values, nk, ahead, fetch_offset(col), fetch_bytes(col, 8));
  }
}

// The tile kernels run_paged_attention_decode calls (paged_attention_decode_driver.h).
struct Avx2DecodeKernels {
  static constexpr int64_t kColumnUnit = 8;
  static constexpr bool kReadsBlocks = false;  // Q8_0 and Q4_0 sides come expanded (DecodeRows::F32)

  template <int R>
  IWB_AVX2 static void score_tile(const float* q, int64_t dk, const void* const* keys, DecodeRows rows, int64_t nk,
                                  float* s, float* part, const DecodeAhead& ahead) {
    static_assert(kScoreRows * 8 * 8 <= kDecodePartFloats);
    const bool is_f16 = rows == DecodeRows::F16;
    auto* vectors = reinterpret_cast<__m256*>(part);
    constexpr int kFirst = R < kScoreRows ? R : kScoreRows;
    if (is_f16) {
      score_rows<kFirst, true>(q, dk, keys, nk, s, vectors, &ahead);
    } else {
      score_rows<kFirst, false>(q, dk, keys, nk, s, vectors, &ahead);
    }
    if constexpr (R > kScoreRows) {
      const float* q_rest = q + kScoreRows * dk;
      float* s_rest = s + kScoreRows * kKeyTile;
      if (is_f16) {
        score_rows<R - kScoreRows, true>(q_rest, dk, keys, nk, s_rest, vectors, nullptr);
      } else {
        score_rows<R - kScoreRows, false>(q_rest, dk, keys, nk, s_rest, vectors, nullptr);
      }
    }
  }

  // One row's tile of nk scores through the online softmax: soft-capped, then replaced by
  // exp(score - m_new); m and l move on, corr = exp(m_old - m_new) rescales the row's output.
  // A row holds kKeyTile scores, so whole vectors past nk stay inside it (and are zeroed).
  IWB_AVX2 static void softmax_tile(float* s, int64_t nk, float softcap, float& m, float& l, float& corr) {
    const int64_t chunks = (nk + 7) / 8;
    const __m256 minus_inf = _mm256_set1_ps(-INFINITY);
    __m256 vmax = minus_inf;
    for (int64_t c = 0; c < chunks; ++c) {
      __m256 x = _mm256_loadu_ps(s + 8 * c);
      if (softcap > 0.0f) x = soft_cap_avx2(x, softcap);
      x = _mm256_blendv_ps(minus_inf, x, first_lanes(nk - 8 * c));
      _mm256_storeu_ps(s + 8 * c, x);
      vmax = _mm256_max_ps(vmax, x);
    }
    const float m_new = std::max(m, hmax8(vmax));
    const __m256 mv = _mm256_set1_ps(m_new);
    __m256 vsum = _mm256_setzero_ps();
    for (int64_t c = 0; c < chunks; ++c) {
      const __m256 e = _mm256_and_ps(exp_avx2(_mm256_sub_ps(_mm256_loadu_ps(s + 8 * c), mv)), first_lanes(nk - 8 * c));
      _mm256_storeu_ps(s + 8 * c, e);
      vsum = _mm256_add_ps(vsum, e);
    }
    corr = std::exp(m - m_new);  // 0 on the first tile (m = -inf) without a sink
    l = l * corr + hsum8(vsum);
    m = m_new;
  }

  template <int R>
  IWB_AVX2 static void add_values_all(float* o, int64_t dv, const float* p, const float* corr,
                                      const void* const* values, DecodeRows rows, int64_t nk,
                                      const DecodeAhead& ahead) {
    if (rows == DecodeRows::F16) {
      add_values_columns<R, true>(o, dv, p, corr, values, nk, ahead);
    } else {
      add_values_columns<R, false>(o, dv, p, corr, values, nk, ahead);
    }
  }
};

}  // namespace

bool paged_attention_decode_avx2(const PagedAttentionArgs& a) {
  if (cpu_path() == CpuPath::Portable) return false;
  return run_paged_attention_decode<Avx2DecodeKernels>(a);
}

}  // namespace iwb::detail

#else

namespace iwb::detail {
bool paged_attention_decode_avx2(const PagedAttentionArgs&) { return false; }
}  // namespace iwb::detail

#endif
