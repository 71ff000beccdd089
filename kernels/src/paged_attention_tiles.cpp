// Tiled paged attention's AVX-512 kernels (see paged_attention_tiles.h; the work plan and the
// per-item loop are paged_attention_tiles_driver.h's): keys transposed 16 at a time, scores of
// four query rows against 16 x kC keys per pass, values added into 2 x 8 vectors of 16.
#include "paged_attention_tiles.h"

#include "cpu_features.h"
#include "paged_attention_tiles_driver.h"

#if defined(__x86_64__) || defined(__i386__)
#include "simd_math_avx512.h"

#include <algorithm>
#include <cmath>
#include <vector>

#define IWB_AVX512 __attribute__((target("avx512f,avx512dq,avx2,fma,f16c")))

namespace iwb::detail {
namespace {

// 16 key rows of dk f32 (rows[j * dk + d]) transposed into kt[d * key_tile + j].
IWB_AVX512 void transpose_keys(const float* rows, int64_t dk, float* kt, int64_t key_tile) {
  for (int64_t d0 = 0; d0 < dk; d0 += 16) {
    __m512 block[16];
#pragma GCC unroll 16
    for (int i = 0; i < 16; ++i) block[i] = _mm512_loadu_ps(&rows[i * dk + d0]);
    transpose_16x16(block);
#pragma GCC unroll 16
    for (int i = 0; i < 16; ++i) _mm512_storeu_ps(&kt[(d0 + i) * key_tile], block[i]);
  }
}

// Scores of up to 4 query rows against the tile: p[row][j] = q[row] . k[j], kC chunks of 16 keys.
template <int kC>
IWB_AVX512 void score_rows(const float* const* q, float* const* p, int64_t dk, const float* kt) {
  __m512 acc[4][kC];
#pragma GCC unroll 4
  for (int i = 0; i < 4; ++i) {
#pragma GCC unroll 4
    for (int c = 0; c < kC; ++c) acc[i][c] = _mm512_setzero_ps();
  }
  for (int64_t d = 0; d < dk; ++d) {
    __m512 k[kC];
#pragma GCC unroll 4
    for (int c = 0; c < kC; ++c) k[c] = _mm512_loadu_ps(kt + d * (16 * kC) + 16 * c);
#pragma GCC unroll 4
    for (int i = 0; i < 4; ++i) {
      const __m512 qb = _mm512_set1_ps(q[i][d]);
#pragma GCC unroll 4
      for (int c = 0; c < kC; ++c) acc[i][c] = _mm512_fmadd_ps(qb, k[c], acc[i][c]);
    }
  }
#pragma GCC unroll 4
  for (int i = 0; i < 4; ++i) {
#pragma GCC unroll 4
    for (int c = 0; c < kC; ++c) _mm512_storeu_ps(p[i] + 16 * c, acc[i][c]);
  }
}

// o[row] = o[row] * corr[row] + sum_j p[row][j] * v[j] for two rows, kV vectors of 16 at a
// time (dv_offset selects which 16 * kV columns).
template <int kV>
IWB_AVX512 void accumulate_values(float* const* o, const float* const* p, const float* corr, const float* v, int64_t dv,
                                  int64_t dv_offset, int64_t nk) {
  __m512 acc[2][kV];
#pragma GCC unroll 2
  for (int i = 0; i < 2; ++i) {
    const __m512 c = _mm512_set1_ps(corr[i]);
#pragma GCC unroll 8
    for (int x = 0; x < kV; ++x) acc[i][x] = _mm512_mul_ps(_mm512_loadu_ps(o[i] + dv_offset + 16 * x), c);
  }
  for (int64_t j = 0; j < nk; ++j) {
    const __m512 p0 = _mm512_set1_ps(p[0][j]), p1 = _mm512_set1_ps(p[1][j]);
#pragma GCC unroll 8
    for (int x = 0; x < kV; ++x) {
      const __m512 vv = _mm512_loadu_ps(v + j * dv + dv_offset + 16 * x);
      acc[0][x] = _mm512_fmadd_ps(p0, vv, acc[0][x]);
      acc[1][x] = _mm512_fmadd_ps(p1, vv, acc[1][x]);
    }
  }
#pragma GCC unroll 2
  for (int i = 0; i < 2; ++i) {
#pragma GCC unroll 8
    for (int x = 0; x < kV; ++x) _mm512_storeu_ps(o[i] + dv_offset + 16 * x, acc[i][x]);
  }
}

// One row's scores: soft-capped, keys outside j_lo..j_hi masked, through the online softmax.
IWB_AVX512 void softmax_row(float* pr, int64_t key_tile, int64_t j_lo, int64_t j_hi, float softcap, float& m, float& l,
                            float& corr) {
  const __m512i iota = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  __m512 vmax = _mm512_set1_ps(-INFINITY);
  __mmask16 masks[4];
  for (int64_t c = 0; c < key_tile / 16; ++c) {
    const __m512i j = _mm512_add_epi32(iota, _mm512_set1_epi32(static_cast<int>(16 * c)));
    masks[c] = _mm512_cmp_epi32_mask(j, _mm512_set1_epi32(static_cast<int>(j_lo)), _MM_CMPINT_NLT) &
               _mm512_cmp_epi32_mask(j, _mm512_set1_epi32(static_cast<int>(j_hi)), _MM_CMPINT_LE);
    __m512 x = _mm512_loadu_ps(pr + 16 * c);
    if (softcap > 0.0f) x = soft_cap_avx512(x, softcap);
    x = _mm512_mask_mov_ps(_mm512_set1_ps(-INFINITY), masks[c], x);
    _mm512_storeu_ps(pr + 16 * c, x);
    vmax = _mm512_max_ps(vmax, x);
  }
  const float m_new = std::max(m, _mm512_reduce_max_ps(vmax));
  const __m512 mv = _mm512_set1_ps(m_new);
  __m512 vsum = _mm512_setzero_ps();
  for (int64_t c = 0; c < key_tile / 16; ++c) {
    const __m512 e = _mm512_maskz_mov_ps(masks[c], exp_avx512(_mm512_sub_ps(_mm512_loadu_ps(pr + 16 * c), mv)));
    _mm512_storeu_ps(pr + 16 * c, e);
    vsum = _mm512_add_ps(vsum, e);
  }
  corr = std::exp(m - m_new);  // 0 on the first visible tile (m = -inf) without a sink
  l = l * corr + _mm512_reduce_add_ps(vsum);
  m = m_new;
}

// The kernels run_paged_attention_tiled calls (paged_attention_tiles_driver.h).
struct Avx512TileKernels {
  static bool supports(int64_t dk, int64_t dv) { return dk % 16 == 0 && dv % 64 == 0; }
  // The transposed keys stay within L1.
  static int64_t key_tile(int64_t dk) { return dk <= 128 ? 64 : 32; }
  static constexpr int kScoreRows = 4;
  static constexpr int kValueRows = 2;
  // Tokens an item takes: its rows share each converted key and value tile (Xeon model 167,
  // IWB_ATTENTION_AMX=0 bench_paged_attention --tokens 512, 2 threads, one layer: 8 tokens
  // 173-176 ms at depth 8192, 32 tokens 152-156, 64 145-149; 32/8 heads at 4096: 251-256 ->
  // 204-210 at 32; near depth 0, where a longer run's early rows compute more masked scores,
  // 21.4 -> 22.4-23.1 ms). 32 keeps an item's buffers (192 rows for 6-head groups: ~300 KiB)
  // well inside the 1 MiB L2 of AMD Zen 4/5, which take this kernel (not measured there).
  static constexpr int64_t kRunTokens = 32;
  static constexpr int64_t kKeyUnit = 16;
  IWB_AVX512 static void transpose_keys(const float* rows, int64_t dk, float* kt, int64_t key_tile) {
    iwb::detail::transpose_keys(rows, dk, kt, key_tile);
  }
  IWB_AVX512 static void score_rows(const float* const* q, float* const* p, int64_t dk, const float* kt,
                                    int64_t key_tile) {
    if (key_tile == 64) {
      iwb::detail::score_rows<4>(q, p, dk, kt);
    } else {
      iwb::detail::score_rows<2>(q, p, dk, kt);
    }
  }
  IWB_AVX512 static void softmax_row(float* p, int64_t key_tile, int64_t j_lo, int64_t j_hi, float softcap, float& m,
                                     float& l, float& corr) {
    iwb::detail::softmax_row(p, key_tile, j_lo, j_hi, softcap, m, l, corr);
  }
  // 128 (or 64) columns at a time.
  IWB_AVX512 static void add_values(float* const* o, const float* const* p, const float* corr, const float* v,
                                    int64_t dv, int64_t nk) {
    int64_t off = 0;
    for (; off + 128 <= dv; off += 128) accumulate_values<8>(o, p, corr, v, dv, off, nk);
    if (off < dv) accumulate_values<4>(o, p, corr, v, dv, off, nk);  // dv % 64 == 0
  }
};

}  // namespace

bool paged_attention_tiled(const PagedAttentionArgs& a) {
  if (cpu_path() == CpuPath::Avx512 && run_paged_attention_tiled<Avx512TileKernels>(a)) return true;
  return paged_attention_tiled_avx2(a);
}

}  // namespace iwb::detail

#else

namespace iwb::detail {
bool paged_attention_tiled(const PagedAttentionArgs&) { return false; }
}  // namespace iwb::detail

#endif
