// The decode attention's work plan and per-item loop (private to kernels/src), shared by its
// AVX-512 and AVX2 kernels: paged_attention_decode.cpp and paged_attention_decode_avx2.cpp each
// instantiate run_paged_attention_decode<Kernels> with a struct of three target-specific
// functions per key tile,
//
//   template <int R> static void score_tile(const float* q, int64_t dk, const void* const* keys,
//       DecodeRows rows, int64_t nk, float* s, float* part, const DecodeAhead& ahead);
//     s[r * kDecodeKeyTile + j] = q[r] . key[j] for j < nk (R query rows of dk, scaled);
//   static void softmax_tile(float* s, int64_t nk, float softcap, float& m, float& l, float& corr);
//     one row's scores through the online softmax (replaced by exp(score - m_new));
//   template <int R> static void add_values_all(float* o, int64_t dv, const float* p,
//       const float* corr, const void* const* values, DecodeRows rows, int64_t nk,
//       const DecodeAhead& ahead);
//     o[r] = o[r] * corr[r] + sum_j p[r][j] * value[j],
//
// and kColumnUnit, the head sizes' required multiple. Keys and values are f16 rows of the
// cache (DecodeRows::F16), Q8_0 or Q4_0 rows of the cache (where Kernels::kReadsBlocks) or f32
// rows expanded from another quantized cache side (F32). The functions are called
// once per tile of 64 keys, so they carry their own target attributes and are not inlined here.
// score_tile calls ahead.fetch_k(j) and add_values_all ahead.fetch_v(j, ...) as they reach key
// j (DecodeAhead).
#pragma once

#include "cpu_features.h"
#include "paged_attention_keys.h"
#include "paged_attention_quant.h"
#include "parallel.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <vector>

namespace iwb::detail {

inline constexpr int64_t kDecodeKeyTile = 64;
// How the kernels read a cache side's rows: f16 values, Q8_0 blocks (34 bytes per 32 values:
// an f16 scale, then 32 int8; each value scale * q, as dequantize_q8_0), Q4_0 blocks (18 bytes:
// the scale, then 16 bytes whose low nibbles are values 0..15 and high nibbles 16..31; each
// scale * (q - 8)) or f32 rows the driver expanded from another type.
enum class DecodeRows { F16, Q8_0, Q4_0, F32 };
inline constexpr int kDecodeMaxRows = 8;
// Query rows of one work item over all the KV heads it takes (Scratch::q, o, m and l).
inline constexpr int kDecodeMaxItemRows = 32;
inline constexpr int64_t kDecodeMaxHeadDim = 512;
// Floats of per-key partial dot products a score_tile may use (kDecodeMaxRows x 16 vectors of 16).
inline constexpr int64_t kDecodePartFloats = kDecodeMaxRows * 16 * 16;

// The K and V rows of one KV head that the keys `distance` further on will read, prefetched
// (into L2) while this head's scores (K) and values (V) are computed, a key at a time: each
// phase then requests lines at the rate it consumes them, so the core's miss queue stays busy
// but not full. Prefetching all heads' next rows during the first head's scores, as before,
// issued a tile's lines in a burst: the prefetches stalled on full fill buffers, and the
// stalled prefetches held up the multiply-adds behind them. (Xeon model 167,
// bench_paged_attention at depth 8192 in 2 MiB pages, 2 threads: 14.1-14.9 -> 17-18 GB/s of
// cache; into L2 rather than L1 a further 3-5%; docs/benchmarks.md.)
struct DecodeAhead {
  const int64_t* k_slots = nullptr;  // [nk]: the slot whose K row key j prefetches
  const int64_t* v_slots = nullptr;  // [nv]
  int64_t nk = 0, nv = 0;            // 0 near the range's end, or no prefetch
  const uint16_t* k_head = nullptr;  // the head's K row in slot 0 (a slot is k_row units)
  const uint16_t* v_head = nullptr;
  int64_t k_row = 0, v_row = 0;
  int64_t k_bytes = 0, v_bytes = 0;  // one head's row
  // Key j's K row.
  __attribute__((always_inline)) void fetch_k(int64_t j) const {
    if (j < nk) prefetch_row<true>(k_head + k_slots[j] * k_row, k_bytes);
  }
  // Bytes [offset, offset + bytes) of key j's V row.
  __attribute__((always_inline)) void fetch_v(int64_t j, int64_t offset, int64_t bytes) const {
    if (j < nv && bytes > 0)
      prefetch_row<true>(reinterpret_cast<const char*>(v_head + v_slots[j] * v_row) + offset, bytes);
  }
  // The same for the keys from `first` on (key j of the result is key first + j here).
  DecodeAhead from(int64_t first) const {
    DecodeAhead d = *this;
    d.k_slots += first;
    d.v_slots += first;
    d.nk = std::max<int64_t>(0, nk - first);
    d.nv = std::max<int64_t>(0, nv - first);
    return d;
  }
};

namespace decode_plan {

// A key range shorter than this is not split further (each split adds a partial and a combine).
inline constexpr int64_t kMinSplitKeys = 512;
// Items per thread wanted before splitting: a thread the OS holds back leaves its later items
// to the others.
inline constexpr int64_t kItemsPerThread = 4;

// An item takes every KV head of its token where the heads' query rows fit kDecodeMaxItemRows
// (groups of at most kDecodeMaxRows): a key's row of the cache (all heads side by side) is then
// read whole by one core, tile by tile, head after head. One head per item left every core
// reading every other 256 bytes of each row (default model: 2 KV heads of 128 f16) while the
// other core read the rest, which the hardware prefetchers follow poorly (Xeon model 207,
// bench_paged_attention at depth 8192, 2 threads: 12-13 GB/s of cache, against 15 with one
// KV head of the same bytes). The change itself gained little there (11.8-13.0 -> 12.8-13.0
// GB/s); the attention was short of compute first (paged_attention_decode.cpp's four keys).
struct Item {
  int64_t token;
  int64_t kv_head;   // the first KV head this item takes
  int64_t kv_heads;  // how many, from kv_head on
  int64_t row0;      // the first of each group's query heads this item takes
  int64_t rows;      // 1..kDecodeMaxRows of each group
  int64_t split;
  int64_t key_begin, key_end;
};

struct Scratch {
  std::vector<float> q;               // [kDecodeMaxItemRows x head_dim], scaled (and rotated for a quantized K)
  std::vector<float> s;               // [kDecodeMaxItemRows x kDecodeKeyTile] scores, then probabilities
  std::vector<float> o;               // [kDecodeMaxItemRows x head_dim_v]
  std::vector<float> k_rows, v_rows;  // [kDecodeKeyTile x dim] a quantized side, expanded
  float m[kDecodeMaxItemRows], l[kDecodeMaxItemRows], corr[kDecodeMaxItemRows];
  alignas(64) float part[kDecodePartFloats];  // score_tile's per-key partial dot products
};

// Partial results of split key ranges: per (token, head, split) the running max, sum and the
// unnormalized output.
struct Partials {
  std::vector<int64_t> offset;  // [num_tokens]: the token's first (head, split) index
  std::vector<int64_t> splits;  // [num_tokens]
  std::vector<float> m, l, o;
};

template <typename Kernels, int R>
void run_item(const PagedAttentionArgs& a, const Item& w, Scratch& s, Partials& partials) {
  const int64_t group = a.num_heads / a.num_kv_heads;
  const int64_t dk = a.head_dim, dv = a.head_dim_v;
  const int32_t* table = a.block_tables + a.token_sequences[w.token] * a.max_blocks_per_sequence;
  const int64_t rot_k = a.is_rotated ? kv_rotation_size(a.k_type, dk, true) : 0;
  const int64_t rot_v = a.is_rotated ? kv_rotation_size(a.v_type, dv, false) : 0;
  // Rows the kernels read from the cache as they are; the others are expanded to f32 per tile.
  auto rows_of = [](GgmlType t) {
    if (t == GgmlType::F16) return DecodeRows::F16;
    if (t == GgmlType::Q8_0 && Kernels::kReadsBlocks) return DecodeRows::Q8_0;
    if (t == GgmlType::Q4_0 && Kernels::kReadsBlocks) return DecodeRows::Q4_0;
    return DecodeRows::F32;
  };
  const DecodeRows k_rows = rows_of(a.k_type), v_rows = rows_of(a.v_type);
  const bool is_direct_k = k_rows != DecodeRows::F32, is_direct_v = v_rows != DecodeRows::F32;
  const int64_t k_row = kv_row_units(a.k_type, a.num_kv_heads * dk), v_row = paged_v_row_units(a);
  const int64_t k_head = kv_row_units(a.k_type, dk), v_head = kv_row_units(a.v_type, dv);
  float* sc = s.s.data();
  // Row i = hi * R + r of q, o, m and l: query row r of the item's KV head kv_head + hi.
  auto head_of = [&](int64_t hi, int r) { return (w.kv_head + hi) * group + w.row0 + r; };
  for (int64_t hi = 0; hi < w.kv_heads; ++hi) {
    for (int r = 0; r < R; ++r) {
      const int64_t h = head_of(hi, r), i = hi * R + r;
      prepare_query(a, w.token, h, rot_k, s.q.data() + i * dk);
      // A sink (gpt-oss) joins the first range's softmax as one more key without a value.
      const bool has_sink = a.sinks != nullptr && w.split == 0;
      s.m[i] = has_sink ? a.sinks[h] : -INFINITY;
      s.l[i] = has_sink ? 1.0f : 0.0f;
    }
  }
  std::fill_n(s.o.data(), w.kv_heads * R * dv, 0.0f);

  // Rows read as they are (f16, Q8_0, Q4_0) are prefetched a few keys ahead of their use, within the tile
  // and into the next; rows expanded from a quantized side at the start of each tile, a tile
  // ahead. (Default measured on Xeon model 167, bench_paged_attention: docs/benchmarks.md.)
  const int64_t distance = attention_prefetch_keys(16);
  const int64_t k_distance = is_direct_k ? distance : kDecodeKeyTile;
  const int64_t v_distance = is_direct_v ? distance : kDecodeKeyTile;
  // With sides read as they are, the heads take turns every kChunk keys, so the core reads each key's row
  // (all the item's heads side by side) in one pass, front to back, as the hardware's stream
  // prefetchers expect, rather than every other few hundred bytes a head's whole tile at a
  // time (Xeon model 167, bench_paged_attention as above: 17.3-17.6 -> 18.5-19.7 GB/s; chunks
  // of 4 or 8 keys were slower, score_tile sums 16 keys at a time). Expanded quantized rows go
  // a head's whole tile at a time (one head's rows of scratch).
  constexpr int64_t kChunk = 16;
  const int64_t chunk = is_direct_k && is_direct_v ? kChunk : kDecodeKeyTile;
  int64_t slots[kDecodeKeyTile], k_ahead[kDecodeKeyTile], v_ahead[kDecodeKeyTile];
  const void* keys[kDecodeKeyTile];
  const void* values[kDecodeKeyTile];
  static constexpr float kOnes[kDecodeMaxRows] = {1, 1, 1, 1, 1, 1, 1, 1};
  DecodeAhead ahead;
  ahead.k_slots = k_ahead;
  ahead.v_slots = v_ahead;
  ahead.k_row = k_row;
  ahead.v_row = v_row;
  ahead.k_bytes = 2 * k_head;
  ahead.v_bytes = 2 * v_head;
  auto head_ahead = [&](int64_t hi, int64_t first) {
    ahead.k_head = a.k_cache + (w.kv_head + hi) * k_head;
    ahead.v_head = a.v_cache + (w.kv_head + hi) * v_head;
    return ahead.from(first);
  };
  // Rows c0 .. c0 + n - 1 of the tile (KV head g of one side) for the kernels: the cache's own
  // rows where they read them in place, else expanded into scratch.
  auto gather = [&](const uint16_t* cache, int64_t row, int64_t head, GgmlType type, bool is_direct, float* scratch,
                    int64_t dim, float fp8_scale, int64_t g, int64_t c0, int64_t n, const void** out) {
    for (int64_t j = c0; j < c0 + n; ++j) {
      const uint16_t* p = cache + slots[j] * row + g * head;
      if (is_direct) {
        out[j] = p;
      } else {
        cache_row_to_f32(type, p, scratch + j * dim, dim, fp8_scale);
        out[j] = scratch + j * dim;
      }
    }
  };
  for (int64_t k0 = w.key_begin; k0 < w.key_end; k0 += kDecodeKeyTile) {
    const int64_t nk = std::min(kDecodeKeyTile, w.key_end - k0);
    // The slots each key of this tile prefetches for (keys `distance` further on, in range).
    ahead.nk = distance > 0 ? std::clamp<int64_t>(w.key_end - (k0 + k_distance), 0, nk) : 0;
    ahead.nv = distance > 0 ? std::clamp<int64_t>(w.key_end - (k0 + v_distance), 0, nk) : 0;
    slots_of(a, table, k0 + k_distance, ahead.nk, k_ahead);
    slots_of(a, table, k0 + v_distance, ahead.nv, v_ahead);
    slots_of(a, table, k0, nk, slots);
    for (int64_t c0 = 0; c0 < nk; c0 += chunk) {
      const int64_t n = std::min(chunk, nk - c0);
      for (int64_t hi = 0; hi < w.kv_heads; ++hi) {
        gather(a.k_cache, k_row, k_head, a.k_type, is_direct_k, s.k_rows.data(), dk, a.k_scale, w.kv_head + hi, c0, n,
               keys);
        Kernels::template score_tile<R>(s.q.data() + hi * R * dk, dk, keys + c0, k_rows, n,
                                        sc + hi * R * kDecodeKeyTile + c0, s.part, head_ahead(hi, c0));
      }
    }
    for (int64_t i = 0; i < w.kv_heads * R; ++i) {
      Kernels::softmax_tile(sc + i * kDecodeKeyTile, nk, a.softcap, s.m[i], s.l[i], s.corr[i]);
    }
    for (int64_t c0 = 0; c0 < nk; c0 += chunk) {
      const int64_t n = std::min(chunk, nk - c0);
      for (int64_t hi = 0; hi < w.kv_heads; ++hi) {
        gather(a.v_cache, v_row, v_head, a.v_type, is_direct_v, s.v_rows.data(), dv, a.v_scale, w.kv_head + hi, c0, n,
               values);
        // The rescaling by the tile's new maxima once, with the first chunk (x 1 is exact).
        Kernels::template add_values_all<R>(s.o.data() + hi * R * dv, dv, sc + hi * R * kDecodeKeyTile + c0,
                                            c0 == 0 ? s.corr + hi * R : kOnes, values + c0, v_rows, n,
                                            head_ahead(hi, c0));
      }
    }
  }

  const int64_t num_splits = partials.splits[w.token];
  for (int64_t hi = 0; hi < w.kv_heads; ++hi) {
    for (int r = 0; r < R; ++r) {
      const int64_t h = head_of(hi, r), i = hi * R + r;
      const float* o = s.o.data() + i * dv;
      if (num_splits == 1) {
        write_output(a, w.token, h, o, s.l[i], rot_v);
      } else {
        const int64_t at = partials.offset[w.token] + h * num_splits + w.split;
        partials.m[at] = s.m[i];
        partials.l[at] = s.l[i];
        std::copy_n(o, dv, &partials.o[at * dv]);
      }
    }
  }
}

inline bool is_disabled() {
  static const bool kDisabled = [] {
    const char* v = std::getenv("IWB_ATTENTION_DECODE");
    return v != nullptr && std::atoi(v) == 0;
  }();
  return kDisabled;
}

}  // namespace decode_plan

// The whole decode attention with one family's tile kernels; false (writing nothing) for the
// batches and shapes paged_attention_decode.h lists (the CPU check is the caller's).
template <typename Kernels>
bool run_paged_attention_decode(const PagedAttentionArgs& a) {
  using namespace decode_plan;
  using ItemFn = void (*)(const PagedAttentionArgs&, const Item&, Scratch&, Partials&);
  static constexpr ItemFn kItemFns[kDecodeMaxRows + 1] = {nullptr,
                                                          run_item<Kernels, 1>,
                                                          run_item<Kernels, 2>,
                                                          run_item<Kernels, 3>,
                                                          run_item<Kernels, 4>,
                                                          run_item<Kernels, 5>,
                                                          run_item<Kernels, 6>,
                                                          run_item<Kernels, 7>,
                                                          run_item<Kernels, 8>};
  if (is_disabled() || a.is_batch_invariant) return false;
  const int64_t dk = a.head_dim, dv = a.head_dim_v;
  if (dk % Kernels::kColumnUnit != 0 || dv % Kernels::kColumnUnit != 0 || dk > kDecodeMaxHeadDim ||
      dv > kDecodeMaxHeadDim) {
    return false;
  }
  for (int64_t t = 0; t + 1 < a.num_tokens; ++t) {
    if (a.token_sequences[t + 1] == a.token_sequences[t] && a.positions[t + 1] == a.positions[t] + 1) return false;
  }
  const int64_t group = a.num_heads / a.num_kv_heads;
  const int64_t row_groups = (group + kDecodeMaxRows - 1) / kDecodeMaxRows;

  double work = 0;
  for (int64_t t = 0; t < a.num_tokens; ++t) work += static_cast<double>(a.positions[t] + 1);
  work *= static_cast<double>(a.num_heads * (dk + dv));
  const int num_threads = work >= kMinParallelWork ? resolve_threads(a.num_threads) : 1;

  // Split key ranges only when tokens x KV heads x row groups leave threads without items.
  const int64_t wanted = num_threads > 1 ? kItemsPerThread * num_threads : 1;
  auto splits_for = [&](int64_t heads_per_item) {
    const int64_t base_items = a.num_tokens * (a.num_kv_heads / heads_per_item) * row_groups;
    return base_items >= wanted ? int64_t{1} : (wanted + base_items - 1) / base_items;
  };
  auto keys_of = [&](int64_t t) {
    const int64_t pos = a.positions[t];
    return pos + 1 - (a.sliding_window > 0 ? std::max<int64_t>(0, pos - a.sliding_window + 1) : 0);
  };
  // All KV heads in one item where their rows fit, unless that leaves a thread without an item
  // (a short context, whose keys are not split: then one head per item, as two items of one
  // head each kept both threads of a 2-head model busy).
  int64_t heads_per_item = row_groups == 1 && a.num_heads <= kDecodeMaxItemRows ? a.num_kv_heads : 1;
  if (heads_per_item > 1) {
    int64_t grouped_items = 0;
    for (int64_t t = 0; t < a.num_tokens; ++t) {
      grouped_items +=
          std::clamp<int64_t>((keys_of(t) + kMinSplitKeys - 1) / kMinSplitKeys, 1, splits_for(heads_per_item));
    }
    if (grouped_items < num_threads) heads_per_item = 1;
  }
  const int64_t desired_splits = splits_for(heads_per_item);

  thread_local Partials partials;
  thread_local std::vector<Item> items;
  items.clear();
  partials.offset.assign(static_cast<size_t>(a.num_tokens), 0);
  partials.splits.assign(static_cast<size_t>(a.num_tokens), 1);
  int64_t num_partials = 0;
  for (int64_t t = 0; t < a.num_tokens; ++t) {
    const int64_t pos = a.positions[t];
    const int64_t keys = keys_of(t);
    const int64_t begin = pos + 1 - keys;
    int64_t splits = std::clamp<int64_t>((keys + kMinSplitKeys - 1) / kMinSplitKeys, 1, desired_splits);
    const int64_t size = ((keys + splits - 1) / splits + kDecodeKeyTile - 1) / kDecodeKeyTile * kDecodeKeyTile;
    splits = (keys + size - 1) / size;
    partials.splits[t] = splits;
    if (splits > 1) {
      partials.offset[t] = num_partials;
      num_partials += a.num_heads * splits;
    }
    for (int64_t g = 0; g < a.num_kv_heads; g += heads_per_item) {
      for (int64_t rg = 0, row0 = 0; rg < row_groups; ++rg) {
        const int64_t rows = group / row_groups + (rg < group % row_groups ? 1 : 0);
        for (int64_t sp = 0; sp < splits; ++sp) {
          items.push_back(
              {t, g, heads_per_item, row0, rows, sp, begin + sp * size, std::min(pos + 1, begin + (sp + 1) * size)});
        }
        row0 += rows;
      }
    }
  }
  partials.m.resize(static_cast<size_t>(num_partials));
  partials.l.resize(static_cast<size_t>(num_partials));
  partials.o.resize(static_cast<size_t>(num_partials * dv));

  const auto num_items = static_cast<int64_t>(items.size());
  const Item* const item_list = items.data();  // inside the region `items` names each thread's own
  Partials* const shared = &partials;
  std::atomic<int64_t> next_item{0};
  parallel_region(num_threads, [&](int, int) {
    thread_local Scratch s;
    auto grow = [](auto& v, int64_t n) {
      if (v.size() < static_cast<size_t>(n)) v.resize(static_cast<size_t>(n));
    };
    grow(s.q, kDecodeMaxItemRows * dk);
    grow(s.s, kDecodeMaxItemRows * kDecodeKeyTile);
    grow(s.o, kDecodeMaxItemRows * dv);
    if (a.k_type != GgmlType::F16) grow(s.k_rows, kDecodeKeyTile * dk);
    if (a.v_type != GgmlType::F16) grow(s.v_rows, kDecodeKeyTile * dv);
    for (int64_t i = next_item.fetch_add(1, std::memory_order_relaxed); i < num_items;
         i = next_item.fetch_add(1, std::memory_order_relaxed)) {
      kItemFns[item_list[i].rows](a, item_list[i], s, *shared);
    }
  });

  // Split ranges combined: out = sum_i o_i e^(m_i - M) / sum_i l_i e^(m_i - M).
  if (num_partials > 0) {
    const int64_t rot_v = a.is_rotated ? kv_rotation_size(a.v_type, dv, false) : 0;
    for (int64_t t = 0; t < a.num_tokens; ++t) {
      const int64_t splits = partials.splits[t];
      if (splits == 1) continue;
      for (int64_t h = 0; h < a.num_heads; ++h) {
        const int64_t first = partials.offset[t] + h * splits;
        float m = -INFINITY;
        for (int64_t sp = 0; sp < splits; ++sp) m = std::max(m, partials.m[first + sp]);
        float l = 0;
        float* out = a.output + (t * a.num_heads + h) * dv;
        std::fill_n(out, dv, 0.0f);
        for (int64_t sp = 0; sp < splits; ++sp) {
          const float w = std::exp(partials.m[first + sp] - m);
          l += w * partials.l[first + sp];
          const float* o = &partials.o[(first + sp) * dv];
          for (int64_t d = 0; d < dv; ++d) out[d] += w * o[d];
        }
        write_output(a, t, h, out, l, rot_v);
      }
    }
  }
  return true;
}

}  // namespace iwb::detail
