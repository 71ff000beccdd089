// Tiled paged attention's AVX2 kernels (see paged_attention_tiles.h; the work plan and the
// per-item loop are paged_attention_tiles_driver.h's). Without these, CPUs without AVX-512 ran
// prompts through the per-pair loop, which reads each KV head's keys once per query head and
// converts them from f16 every time: the default model's pp512 @ d2048 ran at 27 tokens/s on a
// Zen 3 core pair, two thirds of llama.cpp's 40, against 1.4x llama.cpp at depth 0.
//
// The AVX-512 kernels' shape with 8 lanes and 16 registers: keys transposed 8 at a time, scores
// of six query rows against 16 keys per pass over the head (12 accumulators, 2 key loads and 6
// broadcasts per 12 FMAs), the online softmax 8 scores at a time, and values added into 4 rows x
// 3 vectors of 8 columns (12 accumulators) held in registers over the tile's keys. Items take
// runs of up to 16 tokens (the AVX-512 kernels 8). Side by side on the same Zen 3 afterwards:
// pp512 @ d2048 57.6 / 37.1 (1.55x llama.cpp), @ d8192 37.5 / 20.9 (1.79x).
#include "paged_attention_tiles.h"

#include "cpu_features.h"
#include "paged_attention_tiles_driver.h"

#if defined(__x86_64__) || defined(__i386__)
#include "quant_unpack_common.h"
#include "simd_math_avx2.h"

#include <algorithm>
#include <cmath>

#define IWB_AVX2 __attribute__((target("avx2,fma,f16c")))

namespace iwb::detail {
namespace {

// 8 key rows of dk f32 (rows[j * dk + d]) transposed into kt[d * key_tile + j].
IWB_AVX2 void transpose_keys(const float* rows, int64_t dk, float* kt, int64_t key_tile) {
  for (int64_t d0 = 0; d0 < dk; d0 += 8) {
    __m256i block[8];
#pragma GCC unroll 8
    for (int i = 0; i < 8; ++i) block[i] = _mm256_castps_si256(_mm256_loadu_ps(&rows[i * dk + d0]));
    transpose_dwords(block);
#pragma GCC unroll 8
    for (int i = 0; i < 8; ++i) _mm256_storeu_ps(&kt[(d0 + i) * key_tile], _mm256_castsi256_ps(block[i]));
  }
}

// p[i][j] = q[i] . k[j] for six query rows, 16 keys per pass over the head's dk elements: 12
// accumulators, 2 key loads and 6 broadcasts per 12 FMAs.
IWB_AVX2 void score_rows(const float* const* q, float* const* p, int64_t dk, const float* kt, int64_t key_tile) {
  constexpr int kRows = 6;
  for (int64_t c0 = 0; c0 < key_tile; c0 += 16) {
    __m256 acc[kRows][2];
#pragma GCC unroll 6
    for (int i = 0; i < kRows; ++i) acc[i][0] = acc[i][1] = _mm256_setzero_ps();
    for (int64_t d = 0; d < dk; ++d) {
      const __m256 k0 = _mm256_loadu_ps(kt + d * key_tile + c0), k1 = _mm256_loadu_ps(kt + d * key_tile + c0 + 8);
#pragma GCC unroll 6
      for (int i = 0; i < kRows; ++i) {
        const __m256 qb = _mm256_broadcast_ss(q[i] + d);
        acc[i][0] = _mm256_fmadd_ps(qb, k0, acc[i][0]);
        acc[i][1] = _mm256_fmadd_ps(qb, k1, acc[i][1]);
      }
    }
#pragma GCC unroll 6
    for (int i = 0; i < kRows; ++i) {
      _mm256_storeu_ps(p[i] + c0, acc[i][0]);
      _mm256_storeu_ps(p[i] + c0 + 8, acc[i][1]);
    }
  }
}

// Lanes j of the 8 keys from `first` on with j_lo <= first + j <= j_hi: all ones.
IWB_AVX2 inline __m256 visible_lanes(int64_t first, int64_t j_lo, int64_t j_hi) {
  const __m256i j =
      _mm256_add_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), _mm256_set1_epi32(static_cast<int>(first)));
  const __m256i from_lo = _mm256_cmpgt_epi32(j, _mm256_set1_epi32(static_cast<int>(j_lo - 1)));
  const __m256i to_hi = _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(j_hi + 1)), j);
  return _mm256_castsi256_ps(_mm256_and_si256(from_lo, to_hi));
}

// One row's scores: soft-capped, keys outside j_lo..j_hi masked (kMasked; a tile wholly visible,
// as every tile but the last ones of a deep context is, skips the masks), through the online
// softmax.
template <bool kMasked>
IWB_AVX2 void softmax_row_masked(float* pr, int64_t key_tile, int64_t j_lo, int64_t j_hi, float softcap, float& m,
                                 float& l, float& corr) {
  const __m256 minus_inf = _mm256_set1_ps(-INFINITY);
  __m256 vmax = minus_inf;
  for (int64_t c = 0; c < key_tile; c += 8) {
    __m256 x = _mm256_loadu_ps(pr + c);
    if (softcap > 0.0f) x = soft_cap_avx2(x, softcap);
    if constexpr (kMasked) x = _mm256_blendv_ps(minus_inf, x, visible_lanes(c, j_lo, j_hi));
    if (kMasked || softcap > 0.0f) _mm256_storeu_ps(pr + c, x);
    vmax = _mm256_max_ps(vmax, x);
  }
  const float m_new = std::max(m, hmax8(vmax));
  const __m256 mv = _mm256_set1_ps(m_new);
  __m256 vsum = _mm256_setzero_ps();
  for (int64_t c = 0; c < key_tile; c += 8) {
    __m256 e = exp_avx2(_mm256_sub_ps(_mm256_loadu_ps(pr + c), mv));
    // exp_avx2 clamps -inf - m_new to exp(-87), so masked keys are zeroed after it.
    if constexpr (kMasked) e = _mm256_and_ps(e, visible_lanes(c, j_lo, j_hi));
    _mm256_storeu_ps(pr + c, e);
    vsum = _mm256_add_ps(vsum, e);
  }
  corr = std::exp(m - m_new);  // 0 on the first visible tile (m = -inf) without a sink
  l = l * corr + hsum8(vsum);
  m = m_new;
}

// o[i] = o[i] * corr[i] + sum_j p[i][j] * v[j] for four rows, columns dv_offset .. + 8 kV: per
// key kV loads of values and 4 broadcasts feed 4 kV FMAs (with two rows, twice the value bytes
// per FMA came from L2 once the tile outgrew L1).
template <int kV>
IWB_AVX2 void accumulate_values(float* const* o, const float* const* p, const float* corr, const float* v, int64_t dv,
                                int64_t dv_offset, int64_t nk) {
  __m256 acc[4][kV];
#pragma GCC unroll 4
  for (int i = 0; i < 4; ++i) {
    const __m256 c = _mm256_set1_ps(corr[i]);
#pragma GCC unroll 3
    for (int x = 0; x < kV; ++x) acc[i][x] = _mm256_mul_ps(_mm256_loadu_ps(o[i] + dv_offset + 8 * x), c);
  }
  for (int64_t j = 0; j < nk; ++j) {
    __m256 vv[kV];
#pragma GCC unroll 3
    for (int x = 0; x < kV; ++x) vv[x] = _mm256_loadu_ps(v + j * dv + dv_offset + 8 * x);
#pragma GCC unroll 4
    for (int i = 0; i < 4; ++i) {
      const __m256 pb = _mm256_broadcast_ss(p[i] + j);
#pragma GCC unroll 3
      for (int x = 0; x < kV; ++x) acc[i][x] = _mm256_fmadd_ps(pb, vv[x], acc[i][x]);
    }
  }
#pragma GCC unroll 4
  for (int i = 0; i < 4; ++i) {
#pragma GCC unroll 3
    for (int x = 0; x < kV; ++x) _mm256_storeu_ps(o[i] + dv_offset + 8 * x, acc[i][x]);
  }
}

// The kernels run_paged_attention_tiled calls (paged_attention_tiles_driver.h).
struct Avx2TileKernels {
  static bool supports(int64_t dk, int64_t dv) { return dk % 8 == 0 && dv % 8 == 0; }
  // Tiles of 32 keys (half the transposed keys and values, which fill L1 twice over at 64 and
  // head size 128) measured no faster on Zen 3.
  static int64_t key_tile(int64_t dk) { return dk <= 128 ? 64 : 32; }
  static constexpr int kScoreRows = 6;
  static constexpr int kValueRows = 4;
  // Each key tile is loaded (converted, transposed) once per item, which took a fifth of the
  // time with runs of 8 tokens (48 query rows of the default model); runs of 16 halve that.
  static constexpr int64_t kRunTokens = 16;
  static constexpr int64_t kKeyUnit = 8;
  IWB_AVX2 static void transpose_keys(const float* rows, int64_t dk, float* kt, int64_t key_tile) {
    iwb::detail::transpose_keys(rows, dk, kt, key_tile);
  }
  IWB_AVX2 static void score_rows(const float* const* q, float* const* p, int64_t dk, const float* kt,
                                  int64_t key_tile) {
    iwb::detail::score_rows(q, p, dk, kt, key_tile);
  }
  IWB_AVX2 static void softmax_row(float* p, int64_t key_tile, int64_t j_lo, int64_t j_hi, float softcap, float& m,
                                   float& l, float& corr) {
    if (j_lo == 0 && j_hi == key_tile - 1) {
      softmax_row_masked<false>(p, key_tile, j_lo, j_hi, softcap, m, l, corr);
    } else {
      softmax_row_masked<true>(p, key_tile, j_lo, j_hi, softcap, m, l, corr);
    }
  }
  // 24 columns at a time, then the rest as 16, or as 16 + 16 where 8 would be left (128 = 4 x 24
  // + 2 x 16): the 8-column pass has four FMA chains, half what FMA's latency wants.
  IWB_AVX2 static void add_values(float* const* o, const float* const* p, const float* corr, const float* v, int64_t dv,
                                  int64_t nk) {
    const int64_t wide = dv % 24 == 8 && dv >= 32 ? dv - 32 : dv / 24 * 24;
    int64_t off = 0;
    for (; off < wide; off += 24) accumulate_values<3>(o, p, corr, v, dv, off, nk);
    for (; off + 16 <= dv; off += 16) accumulate_values<2>(o, p, corr, v, dv, off, nk);
    if (off < dv) accumulate_values<1>(o, p, corr, v, dv, off, nk);
  }
};

}  // namespace

bool paged_attention_tiled_avx2(const PagedAttentionArgs& a) {
  if (cpu_path() == CpuPath::Portable) return false;
  return run_paged_attention_tiled<Avx2TileKernels>(a);
}

}  // namespace iwb::detail

#else

namespace iwb::detail {
bool paged_attention_tiled_avx2(const PagedAttentionArgs&) { return false; }
}  // namespace iwb::detail

#endif
