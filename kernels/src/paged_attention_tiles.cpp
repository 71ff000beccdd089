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

// Keys k0 .. k0 + nk - 1 of KV head g: K transposed into s.kt [d][j], V into s.v [j][:],
// both f32 (from f16 or expanded from a quantized cache's blocks, so every cache type meets the
// same f32 scores, online softmax and value sums); keys nk..key_tile-1 read as zero. The rows
// of keys attention_prefetch_keys() further on, up to key_end, are prefetched meanwhile.
IWB_AVX512 void load_tile(const PagedAttentionArgs& a, const int32_t* table, int64_t g, int64_t k0, int64_t nk,
                          int64_t key_end, int64_t key_tile, TileScratch& s) {
  const int64_t dk = a.head_dim, dv = a.head_dim_v;
  const int64_t k_row = kv_row_units(a.k_type, a.num_kv_heads * dk), v_row = kv_row_units(a.v_type, a.num_kv_heads * dv);
  const int64_t k_head = kv_row_units(a.k_type, dk), v_head = kv_row_units(a.v_type, dv);
  const bool is_f16_k = a.k_type == GgmlType::F16, is_f16_v = a.v_type == GgmlType::F16;
  const int64_t ahead = attention_prefetch_keys();
  for (int64_t j0 = 0; j0 < key_tile; j0 += 16) {
    const int64_t n16 = std::clamp<int64_t>(nk - j0, 0, 16);
    int64_t slots[16];
    if (ahead > 0) {
      const int64_t first = k0 + j0 + ahead, n = std::clamp<int64_t>(key_end - first, 0, 16);
      slots_of(a, table, first, n, slots);
      for (int64_t j = 0; j < n; ++j) {
        prefetch_row(a.k_cache + slots[j] * k_row + g * k_head, 2 * k_head);
        prefetch_row(a.v_cache + slots[j] * v_row + g * v_head, 2 * v_head);
      }
    }
    slots_of(a, table, k0 + j0, n16, slots);
    for (int64_t j = 0; j < n16; ++j) {
      const uint16_t* k = a.k_cache + slots[j] * k_row + g * k_head;
      if (is_f16_k) {
        for (int64_t d = 0; d < dk; d += 16) {
          _mm512_storeu_ps(&s.k_rows[j * dk + d],
                           _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(k + d))));
        }
      } else {
        expand_kv_row(a.k_type, k, &s.k_rows[j * dk], dk, a.k_scale);
      }
      const uint16_t* v = a.v_cache + slots[j] * v_row + g * v_head;
      float* vt = &s.v[(j0 + j) * dv];
      if (is_f16_v) {
        for (int64_t d = 0; d < dv; d += 16) {
          _mm512_storeu_ps(vt + d, _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(v + d))));
        }
      } else {
        expand_kv_row(a.v_type, v, vt, dv, a.v_scale);
      }
    }
    for (int64_t j = n16; j < 16; ++j) {
      std::fill_n(&s.k_rows[j * dk], dk, 0.0f);
      std::fill_n(&s.v[(j0 + j) * dv], dv, 0.0f);
    }
    for (int64_t d0 = 0; d0 < dk; d0 += 16) {
      __m512 block[16];
#pragma GCC unroll 16
      for (int i = 0; i < 16; ++i) block[i] = _mm512_loadu_ps(&s.k_rows[i * dk + d0]);
      transpose_16x16(block);
#pragma GCC unroll 16
      for (int i = 0; i < 16; ++i) _mm512_storeu_ps(&s.kt[(d0 + i) * key_tile + j0], block[i]);
    }
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
  static constexpr int64_t kRunTokens = 8;
  IWB_AVX512 static void load_tile(const PagedAttentionArgs& a, const int32_t* table, int64_t g, int64_t k0, int64_t nk,
                                   int64_t key_end, int64_t key_tile, TileScratch& s) {
    iwb::detail::load_tile(a, table, g, k0, nk, key_end, key_tile, s);
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
