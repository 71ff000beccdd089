// The tiled attention's work plan and per-item loop (private to kernels/src), shared by its
// AVX-512 and AVX2 kernels: paged_attention_tiles.cpp and paged_attention_tiles_avx2.cpp each
// instantiate run_paged_attention_tiled<Kernels> with a struct of target-specific functions,
//
//   static bool supports(int64_t dk, int64_t dv);    head sizes the kernels handle
//   static int64_t key_tile(int64_t dk);                keys per tile (a multiple of 16, <= 64)
//   static constexpr int kScoreRows;                    rows score_rows takes at once (<= 8)
//   static constexpr int kValueRows;                    rows add_values takes at once (<= 4)
//   static constexpr int64_t kRunTokens;                query tokens an item takes at most
//   static constexpr int64_t kKeyUnit;                  keys per transposed block (<= 16)
//   static void transpose_keys(const float* rows, int64_t dk, float* kt, int64_t key_tile);
//     kKeyUnit key rows of dk f32 into kt[d * key_tile + j];
//   static void score_rows(const float* const* q, float* const* p, int64_t dk,
//       const float* kt, int64_t key_tile);
//     p[i][j] = q[i] . k[j] for kScoreRows query rows and every key of the tile;
//   static void softmax_row(float* p, int64_t key_tile, int64_t j_lo, int64_t j_hi,
//       float softcap, float& m, float& l, float& corr);
//     one row's scores soft-capped, keys outside j_lo..j_hi masked, through the online softmax
//     (p becomes exp(score - m_new), 0 where masked; corr = exp(m_old - m_new));
//   static void add_values(float* const* o, const float* const* p, const float* corr,
//       const float* v, int64_t dv, int64_t nk);
//     o[i] = o[i] * corr[i] + sum_j p[i][j] * v[j] for kValueRows rows, every column,
//
// called once per key tile (so they carry their own target attributes and are not inlined here).
//
// A work item is (run of up to kRunTokens query tokens of one sequence at consecutive
// positions, KV head g): its R = tokens x group query rows share every key and value tile,
// converted from the cache once, keys transposed so the scores are FMAs of broadcast query
// elements against a vector of keys. Per tile the running max m, sum l and output O of each row are rescaled
// (flash attention's online softmax); masked keys (causal, sliding window, past the tile) score
// -inf; a sink starts each row's running max and sum.
#pragma once

#include "paged_attention_keys.h"
#include "paged_attention_quant.h"
#include "paged_attention_runs.h"
#include "parallel.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <vector>

namespace iwb::detail {

// Per-thread buffers, grown once and reused.
struct TileScratch {
  std::vector<float> kt;          // [head_dim x key_tile] keys, transposed
  std::vector<float> v;           // [key_tile x head_dim_v]
  std::vector<float> q;           // [rows x head_dim], scaled
  std::vector<float> p;           // [rows x key_tile] scores, then probabilities
  std::vector<float> o;           // [rows x head_dim_v]
  std::vector<float> m, l, corr;  // [rows]
  std::vector<float> k_rows;      // [16 x head_dim] keys before the transpose
};

namespace tile_plan {

using WorkItem = PromptItem;

// Keys k0 .. k0 + nk - 1 of KV head g: K transposed into s.kt [d][j], V into s.v [j][:],
// both f32 (from f16 or expanded from a quantized cache's blocks, so every cache type meets the
// same f32 scores, online softmax and value sums); keys nk..key_tile-1 read as zero. The rows
// of keys attention_prefetch_keys() further on, up to key_end, are prefetched meanwhile.
template <typename Kernels>
void load_tile(const PagedAttentionArgs& a, const int32_t* table, int64_t g, int64_t k0, int64_t nk, int64_t key_end,
               int64_t key_tile, TileScratch& s) {
  constexpr int64_t kUnit = Kernels::kKeyUnit;
  static_assert(kUnit >= 1 && kUnit <= 16);  // TileScratch::k_rows holds 16 rows
  const int64_t dk = a.head_dim, dv = a.head_dim_v;
  const int64_t k_row = kv_row_units(a.k_type, a.num_kv_heads * dk), v_row = paged_v_row_units(a);
  const int64_t k_head = kv_row_units(a.k_type, dk), v_head = kv_row_units(a.v_type, dv);
  const int64_t ahead = attention_prefetch_keys(64);
  for (int64_t j0 = 0; j0 < key_tile; j0 += kUnit) {
    const int64_t n_unit = std::clamp<int64_t>(nk - j0, 0, kUnit);
    int64_t slots[kUnit];
    if (ahead > 0) {
      const int64_t first = k0 + j0 + ahead, n = std::clamp<int64_t>(key_end - first, 0, kUnit);
      slots_of(a, table, first, n, slots);
      for (int64_t j = 0; j < n; ++j) {
        prefetch_row(a.k_cache + slots[j] * k_row + g * k_head, 2 * k_head);
        prefetch_row(a.v_cache + slots[j] * v_row + g * v_head, 2 * v_head);
      }
    }
    slots_of(a, table, k0 + j0, n_unit, slots);
    for (int64_t j = 0; j < n_unit; ++j) {
      const uint16_t* k = a.k_cache + slots[j] * k_row + g * k_head;
      cache_row_to_f32(a.k_type, k, &s.k_rows[j * dk], dk, a.k_scale);
      const uint16_t* v = a.v_cache + slots[j] * v_row + g * v_head;
      float* vt = &s.v[(j0 + j) * dv];
      cache_row_to_f32(a.v_type, v, vt, dv, a.v_scale);
    }
    for (int64_t j = n_unit; j < kUnit; ++j) {
      std::fill_n(&s.k_rows[j * dk], dk, 0.0f);
      std::fill_n(&s.v[(j0 + j) * dv], dv, 0.0f);
    }
    Kernels::transpose_keys(s.k_rows.data(), dk, s.kt.data() + j0, key_tile);
  }
}

template <typename Kernels>
void run_item(const PagedAttentionArgs& a, const WorkItem& w, int64_t key_tile, TileScratch& s) {
  const int64_t group = a.num_heads / a.num_kv_heads;
  const int64_t dk = a.head_dim, dv = a.head_dim_v;
  const int64_t rows = w.num_tokens * group;
  const auto [table, first_pos, last_pos, k_begin, rot_k, rot_v] = prompt_run(a, w);

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
    load_tile<Kernels>(a, table, w.kv_head, k0, nk, last_pos + 1, key_tile, s);
    constexpr int kScoreRows = Kernels::kScoreRows;
    static_assert(kScoreRows >= 1 && kScoreRows <= 8);
    for (int64_t r0 = 0; r0 < rows; r0 += kScoreRows) {
      const float* q[kScoreRows];
      float* p[kScoreRows];
      for (int i = 0; i < kScoreRows; ++i) {
        const int64_t r = std::min(r0 + i, rows - 1);  // a short last group repeats its last row
        q[i] = &s.q[r * dk];
        p[i] = &s.p[(r0 + i < rows ? r0 + i : rows) * key_tile];  // row `rows` is a spare
      }
      Kernels::score_rows(q, p, dk, s.kt.data(), key_tile);
    }
    // Mask, soft-cap and the online softmax, row by row.
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
      Kernels::softmax_row(pr, key_tile, j_lo, j_hi, a.softcap, s.m[r], s.l[r], s.corr[r]);
    }
    // o = o * corr + p . v, kValueRows rows at a time.
    constexpr int kValueRows = Kernels::kValueRows;
    static_assert(kValueRows >= 1 && kValueRows <= 4);
    for (int64_t r0 = 0; r0 < rows; r0 += kValueRows) {
      float* o[kValueRows];
      const float* p[kValueRows];
      float corr[kValueRows];
      for (int i = 0; i < kValueRows; ++i) {
        const int64_t r = std::min(r0 + i, rows);  // row `rows` of o/p is a spare
        o[i] = &s.o[r * dv];
        p[i] = &s.p[r * key_tile];
        corr[i] = r < rows ? s.corr[r] : 1.0f;
      }
      Kernels::add_values(o, p, corr, s.v.data(), dv, nk);
    }
  }
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t t = w.first_token + r / group, h = w.kv_head * group + r % group;
    write_output(a, t, h, &s.o[r * dv], s.l[r], rot_v);
  }
}

}  // namespace tile_plan

// The whole tiled attention with one family's kernels; false (writing nothing) when the head
// sizes are outside Kernels::supports (the CPU check is the caller's).
template <typename Kernels>
bool run_paged_attention_tiled(const PagedAttentionArgs& a) {
  using namespace tile_plan;
  if (!Kernels::supports(a.head_dim, a.head_dim_v)) return false;
  const int64_t group = a.num_heads / a.num_kv_heads;
  const int64_t key_tile = Kernels::key_tile(a.head_dim);
  thread_local std::vector<WorkItem> items;
  prompt_items(a, Kernels::kRunTokens, items);
  const int num_threads = prompt_threads(a);
  const int64_t max_rows = Kernels::kRunTokens * group + 1;  // +1: the spare row of short groups
  const auto num_items = static_cast<int64_t>(items.size());
  // The calling thread's list: inside the region `items` would name each thread's own.
  const WorkItem* const item_list = items.data();

  std::atomic<int64_t> next_item{0};
  parallel_region(num_threads, [&](int, int) {
    thread_local TileScratch s;
    auto grow = [](std::vector<float>& v, int64_t n) {
      if (v.size() < static_cast<size_t>(n)) v.resize(static_cast<size_t>(n));
    };
    grow(s.kt, a.head_dim * key_tile);
    grow(s.v, key_tile * a.head_dim_v);
    grow(s.q, max_rows * a.head_dim);
    grow(s.p, (max_rows + 1) * key_tile);
    grow(s.o, (max_rows + 1) * a.head_dim_v);
    grow(s.m, max_rows);
    grow(s.l, max_rows);
    grow(s.corr, max_rows);
    grow(s.k_rows, 16 * a.head_dim);
    for (int64_t i = next_item.fetch_add(1, std::memory_order_relaxed); i < num_items;
         i = next_item.fetch_add(1, std::memory_order_relaxed)) {
      run_item<Kernels>(a, item_list[i], key_tile, s);
    }
  });
  return true;
}

}  // namespace iwb::detail
