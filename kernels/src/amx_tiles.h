// Intel AMX tile configuration shared by the AMX prefill GEMMs (private to kernels/src; include
// only from files whose AMX functions carry IWB_AMX). A tile configuration is per thread: each
// kernel names the one it wants and ensure_tile_config loads it into this thread's tiles (on
// every call: see amx_tiles.cpp).
#pragma once

#include "quant_avx512_common.h"

#include <cstdint>

#define IWB_AMX                                                                                     \
  __attribute__((                                                                                   \
      target("amx-tile,amx-int8,amx-bf16,avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,avx512bf16," \
             "avx2,fma,f16c,bmi,bmi2")))

// tilestored of a whole 16 x 64-byte tile (or its configured rows) to `ptr` (64-byte rows),
// with the stored bytes as the asm's output. GCC's _tile_stored clobbers all memory instead,
// which forces every live vector (a kernel's accumulators) through the stack at each store.
#define IWB_TILE_STORE(tile, ptr)                                   \
  __asm__ volatile("tilestored %%tmm" #tile ", (%1,%2,1)"           \
                   : "=m"(*reinterpret_cast<uint8_t(*)[1024]>(ptr)) \
                   : "r"(static_cast<void*>(ptr)), "r"(64L))

namespace iwb::detail::amx {

// GCC's _tile_loadd names no memory input: after writing a buffer that tiles will load (packed
// weights, split activations), this keeps the compiler from moving the writes past the loads.
inline void tile_buffer_written() { __asm__ volatile("" ::: "memory"); }

// The 64-byte operand of ldtilecfg (palette 1: 8 tiles of up to 16 rows x 64 bytes).
struct alignas(64) TileConfig {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};  // bytes per row of tile i
  uint8_t rows[16] = {};    // rows of tile i
};
static_assert(sizeof(TileConfig) == 64);

// Loads `config` into this thread's tile registers. `key` names it (a kernel's own number plus
// whatever varies, e.g. the rows of a token tail); it is no longer used to skip the load.
void ensure_tile_config(uint32_t key, const TileConfig& config);

// All eight tiles whole (16 rows x 64 bytes), as the bf16 kernels use them.
inline void configure_full_tiles(uint32_t key) {
  TileConfig c;
  for (int t = 0; t < 8; ++t) c.rows[t] = 16, c.colsb[t] = 64;
  ensure_tile_config(key, c);
}

// 16 rows of 16 dwords (u[i]: row i) as 16 B-tile rows (out + 64 k: dword k of every row).
IWB_AVX512 inline void store_b_tile(const __m512i u[16], uint8_t* out) {
  for (int half = 0; half < 2; ++half) {
    __m512i z[8];
#pragma GCC unroll 8
    for (int i = 0; i < 8; ++i) {
      z[i] = half == 0 ? _mm512_inserti64x4(u[i], _mm512_castsi512_si256(u[i + 8]), 1)
                       : _mm512_shuffle_i64x2(u[i], u[i + 8], _MM_SHUFFLE(3, 2, 3, 2));
    }
    avx512::transpose_dword_halves(z);
#pragma GCC unroll 8
    for (int k = 0; k < 8; ++k) _mm512_store_si512(out + (8 * half + k) * 64, z[k]);
  }
}

// 16 rows of 16 f32 values (rows[i]: weight row i, lane t: token t; the C tiles' layout when
// the weights are the A operand) to an output by token: out + t * out_stride gets token t's
// values of the rows in `mask`, plus `add`, for the first `tokens` tokens.
IWB_AVX512 inline void store_by_token(const __m512i rows[16], int tokens, __mmask16 mask, __m512 add, float* out,
                                      int64_t out_stride) {
  alignas(64) float by_token[16 * 16];
  store_b_tile(rows, reinterpret_cast<uint8_t*>(by_token));  // a 16 x 16 dword transpose
  for (int t = 0; t < tokens; ++t)
    _mm512_mask_storeu_ps(out + t * out_stride, mask, _mm512_add_ps(_mm512_load_ps(by_token + 16 * t), add));
}

// 32 f32 values (x0: the first 16, x1: the next) as bf16 hi and lo (x - hi, rounded), in order:
// hi + lo keeps 16 significant bits (an f16 value exactly).
IWB_AMX inline void split_pair(__m512 x0, __m512 x1, __m512i* hi, __m512i* lo) {
  const __m512bh h = _mm512_cvtne2ps_pbh(x1, x0);
  const __m512i hv = reinterpret_cast<const __m512i&>(h);
  const __m512 h0 = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm512_castsi512_si256(hv)), 16));
  const __m512 h1 = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm512_extracti64x4_epi64(hv, 1)), 16));
  const __m512bh l = _mm512_cvtne2ps_pbh(_mm512_sub_ps(x1, h1), _mm512_sub_ps(x0, h0));
  *hi = hv;
  *lo = reinterpret_cast<const __m512i&>(l);
}

// The same for 32 f32 values at x, count < 32 reading zeros past it.
IWB_AMX inline void split_32(const float* x, int count, __m512i* hi, __m512i* lo) {
  const __mmask16 m0 = static_cast<__mmask16>(count >= 16 ? 0xFFFF : (1u << count) - 1);
  const __mmask16 m1 = static_cast<__mmask16>(count >= 32 ? 0xFFFF : count <= 16 ? 0 : (1u << (count - 16)) - 1);
  split_pair(_mm512_maskz_loadu_ps(m0, x), _mm512_maskz_loadu_ps(m1, x + 16), hi, lo);
}

}  // namespace iwb::detail::amx
