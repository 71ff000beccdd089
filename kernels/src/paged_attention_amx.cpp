// Prompt attention on AMX tiles (see paged_attention_amx.h).
//
// Why: a prompt's attention grows with its depth, and the tiled kernel's f32 multiply-adds made
// it the larger part of a deep prefill (Xeon model 167, iwb bench pp512 @ d8192 on the default
// model: ~45% of the samples in the tiled kernel's score, value and softmax loops).
//
// Precision as the F16 AMX GEMM (float_gemm_amx.cpp): bf16 keeps 8 significant bits, so every
// operand is split, x = hi + lo (16 bits together: an f16 key or value exactly, an f32 query or
// probability to 2^-17), and each product takes three tile products, hi.hi + hi.lo + lo.hi
// (lo.lo, ~2^-16 of a term, dropped): the outputs agree with the f32 tiled kernel to about the
// same 1e-5 (test_attention_amx).
//
// Per work item (a run of tokens x the group's query heads = up to 768 rows, in tiles of 16; one
// KV head) and per tile of 64 keys:
//   keys    -> 4 B tiles of 16 keys per 32 head dims (hi, lo): a 16 x 16 dword transpose each;
//   values  -> B tiles of 32 keys (as pairs) x 16 columns (hi, lo): two rows interleaved;
//   scores  S = Q.K^T into 4 C tiles (16 rows x 64 keys), stored, for every row tile;
//   softmax per row in AVX-512 (mask, soft-cap, online max and sum; a row tile's 16 rescale
//           factors in one vector exp), P split into A tiles, O's rows rescaled where the max
//           moved; and between its rows, the previous row tile's
//   values  O = O + P.V: loaded into C tiles, multiplied into and stored back, four 16-column
//           tiles at a time (ValueJob).
// Tiles: 0, 1 A (Q or P, hi and lo); 2, 3 B (K or V, hi and lo); 4..7 C.
#include "paged_attention_amx.h"

#include "cpu_features.h"
#include "paged_attention_keys.h"
#include "paged_attention_quant.h"
#include "paged_attention_runs.h"
#include "parallel.h"

#if defined(__x86_64__)
#include "amx_tiles.h"
#include "simd_math_avx512.h"
#include "thread_buffer.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace iwb::detail {
namespace {

constexpr int64_t kKeyTile = 64;      // keys per tile: 4 B tiles of 16 (scores), 2 steps of 32 (values)
constexpr int64_t kTileBytes = 1024;  // 16 rows x 64 bytes
// Rows an item takes at most: each item converts and transposes every key and value tile of
// its range once, so more rows share that work (bench_paged_attention --tokens 512 at depth
// 8192, 2 threads, Xeon model 167: 256 rows a pass 176-180 ms, 384 164-166, 510 160-161, 768
// 152-155; 1,020 rows, 3 runs of 170 tokens and one of 2, 158-166). The buffers of 768 rows
// (queries, outputs, scores, probabilities: 1.2 MiB for heads of 128) stay in a core's L2.
constexpr int64_t kMaxItemRows = 768;
constexpr int64_t kMinItemRows = 64;
constexpr int64_t kMaxRunTokens = 256;
constexpr uint32_t kConfigKey = 0x400;

void configure() { amx::configure_full_tiles(kConfigKey); }

bool is_disabled() {
  static const bool kDisabled = [] {
    const char* v = std::getenv("IWB_ATTENTION_AMX");
    return v != nullptr && std::atoi(v) == 0;
  }();
  return kDisabled;
}

using WorkItem = PromptItem;

// One thread's buffers for one call, carved from a thread_buffer (64-byte aligned pieces).
struct Buffers {
  uint16_t* qh;          // [rows_pad x dk] bf16: the scaled queries' hi halves (A tiles, k-step ks at 32 ks)
  uint16_t* ql;          // and lo
  uint8_t* keys;         // [4 key groups][dk / 32 steps][hi, lo] B tiles
  uint8_t* values;       // [2 key steps][dv / 16 column tiles][hi, lo] B tiles
  float* scores;         // [row tiles][4 key groups] 16 x 16 f32 blocks
  uint8_t* probs;        // [row tiles][2 key steps][hi, lo] A tiles
  float* o;              // [rows_pad x dv]
  float* staging;        // 16 key rows (or 2 value rows) as f32
  float *m, *l;          // [rows_pad]
  int32_t *j_lo, *j_hi;  // [rows_pad] each row's visible keys in the current tile
  int32_t* visible;      // [row tiles] 2: every row sees every key of the tile, 1: some row some key
};

struct AmxAttentionTag {};

Buffers carve(int64_t rows_pad, int64_t dk, int64_t dv) {
  const int64_t steps = dk / 32, columns = dv / 16;
  int64_t sizes[] = {rows_pad * dk * 2,
                     rows_pad * dk * 2,
                     4 * steps * 2 * kTileBytes,
                     2 * columns * 2 * kTileBytes,
                     rows_pad / 16 * 4 * kTileBytes,
                     rows_pad / 16 * 2 * 2 * kTileBytes,
                     rows_pad * dv * 4,
                     std::max<int64_t>(16 * dk, 2 * dv) * 4,
                     rows_pad * 4,
                     rows_pad * 4,
                     rows_pad * 4,
                     rows_pad * 4,
                     rows_pad / 16 * 4};
  int64_t total = 0;
  for (int64_t& s : sizes) {
    s = (s + 63) / 64 * 64;
    total += s;
  }
  uint8_t* p = thread_buffer<AmxAttentionTag>(static_cast<size_t>(total));
  Buffers b;
  void* pieces[13];
  for (int i = 0; i < 13; ++i) {
    pieces[i] = p;
    p += sizes[i];
  }
  b.qh = static_cast<uint16_t*>(pieces[0]);
  b.ql = static_cast<uint16_t*>(pieces[1]);
  b.keys = static_cast<uint8_t*>(pieces[2]);
  b.values = static_cast<uint8_t*>(pieces[3]);
  b.scores = static_cast<float*>(pieces[4]);
  b.probs = static_cast<uint8_t*>(pieces[5]);
  b.o = static_cast<float*>(pieces[6]);
  b.staging = static_cast<float*>(pieces[7]);
  b.m = static_cast<float*>(pieces[8]);
  b.l = static_cast<float*>(pieces[9]);
  b.j_lo = static_cast<int32_t*>(pieces[10]);
  b.j_hi = static_cast<int32_t*>(pieces[11]);
  b.visible = static_cast<int32_t*>(pieces[12]);
  return b;
}

// The tile's keys (nk of kKeyTile; the rest zero) as B tiles: per group of 16 keys and 32-dim
// step, B[pair kk][key n] = the key's dims 2kk and 2kk + 1 (hi tile, then lo). Keys `ahead`
// further on are prefetched meanwhile (K and V rows).
IWB_AMX void prepare_keys(const PagedAttentionArgs& a, const int32_t* table, int64_t g, int64_t k0, int64_t nk,
                          int64_t key_end, const int64_t* slots, const Buffers& b) {
  const int64_t dk = a.head_dim, steps = dk / 32;
  const int64_t k_row = kv_row_units(a.k_type, a.num_kv_heads * dk), k_head = kv_row_units(a.k_type, dk);
  const int64_t v_row = paged_v_row_units(a), v_head = kv_row_units(a.v_type, a.head_dim_v);
  for (int64_t n = 0; n < 4; ++n) {
    uint8_t* out = b.keys + n * steps * 2 * kTileBytes;
    const int64_t j0 = 16 * n, count = std::clamp<int64_t>(nk - j0, 0, 16);
    if (count == 0) {  // past the keys: zeros (finite scores, masked later)
      std::memset(out, 0, static_cast<size_t>(steps * 2 * kTileBytes));
      continue;
    }
    const int64_t first = k0 + j0 + kKeyTile, ahead = std::clamp<int64_t>(key_end - first, 0, 16);
    int64_t ahead_slots[16];
    slots_of(a, table, first, ahead, ahead_slots);
    for (int64_t j = 0; j < ahead; ++j) {
      prefetch_row(a.k_cache + ahead_slots[j] * k_row + g * k_head, 2 * k_head);
      prefetch_row(a.v_cache + ahead_slots[j] * v_row + g * v_head, 2 * v_head);
    }
    for (int64_t j = 0; j < 16; ++j) {
      float* dst = b.staging + j * dk;
      if (j < count) {
        cache_row_to_f32(a.k_type, a.k_cache + slots[j0 + j] * k_row + g * k_head, dst, dk, a.k_scale);
      } else {
        std::fill_n(dst, dk, 0.0f);
      }
    }
    for (int64_t ks = 0; ks < steps; ++ks) {
      __m512i hi[16], lo[16];
      for (int j = 0; j < 16; ++j) amx::split_32(b.staging + j * dk + 32 * ks, 32, &hi[j], &lo[j]);
      amx::store_b_tile(hi, out + (2 * ks) * kTileBytes);
      amx::store_b_tile(lo, out + (2 * ks + 1) * kTileBytes);
    }
  }
}

// The tile's values (nk of kKeyTile; the rest zero) as B tiles: per step of 32 keys and tile of
// 16 columns, B[pair kk][2c + e] = value (key 2kk + e, column c) (hi tile, then lo).
IWB_AMX void prepare_values(const PagedAttentionArgs& a, int64_t g, int64_t nk, const int64_t* slots,
                            const Buffers& b) {
  const int64_t dv = a.head_dim_v, columns = dv / 16;
  const int64_t v_row = paged_v_row_units(a), v_head = kv_row_units(a.v_type, dv);
  // [a0 .. a15, b0 .. b15] -> [a0, b0, a1, b1, ...]
  const __m512i interleave = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8, 23, 7, 22,
                                              6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
  const int64_t key_steps = nk > 32 ? 2 : 1;
  for (int64_t step = 0; step < key_steps; ++step) {
    uint8_t* out = b.values + step * columns * 2 * kTileBytes;
    for (int64_t kk = 0; kk < 16; ++kk) {
      float* rows[2] = {b.staging, b.staging + dv};
      for (int e = 0; e < 2; ++e) {
        const int64_t j = 32 * step + 2 * kk + e;
        if (j < nk) {
          cache_row_to_f32(a.v_type, a.v_cache + slots[j] * v_row + g * v_head, rows[e], dv, a.v_scale);
        } else {
          std::fill_n(rows[e], dv, 0.0f);  // zero, not stale: its probability 0 times it must stay 0
        }
      }
      for (int64_t c = 0; c < columns; ++c) {
        __m512i hi, lo;
        amx::split_pair(_mm512_loadu_ps(rows[0] + 16 * c), _mm512_loadu_ps(rows[1] + 16 * c), &hi, &lo);
        uint8_t* tile = out + 2 * c * kTileBytes + kk * 64;
        _mm512_store_si512(tile, _mm512_permutexvar_epi16(interleave, hi));
        _mm512_store_si512(tile + kTileBytes, _mm512_permutexvar_epi16(interleave, lo));
      }
    }
  }
}

// C tile `c` += A . B for split operands: B hi and lo (tiles 2, 3) loaded from b (lo 1 KiB
// after hi), then A hi . B hi + A lo . B hi + A hi . B lo with A hi and lo in tiles 0, 1. A
// macro because the tile numbers must be literals in the instructions.
#define IWB_SPLIT_PRODUCT(c, b)           \
  do {                                    \
    _tile_loadd(2, (b), 64);              \
    _tile_loadd(3, (b) + kTileBytes, 64); \
    _tile_dpbf16ps(c, 0, 2);              \
    _tile_dpbf16ps(c, 1, 2);              \
    _tile_dpbf16ps(c, 0, 3);              \
  } while (0)

// Scores of one row tile against the tile's 64 keys: 4 C tiles of 16 x 16, stored in order.
IWB_AMX void score_row_tile(const uint16_t* qh, const uint16_t* ql, int64_t dk, const uint8_t* keys, float* out) {
  const int64_t steps = dk / 32, stride = dk * 2;
  const int64_t group_bytes = steps * 2 * kTileBytes;
  _tile_zero(4);
  _tile_zero(5);
  _tile_zero(6);
  _tile_zero(7);
  for (int64_t ks = 0; ks < steps; ++ks) {
    _tile_loadd(0, qh + 32 * ks, stride);
    _tile_loadd(1, ql + 32 * ks, stride);
    const uint8_t* k = keys + 2 * ks * kTileBytes;
    IWB_SPLIT_PRODUCT(4, k);
    IWB_SPLIT_PRODUCT(5, k + group_bytes);
    IWB_SPLIT_PRODUCT(6, k + 2 * group_bytes);
    IWB_SPLIT_PRODUCT(7, k + 3 * group_bytes);
  }
  _tile_stored(4, out, 64);
  _tile_stored(5, out + 256, 64);
  _tile_stored(6, out + 512, 64);
  _tile_stored(7, out + 768, 64);
}

// One row tile's O = O + P . V (its rows already rescaled), in pieces so that they can be
// issued between the rows of the next row tile's softmax: the tile unit then multiplies while
// the vector units run the softmax, where one after the other left each idle much of the time
// (bench_paged_attention --tokens 512 at depth 8192: 151-153 -> 139-142 ms a pass). Piece k:
// column group k / key_steps (four 16-column tiles, C tiles 4..7), key step k % key_steps (32
// keys); a group's first step loads its outputs into the C tiles, its last stores them (the
// tiles hold them in between: the softmax uses none). Pieces of one column tile each (16 for
// heads of 128, one per row) measured the same.
struct ValueJob {
  float* o;  // the row tile's first output row (row stride o_stride bytes)
  int64_t o_stride;
  const uint8_t* probs;   // the row tile's A tiles: [key step][hi, lo]
  const uint8_t* values;  // the B tiles: [key step][column tile][hi, lo]
  int64_t columns;        // 16-column tiles of the outputs
  int64_t key_steps;      // 1 or 2
  int pieces() const { return static_cast<int>((columns + 3) / 4 * key_steps); }
};

IWB_AMX void value_piece(const ValueJob& j, int piece) {
  amx::tile_buffer_written();  // the probabilities and rescaled outputs stored before the loads
  const int64_t c0 = 4 * (piece / j.key_steps), step = piece % j.key_steps;
  const int count = static_cast<int>(std::min<int64_t>(4, j.columns - c0));
  float* o = j.o + 16 * c0;
  if (step == 0) {
    _tile_loadd(4, o, j.o_stride);
    if (count > 1) _tile_loadd(5, o + 16, j.o_stride);
    if (count > 2) _tile_loadd(6, o + 32, j.o_stride);
    if (count > 3) _tile_loadd(7, o + 48, j.o_stride);
  }
  const uint8_t* p = j.probs + step * 2 * kTileBytes;
  _tile_loadd(0, p, 64);
  _tile_loadd(1, p + kTileBytes, 64);
  const uint8_t* v = j.values + (step * j.columns + c0) * 2 * kTileBytes;
  IWB_SPLIT_PRODUCT(4, v);
  if (count > 1) IWB_SPLIT_PRODUCT(5, v + 2 * kTileBytes);
  if (count > 2) IWB_SPLIT_PRODUCT(6, v + 4 * kTileBytes);
  if (count > 3) IWB_SPLIT_PRODUCT(7, v + 6 * kTileBytes);
  if (step == j.key_steps - 1) {
    _tile_stored(4, o, j.o_stride);
    if (count > 1) _tile_stored(5, o + 16, j.o_stride);
    if (count > 2) _tile_stored(6, o + 32, j.o_stride);
    if (count > 3) _tile_stored(7, o + 48, j.o_stride);
  }
}

// The online softmax of a row tile's rows (rows 0 .. count - 1; their 64 scores in the tile's
// four blocks, row i of each) over keys j_lo[i] .. j_hi[i] (none when j_lo > j_hi: the row's
// probabilities zero, its state unchanged): soft-capped, masked, the running max m and sum l
// moved on, the probabilities split into the row tile's A tiles (row i, hi and lo) and the
// row's output o (row stride dv) rescaled by exp(m_old - m_new) where the max moved. First
// every row's new max (the masked scores stored back), then the 16 rescale factors in one
// vector exp, then the rows.
//
// kAllVisible: every row of the tile sees all 64 keys (most tiles of a deep prompt), so no row
// is masked and no key holds -inf: the masks, their stores and the -inf test are skipped.
template <bool kAllVisible>
IWB_AMX void softmax_rows(float* scores, int64_t count, const int32_t* j_lo, const int32_t* j_hi, float softcap,
                          float* m, float* l, float* o, int64_t dv, uint8_t* probs, const ValueJob* pending) {
  const __m512i iota = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  alignas(64) float m_new[16], corr[16];
  __mmask16 visible = 0;
  for (int64_t i = 0; i < 16; ++i) {
    m_new[i] = i < count ? m[i] : 0.0f;
    if (i >= count || (!kAllVisible && j_lo[i] > j_hi[i])) continue;
    visible = static_cast<__mmask16>(visible | (1u << i));
    __m512 vmax = _mm512_set1_ps(-INFINITY);
#pragma GCC unroll 4
    for (int c = 0; c < 4; ++c) {
      float* x_at = scores + c * 256 + i * 16;
      __m512 x = _mm512_loadu_ps(x_at);
      if constexpr (kAllVisible) {
        if (softcap > 0.0f) {
          x = soft_cap_avx512(x, softcap);
          _mm512_storeu_ps(x_at, x);
        }
      } else {
        const __m512i j = _mm512_add_epi32(iota, _mm512_set1_epi32(16 * c));
        const __mmask16 mask = _mm512_cmp_epi32_mask(j, _mm512_set1_epi32(j_lo[i]), _MM_CMPINT_NLT) &
                               _mm512_cmp_epi32_mask(j, _mm512_set1_epi32(j_hi[i]), _MM_CMPINT_LE);
        if (softcap > 0.0f) x = soft_cap_avx512(x, softcap);
        x = _mm512_mask_mov_ps(_mm512_set1_ps(-INFINITY), mask, x);
        _mm512_storeu_ps(x_at, x);
      }
      vmax = _mm512_max_ps(vmax, x);
    }
    m_new[i] = std::max(m[i], _mm512_reduce_max_ps(vmax));
  }
  // exp(m_old - m_new): 0 on a row's first visible tile (m_old = -inf) without a sink; rows
  // not visible here keep 1 (their -inf - -inf would be NaN).
  const __m512 m_old = _mm512_maskz_loadu_ps(static_cast<__mmask16>((1u << count) - 1), m);
  const __m512 m_now = _mm512_load_ps(m_new);
  _mm512_store_ps(corr, _mm512_mask_mov_ps(_mm512_set1_ps(1.0f), visible, exp_avx512(_mm512_sub_ps(m_old, m_now))));
  // The previous row tile's value products, spread over this tile's rows.
  const int pieces = pending != nullptr ? pending->pieces() : 0;
  int issued = 0;
  for (int64_t i = 0; i < count; ++i) {
    for (; issued < pieces && issued * 16 <= i * pieces; ++issued) value_piece(*pending, issued);
    if (((visible >> i) & 1) == 0) {
      for (int t = 0; t < 4; ++t) _mm512_store_si512(probs + t * kTileBytes + i * 64, _mm512_setzero_si512());
      continue;
    }
    const __m512 mv = _mm512_set1_ps(m_new[i]);
    __m512 e[4];
    __m512 vsum = _mm512_setzero_ps();
#pragma GCC unroll 4
    for (int c = 0; c < 4; ++c) {
      // Masked keys hold -inf: exactly 0 (exp_avx512 clamps its input, so not by itself).
      const __m512 x = _mm512_loadu_ps(scores + c * 256 + i * 16);
      if constexpr (kAllVisible) {
        e[c] = exp_avx512(_mm512_sub_ps(x, mv));
      } else {
        const __mmask16 kept = _mm512_cmp_ps_mask(x, _mm512_set1_ps(-INFINITY), _CMP_NEQ_OQ);
        e[c] = _mm512_maskz_mov_ps(kept, exp_avx512(_mm512_sub_ps(x, mv)));
      }
      vsum = _mm512_add_ps(vsum, e[c]);
    }
    l[i] = l[i] * corr[i] + _mm512_reduce_add_ps(vsum);
    m[i] = m_new[i];
#pragma GCC unroll 2
    for (int step = 0; step < 2; ++step) {
      __m512i hi, lo;
      amx::split_pair(e[2 * step], e[2 * step + 1], &hi, &lo);
      uint8_t* tile = probs + step * 2 * kTileBytes + i * 64;
      _mm512_store_si512(tile, hi);
      _mm512_store_si512(tile + kTileBytes, lo);
    }
    if (corr[i] == 1.0f) continue;  // O = O * corr (+ P.V next): only rows whose max moved
    const __m512 cv = _mm512_set1_ps(corr[i]);
    float* oi = o + i * dv;
    for (int64_t d = 0; d < dv; d += 16) _mm512_storeu_ps(oi + d, _mm512_mul_ps(_mm512_loadu_ps(oi + d), cv));
  }
  for (; issued < pieces; ++issued) value_piece(*pending, issued);
}

IWB_AMX void run_item(const PagedAttentionArgs& a, const WorkItem& w) {
  const int64_t group = a.num_heads / a.num_kv_heads;
  const int64_t dk = a.head_dim, dv = a.head_dim_v, steps = dk / 32, columns = dv / 16;
  const int64_t rows = w.num_tokens * group, row_tiles = (rows + 15) / 16, rows_pad = 16 * row_tiles;
  const Buffers b = carve(rows_pad, dk, dv);
  const auto [table, first_pos, last_pos, k_begin, rot_k, rot_v] = prompt_run(a, w);

  // Row r = token r / group, head r % group of the KV head: the scaled query split into A tiles'
  // rows; padding rows zero (their scores are never read, their probabilities stay zero).
  for (int64_t r = 0; r < rows_pad; ++r) {
    uint16_t* hi_row = b.qh + r * dk;
    uint16_t* lo_row = b.ql + r * dk;
    if (r >= rows) {
      std::fill_n(hi_row, dk, uint16_t{0});
      std::fill_n(lo_row, dk, uint16_t{0});
      continue;
    }
    const int64_t t = w.first_token + r / group, h = w.kv_head * group + r % group;
    prepare_query(a, t, h, rot_k, b.staging);
    for (int64_t ks = 0; ks < steps; ++ks) {
      __m512i hi, lo;
      amx::split_32(b.staging + 32 * ks, 32, &hi, &lo);
      _mm512_storeu_si512(hi_row + 32 * ks, hi);
      _mm512_storeu_si512(lo_row + 32 * ks, lo);
    }
    // A sink (gpt-oss) starts the online softmax as one extra key with no value: m = sink, l = 1.
    b.m[r] = a.sinks ? a.sinks[h] : -INFINITY;
    b.l[r] = a.sinks ? 1.0f : 0.0f;
  }
  std::fill_n(b.o, rows_pad * dv, 0.0f);
  std::memset(b.probs, 0, static_cast<size_t>(row_tiles * 4 * kTileBytes));
  amx::tile_buffer_written();

  int64_t slots[kKeyTile];
  for (int64_t k0 = k_begin; k0 <= last_pos; k0 += kKeyTile) {
    const int64_t nk = std::min(kKeyTile, last_pos - k0 + 1);
    slots_of(a, table, k0, nk, slots);
    prepare_keys(a, table, w.kv_head, k0, nk, last_pos + 1, slots, b);
    prepare_values(a, w.kv_head, nk, slots, b);
    amx::tile_buffer_written();
    const int64_t key_steps = nk > 32 ? 2 : 1;
    // Three passes over the row tiles (scores, softmax, values) rather than one row tile after
    // another, so the out-of-order core can run one tile's vector work beside another's tile
    // products.
    for (int64_t rt = 0; rt < row_tiles; ++rt) {
      // Each row's visible keys: k0 + j for lo <= k0 + j <= pos, j < nk. A row tile with none
      // is skipped (its probabilities are zero and its outputs unchanged).
      bool any_visible = false, all_visible = true;
      for (int64_t r = 16 * rt; r < std::min(rows, 16 * rt + 16); ++r) {
        const int64_t pos = first_pos + r / group;
        const int64_t lo = a.sliding_window > 0 ? std::max<int64_t>(0, pos - a.sliding_window + 1) : 0;
        b.j_lo[r] = static_cast<int32_t>(std::max<int64_t>(0, lo - k0));
        b.j_hi[r] = static_cast<int32_t>(std::min(nk - 1, pos - k0));
        any_visible |= b.j_lo[r] <= b.j_hi[r];
        all_visible &= b.j_lo[r] == 0 && b.j_hi[r] == kKeyTile - 1;
      }
      b.visible[rt] = all_visible ? 2 : any_visible ? 1 : 0;
      if (any_visible) score_row_tile(b.qh + 16 * rt * dk, b.ql + 16 * rt * dk, dk, b.keys, b.scores + rt * 4 * 256);
    }
    // Each row tile's softmax, with the previous visible row tile's value products issued
    // between its rows (ValueJob), and the last one's after.
    ValueJob pending{};
    bool has_pending = false;
    for (int64_t rt = 0; rt < row_tiles; ++rt) {
      if (b.visible[rt] == 0) continue;
      const int64_t r0 = 16 * rt;
      const auto softmax = b.visible[rt] == 2 ? softmax_rows<true> : softmax_rows<false>;
      softmax(b.scores + rt * 4 * 256, std::min<int64_t>(16, rows - r0), b.j_lo + r0, b.j_hi + r0, a.softcap, b.m + r0,
              b.l + r0, b.o + r0 * dv, dv, b.probs + rt * 4 * kTileBytes, has_pending ? &pending : nullptr);
      pending = ValueJob{b.o + r0 * dv, dv * 4, b.probs + rt * 4 * kTileBytes, b.values, columns, key_steps};
      has_pending = true;
    }
    if (has_pending) {
      for (int k = 0; k < pending.pieces(); ++k) value_piece(pending, k);
    }
    amx::tile_buffer_written();
  }
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t t = w.first_token + r / group, h = w.kv_head * group + r % group;
    write_output(a, t, h, b.o + r * dv, b.l[r], rot_v);
  }
}

// Tokens a run takes: up to kMaxItemRows rows, fewer where that leaves under two items a
// thread (down to kMinItemRows rows), and the runs of even length (512 tokens at most 170:
// 4 x 128, not 3 x 170 + 2).
int64_t run_tokens(const PagedAttentionArgs& a, int num_threads) {
  const int64_t group = a.num_heads / a.num_kv_heads;
  const int64_t longest = std::clamp<int64_t>(kMaxItemRows / group, 1, kMaxRunTokens);
  const int64_t shortest = std::min(longest, std::max<int64_t>(1, (kMinItemRows + group - 1) / group));
  const int64_t runs_wanted = (2 * num_threads + a.num_kv_heads - 1) / a.num_kv_heads;
  const int64_t run = std::clamp<int64_t>((a.num_tokens + runs_wanted - 1) / runs_wanted, shortest, longest);
  const int64_t runs = (a.num_tokens + run - 1) / run;
  return std::max<int64_t>(1, (a.num_tokens + runs - 1) / runs);
}

}  // namespace

bool paged_attention_amx(const PagedAttentionArgs& a) {
  if (cpu_path() != CpuPath::Avx512 || !has_amx_bf16() || is_disabled()) return false;
  const int64_t dk = a.head_dim, dv = a.head_dim_v;
  if (dk % 32 != 0 || dv % 16 != 0 || dk > 512 || dv > 512) return false;
  const int num_threads = prompt_threads(a);
  thread_local std::vector<WorkItem> items;
  prompt_items(a, run_tokens(a, num_threads), items);
  const auto num_items = static_cast<int64_t>(items.size());
  const WorkItem* const item_list = items.data();  // inside the region `items` names each thread's own
  std::atomic<int64_t> next_item{0};
  parallel_region(num_threads, [&](int, int) {
    configure();
    for (int64_t i = next_item.fetch_add(1, std::memory_order_relaxed); i < num_items;
         i = next_item.fetch_add(1, std::memory_order_relaxed)) {
      run_item(a, item_list[i]);
    }
  });
  return true;
}

}  // namespace iwb::detail

#else

namespace iwb::detail {
bool paged_attention_amx(const PagedAttentionArgs&) { return false; }
}  // namespace iwb::detail

#endif
