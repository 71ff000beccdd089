// Decode attention (see paged_attention_decode.h). Per item, for each tile of 64 keys: the
// scores of its R query rows (two keys at a time, each key's row read once and multiplied
// into R accumulators, the 16 keys' vectors then summed into one vector of 16 scores), the
// online softmax per row, and the values added into R x C output vectors held in registers
// (C columns of 16 at a time, R x C <= 24). A quantized cache side is expanded to f32 per tile
// first (and the queries and outputs rotated, as the tiled kernel does).
#include "paged_attention_decode.h"

#include "cpu_features.h"
#include "paged_attention_keys.h"
#include "paged_attention_quant.h"
#include "parallel.h"

#if defined(__x86_64__) || defined(__i386__)
#include "simd_math_avx512.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <vector>

#define IWB_AVX512 __attribute__((target("avx512f,avx512dq,avx2,fma,f16c")))

namespace iwb::detail {
namespace {

constexpr int64_t kKeyTile = 64;
constexpr int kMaxRows = 8;
constexpr int64_t kMaxHeadDim = 512;
// A key range shorter than this is not split further (each split adds a partial and a combine).
constexpr int64_t kMinSplitKeys = 512;
// Items per thread wanted before splitting: a thread the OS holds back leaves its later items
// to the others.
constexpr int64_t kItemsPerThread = 4;

struct Item {
  int64_t token;
  int64_t kv_head;
  int64_t row0;  // the first of the group's query heads this item takes
  int64_t rows;  // 1..kMaxRows
  int64_t split;
  int64_t key_begin, key_end;
};

struct Scratch {
  std::vector<float> q;               // [kMaxRows x head_dim], scaled (and rotated for a quantized K)
  std::vector<float> s;               // [kMaxRows x kKeyTile] scores, then probabilities
  std::vector<float> o;               // [kMaxRows x head_dim_v]
  std::vector<float> k_rows, v_rows;  // [kKeyTile x dim] a quantized side, expanded
  float m[kMaxRows], l[kMaxRows], corr[kMaxRows];
  __m512 part[kMaxRows * 16];  // per-key partial dot products
};

template <bool kF16>
IWB_AVX512 inline __m512 load16(const void* row, int64_t d) {
  if constexpr (kF16) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(static_cast<const uint16_t*>(row) + d)));
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

// The rows of the next tile's keys, prefetched a key or two at a time while this tile's are
// multiplied (all at once, they would fill the core's miss queue and be dropped).
struct Ahead {
  const uint16_t* k[kKeyTile];
  const uint16_t* v[kKeyTile];
  int64_t n = 0;
  int64_t k_bytes = 0, v_bytes = 0;
  __attribute__((always_inline)) void fetch(int64_t j) const {
    if (j < n) {
      prefetch_row(k[j], k_bytes);
      prefetch_row(v[j], v_bytes);
    }
  }
};

// s[r * kKeyTile + j] = q[r] . key[j] for j < nk (entries up to the next multiple of 16: 0).
template <int R, bool kF16>
IWB_AVX512 void score_tile(const float* q, int64_t dk, const void* const* keys, int64_t nk, float* s, __m512* part,
                           const Ahead& ahead) {
  for (int64_t j0 = 0; j0 < nk; j0 += 16) {
    const int64_t n = std::min<int64_t>(16, nk - j0);
    int64_t j = 0;
    for (; j + 2 <= n; j += 2) {  // two keys: 2R independent chains of multiply-adds
      ahead.fetch(j0 + j);
      ahead.fetch(j0 + j + 1);
      __m512 a0[R], a1[R];
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) a0[r] = a1[r] = _mm512_setzero_ps();
      const void* k0 = keys[j0 + j];
      const void* k1 = keys[j0 + j + 1];
      for (int64_t d = 0; d < dk; d += 16) {
        const __m512 x0 = load16<kF16>(k0, d), x1 = load16<kF16>(k1, d);
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
      ahead.fetch(j0 + j);
      __m512 a[R];
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) a[r] = _mm512_setzero_ps();
      for (int64_t d = 0; d < dk; d += 16) {
        const __m512 x = load16<kF16>(keys[j0 + j], d);
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

// o[r][col0 .. col0 + 16C) = o * corr[r] + sum_j p[r][j] * value[j], in registers over the tile.
template <int R, int C, bool kF16>
IWB_AVX512 void add_values(float* o, int64_t dv, int64_t col0, const float* p, const float* corr,
                           const void* const* values, int64_t nk) {
  __m512 acc[R][C];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    const __m512 c = _mm512_set1_ps(corr[r]);
#pragma GCC unroll 8
    for (int x = 0; x < C; ++x) acc[r][x] = _mm512_mul_ps(_mm512_loadu_ps(o + r * dv + col0 + 16 * x), c);
  }
  for (int64_t j = 0; j < nk; ++j) {
    __m512 v[C];
#pragma GCC unroll 8
    for (int x = 0; x < C; ++x) v[x] = load16<kF16>(values[j], col0 + 16 * x);
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

template <int R, bool kF16>
IWB_AVX512 void add_values_all(float* o, int64_t dv, const float* p, const float* corr, const void* const* values,
                               int64_t nk) {
  constexpr int C = R <= 3 ? 8 : R <= 6 ? 4 : 2;  // R x C accumulators, at most 24 registers
  int64_t col = 0;
  for (; col + 16 * C <= dv; col += 16 * C) add_values<R, C, kF16>(o, dv, col, p, corr, values, nk);
  for (; col < dv; col += 16) add_values<R, 1, kF16>(o, dv, col, p, corr, values, nk);
}

// Partial results of split key ranges: per (token, head, split) the running max, sum and the
// unnormalized output.
struct Partials {
  std::vector<int64_t> offset;  // [num_tokens]: the token's first (head, split) index
  std::vector<int64_t> splits;  // [num_tokens]
  std::vector<float> m, l, o;
};

template <int R>
IWB_AVX512 void run_item(const PagedAttentionArgs& a, const Item& w, Scratch& s, Partials& partials) {
  const int64_t group = a.num_heads / a.num_kv_heads;
  const int64_t dk = a.head_dim, dv = a.head_dim_v, g = w.kv_head;
  const int32_t* table = a.block_tables + a.token_sequences[w.token] * a.max_blocks_per_sequence;
  const int64_t rot_k = a.is_rotated ? kv_rotation_size(a.k_type, dk, true) : 0;
  const int64_t rot_v = a.is_rotated ? kv_rotation_size(a.v_type, dv, false) : 0;
  const bool is_f16_k = a.k_type == GgmlType::F16, is_f16_v = a.v_type == GgmlType::F16;
  const int64_t k_row = kv_row_units(a.k_type, a.num_kv_heads * dk),
                v_row = kv_row_units(a.v_type, a.num_kv_heads * dv);
  const int64_t k_head = kv_row_units(a.k_type, dk), v_head = kv_row_units(a.v_type, dv);
  float* q = s.q.data();
  float* sc = s.s.data();
  float* o = s.o.data();
  for (int r = 0; r < R; ++r) {
    const int64_t h = g * group + w.row0 + r;
    prepare_query(a, w.token, h, rot_k, q + r * dk);
    // A sink (gpt-oss) joins the first range's softmax as one more key without a value.
    const bool has_sink = a.sinks != nullptr && w.split == 0;
    s.m[r] = has_sink ? a.sinks[h] : -INFINITY;
    s.l[r] = has_sink ? 1.0f : 0.0f;
  }
  std::fill_n(o, R * dv, 0.0f);

  const int64_t distance = attention_prefetch_keys();
  int64_t slots[kKeyTile];
  const void* keys[kKeyTile];
  const void* values[kKeyTile];
  Ahead ahead;
  ahead.k_bytes = 2 * k_head;
  ahead.v_bytes = 2 * v_head;
  for (int64_t k0 = w.key_begin; k0 < w.key_end; k0 += kKeyTile) {
    const int64_t nk = std::min(kKeyTile, w.key_end - k0);
    if (distance > 0) {  // this range's keys `distance` further on, a tile's worth
      const int64_t first = k0 + distance;
      ahead.n = std::clamp<int64_t>(w.key_end - first, 0, kKeyTile);
      slots_of(a, table, first, ahead.n, slots);
      for (int64_t j = 0; j < ahead.n; ++j) {
        ahead.k[j] = a.k_cache + slots[j] * k_row + g * k_head;
        ahead.v[j] = a.v_cache + slots[j] * v_row + g * v_head;
      }
    }
    slots_of(a, table, k0, nk, slots);
    for (int64_t j = 0; j < nk; ++j) {
      const uint16_t* k = a.k_cache + slots[j] * k_row + g * k_head;
      const uint16_t* v = a.v_cache + slots[j] * v_row + g * v_head;
      if (is_f16_k) {
        keys[j] = k;
      } else {
        expand_kv_row(a.k_type, k, &s.k_rows[j * dk], dk, a.k_scale);
        keys[j] = &s.k_rows[j * dk];
      }
      if (is_f16_v) {
        values[j] = v;
      } else {
        expand_kv_row(a.v_type, v, &s.v_rows[j * dv], dv, a.v_scale);
        values[j] = &s.v_rows[j * dv];
      }
    }
    if (is_f16_k) {
      score_tile<R, true>(q, dk, keys, nk, sc, s.part, ahead);
    } else {
      score_tile<R, false>(q, dk, keys, nk, sc, s.part, ahead);
    }
    for (int r = 0; r < R; ++r) softmax_tile(sc + r * kKeyTile, nk, a.softcap, s.m[r], s.l[r], s.corr[r]);
    if (is_f16_v) {
      add_values_all<R, true>(o, dv, sc, s.corr, values, nk);
    } else {
      add_values_all<R, false>(o, dv, sc, s.corr, values, nk);
    }
  }

  const int64_t num_splits = partials.splits[w.token];
  for (int r = 0; r < R; ++r) {
    const int64_t h = g * group + w.row0 + r;
    if (num_splits == 1) {
      write_output(a, w.token, h, o + r * dv, s.l[r], rot_v);
    } else {
      const int64_t i = partials.offset[w.token] + h * num_splits + w.split;
      partials.m[i] = s.m[r];
      partials.l[i] = s.l[r];
      std::copy_n(o + r * dv, dv, &partials.o[i * dv]);
    }
  }
}

using ItemFn = void (*)(const PagedAttentionArgs&, const Item&, Scratch&, Partials&);
constexpr ItemFn kItemFns[kMaxRows + 1] = {nullptr,     run_item<1>, run_item<2>, run_item<3>, run_item<4>,
                                           run_item<5>, run_item<6>, run_item<7>, run_item<8>};

bool is_disabled() {
  static const bool kDisabled = [] {
    const char* v = std::getenv("IWB_ATTENTION_DECODE");
    return v != nullptr && std::atoi(v) == 0;
  }();
  return kDisabled;
}

}  // namespace

bool paged_attention_decode(const PagedAttentionArgs& a) {
  if (cpu_path() != CpuPath::Avx512 || is_disabled() || a.is_batch_invariant) return false;
  const int64_t dk = a.head_dim, dv = a.head_dim_v;
  if (dk % 16 != 0 || dv % 16 != 0 || dk > kMaxHeadDim || dv > kMaxHeadDim) return false;
  for (int64_t t = 0; t + 1 < a.num_tokens; ++t) {
    if (a.token_sequences[t + 1] == a.token_sequences[t] && a.positions[t + 1] == a.positions[t] + 1) return false;
  }
  const int64_t group = a.num_heads / a.num_kv_heads;
  const int64_t row_groups = (group + kMaxRows - 1) / kMaxRows;

  double work = 0;
  for (int64_t t = 0; t < a.num_tokens; ++t) work += static_cast<double>(a.positions[t] + 1);
  work *= static_cast<double>(a.num_heads * (dk + dv));
  const int num_threads = work >= kMinParallelWork ? resolve_threads(a.num_threads) : 1;

  // Split key ranges only when tokens x KV heads x row groups leave threads without items.
  const int64_t base_items = a.num_tokens * a.num_kv_heads * row_groups;
  const int64_t wanted = num_threads > 1 ? kItemsPerThread * num_threads : 1;
  const int64_t desired_splits = base_items >= wanted ? 1 : (wanted + base_items - 1) / base_items;

  thread_local Partials partials;
  thread_local std::vector<Item> items;
  items.clear();
  partials.offset.assign(static_cast<size_t>(a.num_tokens), 0);
  partials.splits.assign(static_cast<size_t>(a.num_tokens), 1);
  int64_t num_partials = 0;
  for (int64_t t = 0; t < a.num_tokens; ++t) {
    const int64_t pos = a.positions[t];
    const int64_t begin = a.sliding_window > 0 ? std::max<int64_t>(0, pos - a.sliding_window + 1) : 0;
    const int64_t keys = pos - begin + 1;
    int64_t splits = std::clamp<int64_t>((keys + kMinSplitKeys - 1) / kMinSplitKeys, 1, desired_splits);
    const int64_t size = ((keys + splits - 1) / splits + kKeyTile - 1) / kKeyTile * kKeyTile;
    splits = (keys + size - 1) / size;
    partials.splits[t] = splits;
    if (splits > 1) {
      partials.offset[t] = num_partials;
      num_partials += a.num_heads * splits;
    }
    for (int64_t g = 0; g < a.num_kv_heads; ++g) {
      for (int64_t rg = 0, row0 = 0; rg < row_groups; ++rg) {
        const int64_t rows = group / row_groups + (rg < group % row_groups ? 1 : 0);
        for (int64_t sp = 0; sp < splits; ++sp) {
          items.push_back({t, g, row0, rows, sp, begin + sp * size, std::min(pos + 1, begin + (sp + 1) * size)});
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
    grow(s.q, kMaxRows * dk);
    grow(s.s, kMaxRows * kKeyTile);
    grow(s.o, kMaxRows * dv);
    if (a.k_type != GgmlType::F16) grow(s.k_rows, kKeyTile * dk);
    if (a.v_type != GgmlType::F16) grow(s.v_rows, kKeyTile * dv);
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

#else

namespace iwb::detail {
bool paged_attention_decode(const PagedAttentionArgs&) { return false; }
}  // namespace iwb::detail

#endif
