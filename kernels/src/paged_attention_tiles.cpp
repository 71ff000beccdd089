// Tiled paged attention (see paged_attention_tiles.h). A work item is (run of up to 8 query
// tokens of one sequence at consecutive positions, KV head g): its R = tokens x group query
// rows share every key and value tile, which is converted from f16 once, keys transposed so
// the scores are FMAs of broadcast query elements against 16 keys at a time. Per tile the
// running max m, sum l and output O of each row are rescaled (flash attention's online
// softmax); masked keys (causal, sliding window, past the tile) score -inf; a sink starts
// each row's running max and sum.
#include "paged_attention_tiles.h"

#include "cpu_features.h"
#include "paged_attention_keys.h"
#include "paged_attention_quant.h"
#include "parallel.h"

#if defined(__x86_64__) || defined(__i386__)
#include "simd_math_avx512.h"

#include <algorithm>
#include <cmath>
#include <vector>

#define IWB_AVX512 __attribute__((target("avx512f,avx512dq,avx2,fma,f16c")))

namespace iwb::detail {
namespace {

constexpr int64_t kMaxRunTokens = 8;

struct WorkItem {
  int64_t first_token;
  int64_t num_tokens;
  int64_t kv_head;
};

// Per-thread buffers, grown once and reused.
struct Scratch {
  std::vector<float> kt;          // [head_dim x key_tile] keys, transposed
  std::vector<float> v;           // [key_tile x head_dim_v]
  std::vector<float> q;           // [rows x head_dim], scaled
  std::vector<float> p;           // [rows x key_tile] scores, then probabilities
  std::vector<float> o;           // [rows x head_dim_v]
  std::vector<float> m, l, corr;  // [rows]
  std::vector<float> k_rows;      // [16 x head_dim] keys before the transpose
};

// Keys k0 .. k0 + nk - 1 of KV head g: K transposed into s.kt [d][j], V into s.v [j][:],
// both f32 (from f16 or expanded from a quantized cache's blocks, so every cache type meets the
// same f32 scores, online softmax and value sums); keys nk..key_tile-1 read as zero. The rows
// of keys attention_prefetch_keys() further on, up to key_end, are prefetched meanwhile.
IWB_AVX512 void load_tile(const PagedAttentionArgs& a, const int32_t* table, int64_t g, int64_t k0, int64_t nk,
                          int64_t key_end, int64_t key_tile, Scratch& s) {
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

IWB_AVX512 void run_item(const PagedAttentionArgs& a, const WorkItem& w, int64_t key_tile, Scratch& s) {
  const int64_t group = a.num_heads / a.num_kv_heads;
  const int64_t dk = a.head_dim, dv = a.head_dim_v;
  const int64_t rows = w.num_tokens * group;
  const int32_t* table = a.block_tables + a.token_sequences[w.first_token] * a.max_blocks_per_sequence;
  const int64_t first_pos = a.positions[w.first_token];
  const int64_t last_pos = first_pos + w.num_tokens - 1;
  const int64_t k_begin = a.sliding_window > 0 ? std::max<int64_t>(0, first_pos - a.sliding_window + 1) : 0;
  const int64_t rot_k = a.is_rotated ? kv_rotation_size(a.k_type, dk, true) : 0;
  const int64_t rot_v = a.is_rotated ? kv_rotation_size(a.v_type, dv, false) : 0;

  // Row r = token i * group + head hh: q scaled once, m = -inf, l = 0, o = 0.
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t t = w.first_token + r / group, h = w.kv_head * group + r % group;
    prepare_query(a, t, h, rot_k, &s.q[r * dk]);
    // A sink (gpt-oss) starts the online softmax as one extra key with no value: m = sink, l = 1.
    s.m[r] = a.sinks ? a.sinks[h] : -INFINITY;
    s.l[r] = a.sinks ? 1.0f : 0.0f;
  }
  std::fill_n(s.o.begin(), rows * dv, 0.0f);

  for (int64_t k0 = k_begin; k0 <= last_pos; k0 += key_tile) {
    const int64_t nk = std::min(key_tile, last_pos - k0 + 1);
    load_tile(a, table, w.kv_head, k0, nk, last_pos + 1, key_tile, s);
    for (int64_t r0 = 0; r0 < rows; r0 += 4) {
      const float* q[4];
      float* p[4];
      for (int i = 0; i < 4; ++i) {
        const int64_t r = std::min(r0 + i, rows - 1);  // a short last group repeats its last row
        q[i] = &s.q[r * dk];
        p[i] = &s.p[(r0 + i < rows ? r0 + i : rows) * key_tile];  // row `rows` is a spare
      }
      if (key_tile == 64) {
        score_rows<4>(q, p, dk, s.kt.data());
      } else {
        score_rows<2>(q, p, dk, s.kt.data());
      }
    }
    // Mask, soft-cap and the online softmax, row by row.
    const __m512i iota = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t pos = first_pos + r / group;
      const int64_t lo = a.sliding_window > 0 ? std::max<int64_t>(0, pos - a.sliding_window + 1) : 0;
      // Key k0 + j is visible when lo <= k0 + j <= pos and j < nk.
      const int64_t j_lo = std::max<int64_t>(0, lo - k0), j_hi = std::min(nk - 1, pos - k0);
      float* pr = &s.p[r * key_tile];
      if (j_lo > j_hi) {  // nothing visible in this tile
        std::fill_n(pr, key_tile, 0.0f);
        s.corr[r] = 1.0f;
        continue;
      }
      __m512 vmax = _mm512_set1_ps(-INFINITY);
      __mmask16 masks[4];
      for (int64_t c = 0; c < key_tile / 16; ++c) {
        const __m512i j = _mm512_add_epi32(iota, _mm512_set1_epi32(static_cast<int>(16 * c)));
        masks[c] = _mm512_cmp_epi32_mask(j, _mm512_set1_epi32(static_cast<int>(j_lo)), _MM_CMPINT_NLT) &
                   _mm512_cmp_epi32_mask(j, _mm512_set1_epi32(static_cast<int>(j_hi)), _MM_CMPINT_LE);
        __m512 x = _mm512_loadu_ps(pr + 16 * c);
        if (a.softcap > 0.0f) x = soft_cap_avx512(x, a.softcap);
        x = _mm512_mask_mov_ps(_mm512_set1_ps(-INFINITY), masks[c], x);
        _mm512_storeu_ps(pr + 16 * c, x);
        vmax = _mm512_max_ps(vmax, x);
      }
      const float m_new = std::max(s.m[r], _mm512_reduce_max_ps(vmax));
      const __m512 mv = _mm512_set1_ps(m_new);
      __m512 vsum = _mm512_setzero_ps();
      for (int64_t c = 0; c < key_tile / 16; ++c) {
        const __m512 e = _mm512_maskz_mov_ps(masks[c], exp_avx512(_mm512_sub_ps(_mm512_loadu_ps(pr + 16 * c), mv)));
        _mm512_storeu_ps(pr + 16 * c, e);
        vsum = _mm512_add_ps(vsum, e);
      }
      s.corr[r] = std::exp(s.m[r] - m_new);  // 0 on the first visible tile (m = -inf) without a sink
      s.l[r] = s.l[r] * s.corr[r] + _mm512_reduce_add_ps(vsum);
      s.m[r] = m_new;
    }
    // o = o * corr + p . v, two rows at a time, 128 (or 64) columns at a time.
    for (int64_t r0 = 0; r0 < rows; r0 += 2) {
      const int64_t r1 = std::min(r0 + 1, rows);  // row `rows` of o/p is a spare
      float* o[2] = {&s.o[r0 * dv], &s.o[r1 * dv]};
      const float* p[2] = {&s.p[r0 * key_tile], &s.p[r1 * key_tile]};
      const float corr[2] = {s.corr[r0], r1 < rows ? s.corr[r1] : 1.0f};
      int64_t off = 0;
      for (; off + 128 <= dv; off += 128) accumulate_values<8>(o, p, corr, s.v.data(), dv, off, nk);
      if (off < dv) accumulate_values<4>(o, p, corr, s.v.data(), dv, off, nk);  // dv % 64 == 0
    }
  }
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t t = w.first_token + r / group, h = w.kv_head * group + r % group;
    write_output(a, t, h, &s.o[r * dv], s.l[r], rot_v);
  }
}

}  // namespace

bool paged_attention_tiled(const PagedAttentionArgs& a) {
  if (cpu_path() != CpuPath::Avx512 || a.head_dim % 16 != 0 || a.head_dim_v % 64 != 0) return false;
  const int64_t group = a.num_heads / a.num_kv_heads;
  const int64_t key_tile = a.head_dim <= 128 ? 64 : 32;  // the transposed keys stay within L1
  // Runs of consecutive positions of one sequence, then one item per (run, KV head).
  thread_local std::vector<WorkItem> items;
  items.clear();
  for (int64_t t = 0; t < a.num_tokens;) {
    int64_t n = 1;
    while (t + n < a.num_tokens && n < kMaxRunTokens && a.token_sequences[t + n] == a.token_sequences[t] &&
           a.positions[t + n] == a.positions[t] + n) {
      ++n;
    }
    for (int64_t g = 0; g < a.num_kv_heads; ++g) items.push_back({t, n, g});
    t += n;
  }
  double work = 0;
  for (int64_t t = 0; t < a.num_tokens; ++t) work += static_cast<double>(a.positions[t] + 1);
  work *= static_cast<double>(a.num_heads * (a.head_dim + a.head_dim_v));
  const int num_threads = work >= kMinParallelWork ? resolve_threads(a.num_threads) : 1;
  const int64_t max_rows = kMaxRunTokens * group + 1;  // +1: the spare row of short groups
  const auto num_items = static_cast<int64_t>(items.size());
  // The calling thread's list: inside the region `items` would name each thread's own.
  const WorkItem* const item_list = items.data();

  std::atomic<int64_t> next_item{0};
  parallel_region(num_threads, [&](int, int) {
    thread_local Scratch s;
    auto grow = [](std::vector<float>& v, int64_t n) {
      if (v.size() < static_cast<size_t>(n)) v.resize(static_cast<size_t>(n));
    };
    grow(s.kt, a.head_dim * key_tile);
    grow(s.v, key_tile * a.head_dim_v);
    grow(s.q, max_rows * a.head_dim);
    grow(s.p, (max_rows + 4) * key_tile);
    grow(s.o, (max_rows + 1) * a.head_dim_v);
    grow(s.m, max_rows);
    grow(s.l, max_rows);
    grow(s.corr, max_rows);
    grow(s.k_rows, 16 * a.head_dim);
    for (int64_t i = next_item.fetch_add(1, std::memory_order_relaxed); i < num_items;
         i = next_item.fetch_add(1, std::memory_order_relaxed)) {
      run_item(a, item_list[i], key_tile, s);
    }
  });
  return true;
}

}  // namespace iwb::detail

#else

namespace iwb::detail {
bool paged_attention_tiled(const PagedAttentionArgs&) { return false; }
}  // namespace iwb::detail

#endif
