// AMX int8 prefill GEMM for the K-quants (Q4_K, Q5_K, Q6_K) with Q8_K activations. The integer
// sub-block scales are folded into the weights when the panel is repacked: w = sc * q (Q4_K,
// Q5_K: 0..1953) or sc * (q - 32) (Q6_K: -4064..4096) does not fit a byte, so it is split as
// w = 128 * hi + lo (lo 0..127, hi -32..32) into two B tiles, and per super-block two int32
// tiles (hi and lo, tdpbssd over 4 steps of 64 elements) give sum(w * a) = 128 * C_hi + C_lo
// exactly. Only one f32 scale per super-block and token remains (d_w * d_a), instead of one per
// 16- or 32-element sub-block: the vector units, not the tiles, bound an int8 AMX GEMM. The
// Q4_K/Q5_K mins meet the activations' sub-block sums through vpdpwssd, as in the VNNI GEMM.
//
// Loop order per panel (kQuantGemmAmxRows rows, 16-row sub-panels): groups of 32 tokens (two A
// tiles), then super-blocks, then sub-panels. A group's sums stay in L1 over all super-blocks
// and go to `out` from the last one's scaling; the packed panel (34 KiB a super-block) is read
// from L2 once per group.
#include "quant_dot.h"

#if defined(__x86_64__)
#include "amx_tiles.h"

#include <algorithm>

namespace iwb::detail {
namespace {

using namespace avx512;

constexpr int kRowsPerTile = 16;
constexpr int kSubPanels = kQuantGemmAmxRows / kRowsPerTile;
constexpr int64_t kTileBytes = 1024;                  // one B tile: 16 rows x 64 bytes
constexpr int64_t kWeightBytes = 4 * 2 * kTileBytes;  // 4 steps of 64 elements, hi and lo
// Per sub-panel and super-block: the weight tiles, d[16], dmin[16], 4 x 16 min pairs.
constexpr int64_t kSubBytes = kWeightBytes + 64 + 64 + 256;
constexpr uint32_t kConfigKey = 0x200;

// Tiles: 0, 1 A (tokens 0..15 and 16..31 of a group, 64 bytes); 2, 3 B hi and lo; 4, 5 C hi
// and lo of A 0; 6, 7 of A 1.
void configure(int tokens0, int tokens1) {
  amx::TileConfig c;
  const int tokens[2] = {tokens0, tokens1};
  for (int a = 0; a < 2; ++a) {
    if (tokens[a] == 0) continue;
    c.rows[a] = static_cast<uint8_t>(tokens[a]), c.colsb[a] = 64;
    for (int t : {4 + 2 * a, 5 + 2 * a}) c.rows[t] = static_cast<uint8_t>(tokens[a]), c.colsb[t] = 64;
  }
  for (int t : {2, 3}) c.rows[t] = 16, c.colsb[t] = 64;
  amx::ensure_tile_config(kConfigKey + static_cast<uint32_t>(tokens0 * 32 + tokens1), c);
}

template <typename Block>
constexpr bool kIsQ6 = std::is_same_v<Block, BlockQ6_K>;

// Per row the scales of chunk c's 64 elements as 16-bit lanes: [elements 0..31 | 32..63].
// Q4_K/Q5_K: from the row's 8 unpacked 6-bit scales (`sc`, byte j: sub-block j).
template <typename Block>
IWB_AVX512 inline void chunk_scales(const Block& blk, uint64_t sc, int c, __m512i* s_low, __m512i* s_high) {
  if constexpr (kIsQ6<Block>) {  // 16-element groups 4c .. 4c+3
    const int8_t* g = blk.scales + 4 * c;
    *s_low = _mm512_inserti64x4(_mm512_set1_epi16(g[0]), _mm256_set1_epi16(g[1]), 1);
    *s_high = _mm512_inserti64x4(_mm512_set1_epi16(g[2]), _mm256_set1_epi16(g[3]), 1);
  } else {  // 32-element sub-blocks 2c and 2c+1
    *s_low = _mm512_set1_epi16(static_cast<short>((sc >> (16 * c)) & 0xFF));
    *s_high = _mm512_set1_epi16(static_cast<short>((sc >> (16 * c + 8)) & 0xFF));
  }
}

// Super-block b of 16 rows into out (kSubBytes, 64-byte aligned).
template <typename Block>
IWB_AVX512 void pack_sub_super_block(const Block* const* rows, int64_t b, uint8_t* out) {
  // Each row's 6-bit scales and mins unpacked once (they were unpacked again for every chunk).
  uint64_t sc[16] = {}, m[16] = {};
  if constexpr (!kIsQ6<Block>) {
    for (int i = 0; i < 16; ++i) unpack_k4_scales(rows[i][b].scales, &sc[i], &m[i]);
  }
  for (int c = 0; c < 4; ++c) {
    __m512i hi[16], lo[16];
#pragma GCC unroll 2
    for (int i = 0; i < 16; ++i) {
      const __m512i q = unpack_chunk(rows[i][b], c);
      __m512i s_low, s_high;
      chunk_scales(rows[i][b], sc[i], c, &s_low, &s_high);
      __m512i w0 = _mm512_cvtepu8_epi16(_mm512_castsi512_si256(q)),
              w1 = _mm512_cvtepu8_epi16(_mm512_extracti64x4_epi64(q, 1));
      if constexpr (kIsQ6<Block>) {
        w0 = _mm512_sub_epi16(w0, _mm512_set1_epi16(32));
        w1 = _mm512_sub_epi16(w1, _mm512_set1_epi16(32));
      }
      w0 = _mm512_mullo_epi16(w0, s_low);
      w1 = _mm512_mullo_epi16(w1, s_high);
      // To bytes by vpacksswb (the values fit, nothing saturates), which interleaves its two
      // sources by 128-bit lane, then one qword permute back to element order: 2 uops a
      // vector where two vpmovwb and an insert took 5.
      const __m512i mask = _mm512_set1_epi16(127);
      const __m512i order = _mm512_setr_epi64(0, 2, 4, 6, 1, 3, 5, 7);
      hi[i] = _mm512_permutexvar_epi64(order, _mm512_packs_epi16(_mm512_srai_epi16(w0, 7), _mm512_srai_epi16(w1, 7)));
      lo[i] =
          _mm512_permutexvar_epi64(order, _mm512_packs_epi16(_mm512_and_si512(w0, mask), _mm512_and_si512(w1, mask)));
    }
    amx::store_b_tile(hi, out + (2 * c) * kTileBytes);
    amx::store_b_tile(lo, out + (2 * c + 1) * kTileBytes);
  }
  auto* d = reinterpret_cast<float*>(out + kWeightBytes);
  float* dmin = d + 16;
  auto* min_pairs = reinterpret_cast<int32_t*>(dmin + 16);
  for (int i = 0; i < 16; ++i) {
    d[i] = half(rows[i][b].d);
    if constexpr (!kIsQ6<Block>) {
      dmin[i] = half(rows[i][b].dmin);
      for (int j = 0; j < 4; ++j) {
        min_pairs[j * 16 + i] =
            static_cast<int32_t>(((m[i] >> (16 * j)) & 0xFF) | (((m[i] >> (16 * j + 8)) & 0xFF) << 16));
      }
    } else {
      dmin[i] = 0.0f;
    }
  }
}

// The 8 sub-block sums of a Q8_K block (pairs of its 16-element bsums) as int16, 4 dwords.
IWB_AVX512 inline __m128i sub_block_sums(const BlockQ8_K& x) {
  const __m256i bs = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.bsums));
  return _mm256_cvtepi32_epi16(_mm256_madd_epi16(bs, _mm256_set1_epi16(1)));
}

// Where a group's sums go: read from acc (kQuantGemmAmxRows apart), written to dest
// (dest_stride apart, the lanes of mask) — acc itself, or `out` after the last super-block.
struct GroupSums {
  const float* acc;
  float* dest;
  int64_t dest_stride;
  __mmask16 mask;
};

// The group's sums (lane i: weight row i) += token t's share of super-block b, from the C tiles
// (hi, lo) as stored: 128 * hi + lo, times d_w * d_a, less the mins.

template <typename Block>
IWB_AMX inline void scale_tiles(const int32_t* c_hi, const int32_t* c_lo, const uint8_t* sub, const int32_t* sums,
                                const uint8_t* first_row, size_t act_stride, int64_t b, int tokens,
                                const GroupSums& to) {
  const auto* dp = reinterpret_cast<const float*>(sub + kWeightBytes);
  const __m512 dw = _mm512_load_ps(dp);
  for (int t = 0; t < tokens; ++t) {
    const BlockQ8_K& x = reinterpret_cast<const BlockQ8_K*>(first_row + t * act_stride)[b];
    const __m512i total =
        _mm512_add_epi32(_mm512_slli_epi32(_mm512_load_si512(c_hi + 16 * t), 7), _mm512_load_si512(c_lo + 16 * t));
    __m512 sum = _mm512_load_ps(to.acc + t * kQuantGemmAmxRows);
    if constexpr (kIsQ6<Block>) {
      sum = _mm512_fmadd_ps(_mm512_cvtepi32_ps(total), _mm512_mul_ps(dw, _mm512_set1_ps(x.d)), sum);
    } else {
      const auto* min_pairs = reinterpret_cast<const int32_t*>(dp + 32);
      __m512i mins = _mm512_setzero_si512();
#pragma GCC unroll 4
      for (int j = 0; j < 4; ++j)
        mins = _mm512_dpwssd_epi32(mins, _mm512_load_si512(min_pairs + 16 * j), _mm512_set1_epi32(sums[4 * t + j]));
      const __m512 f = _mm512_fmsub_ps(_mm512_cvtepi32_ps(total), dw,
                                       _mm512_mul_ps(_mm512_cvtepi32_ps(mins), _mm512_load_ps(dp + 16)));
      sum = _mm512_fmadd_ps(f, _mm512_set1_ps(x.d), sum);
    }
    _mm512_mask_storeu_ps(to.dest + t * to.dest_stride, to.mask, sum);
  }
}

// The sub-block sums of a group's tokens for super-block b (Q4_K/Q5_K: their mins).
template <typename Block>
IWB_AVX512 inline void group_sums(const uint8_t* first_row, size_t act_stride, int64_t b, int tokens, int32_t* sums) {
  if constexpr (!kIsQ6<Block>) {
    for (int t = 0; t < tokens; ++t) {
      _mm_store_si128(reinterpret_cast<__m128i*>(sums + 4 * t),
                      sub_block_sums(reinterpret_cast<const BlockQ8_K*>(first_row + t * act_stride)[b]));
    }
  }
}

// The group's activation bytes of super-block b as A tiles, 64-byte rows at a 64-byte stride
// (step k's 32 rows at 2 KiB k): in place, every row of a tile straddles two cache lines
// (qs starts 4 bytes into a 292-byte block).
IWB_AVX512 inline void group_a_tiles(const uint8_t* first_row, size_t act_stride, int64_t b, int tokens,
                                     uint8_t* a_tiles) {
  for (int t = 0; t < tokens; ++t) {
    const uint8_t* qs = first_row + t * act_stride + b * sizeof(BlockQ8_K) + offsetof(BlockQ8_K, qs);
#pragma GCC unroll 4
    for (int k = 0; k < 4; ++k) _mm512_store_si512(a_tiles + 2048 * k + 64 * t, _mm512_loadu_si512(qs + 64 * k));
  }
}

// Super-block b of one 16-row sub-panel (packed at `sub`) times a group of up to 32 tokens (two
// A tiles: tokens0 + tokens1), added to the group's sums. The tile configuration is loaded.
template <typename Block>
IWB_AMX inline void group_products(const uint8_t* sub, const uint8_t* a_tiles, const uint8_t* first_row,
                                   size_t act_stride, int64_t b, int tokens0, int tokens1, const int32_t* sums,
                                   const GroupSums& to) {
  alignas(64) int32_t c[4][16 * 16];
  // A tiles of step k: the group's qs[64k .. 64k+63] of super-block b (group_a_tiles).
  constexpr long stride = 64;
  const uint8_t* a0 = a_tiles;
  const uint8_t* a1 = a_tiles + 16 * 64;
  _tile_zero(4);
  _tile_zero(5);
  if (tokens1 > 0) {
    _tile_zero(6);
    _tile_zero(7);
  }
  for (int k = 0; k < 4; ++k) {
    _tile_loadd(0, a0 + 2048 * k, stride);
    _tile_loadd(2, sub + (2 * k) * kTileBytes, 64);
    _tile_loadd(3, sub + (2 * k + 1) * kTileBytes, 64);
    _tile_dpbssd(4, 0, 2);
    _tile_dpbssd(5, 0, 3);
    if (tokens1 > 0) {
      _tile_loadd(1, a1 + 2048 * k, stride);
      _tile_dpbssd(6, 1, 2);
      _tile_dpbssd(7, 1, 3);
    }
  }
  IWB_TILE_STORE(4, c[0]);
  IWB_TILE_STORE(5, c[1]);
  scale_tiles<Block>(c[0], c[1], sub, sums, first_row, act_stride, b, tokens0, to);
  if (tokens1 > 0) {
    IWB_TILE_STORE(6, c[2]);
    IWB_TILE_STORE(7, c[3]);
    const GroupSums second{to.acc + 16 * kQuantGemmAmxRows, to.dest + 16 * to.dest_stride, to.dest_stride, to.mask};
    scale_tiles<Block>(c[2], c[3], sub, sums + 16 * 4, first_row + 16 * act_stride, act_stride, b, tokens1, second);
  }
}

// The packed panel times every token, 32 at a time. A group's sums stay in 8 KiB of this
// thread's stack (L1) over all super-blocks and go to `out` from the last one's scaling, while
// the next group's output lines (a matrix row apart per token) are fetched, a share during each
// of this group's units. Before: super-blocks outermost, every token's sums in an L2 buffer read
// and written once per super-block, and a copy to `out` at the end that stalled on thousands of
// store misses in a burst (a quarter of the kernel's time at 1536 x 8960 and 512 tokens).
template <typename Block>
IWB_AMX void multiply_panel(const uint8_t* buffer, int num_sub, const __mmask16* masks, const __m512* bias_rows,
                            const uint8_t* activation, size_t act_stride, int64_t num_tokens, int64_t nb, float* out,
                            int64_t out_stride) {
  alignas(64) float acc[32 * kQuantGemmAmxRows];
  alignas(64) int32_t sums[32 * 4];
  alignas(64) uint8_t a_tiles[4 * 32 * 64];
  const int64_t units = nb * num_sub;
  int configured = -1;
  for (int64_t t0 = 0; t0 < num_tokens; t0 += 32) {
    const int tokens = static_cast<int>(std::min<int64_t>(32, num_tokens - t0));
    const int tokens0 = std::min(16, tokens), tokens1 = tokens - tokens0;
    if (tokens != configured) {  // ldtilecfg per unit took 2.8% of a pp512
      configure(tokens0, tokens1);
      configured = tokens;
    }
    for (int t = 0; t < tokens; ++t) {
      for (int g = 0; g < num_sub; ++g) _mm512_store_ps(acc + t * kQuantGemmAmxRows + g * kRowsPerTile, bias_rows[g]);
    }
    const int64_t next = t0 + 32;
    const int64_t fetch_lines = next < num_tokens ? std::min<int64_t>(32, num_tokens - next) * num_sub : 0;
    const int64_t fetch_per_unit = (fetch_lines + units - 1) / units;
    int64_t fetched = 0;
    const uint8_t* first_row = activation + t0 * act_stride;
    for (int64_t b = 0; b < nb; ++b) {
      group_sums<Block>(first_row, act_stride, b, tokens, sums);
      group_a_tiles(first_row, act_stride, b, tokens, a_tiles);
      for (int g = 0; g < num_sub; ++g) {
        for (const int64_t end = std::min(fetch_lines, fetched + fetch_per_unit); fetched < end; ++fetched) {
          __builtin_prefetch(out + (next + fetched / num_sub) * out_stride + (fetched % num_sub) * kRowsPerTile, 1, 3);
        }
        float* o = acc + g * kRowsPerTile;
        const GroupSums to = b == nb - 1 ? GroupSums{o, out + t0 * out_stride + g * kRowsPerTile, out_stride, masks[g]}
                                         : GroupSums{o, o, kQuantGemmAmxRows, 0xFFFF};
        group_products<Block>(buffer + (b * kSubPanels + g) * kSubBytes, a_tiles, first_row, act_stride, b, tokens0,
                              tokens1, sums, to);
      }
    }
  }
}

template <typename Block>
IWB_AMX void gemm_kquant_amx(const uint8_t* weight, size_t weight_stride, int num_rows, const uint8_t* activation,
                             size_t activation_stride, int64_t num_tokens, int64_t n, const float* bias, float* out,
                             int64_t out_stride, uint8_t* buffer) {
  const int64_t nb = n / kQK_K;
  const int num_sub = (num_rows + kRowsPerTile - 1) / kRowsPerTile;
  // Packed as [super-block][sub-panel].
  for (int g = 0; g < num_sub; ++g) {
    const Block* rows[16];
    for (int i = 0; i < 16; ++i) {
      rows[i] = reinterpret_cast<const Block*>(weight + std::min(g * kRowsPerTile + i, num_rows - 1) * weight_stride);
    }
    for (int64_t b = 0; b < nb; ++b) {
      // The next super-block of the 16 rows into L1 meanwhile: sixteen rows side by side are
      // streams the hardware prefetchers miss, and the first touches waited on L2 or memory.
      if (b + 1 < nb) {
        for (int i = 0; i < 16; ++i) {
          const auto* next = reinterpret_cast<const uint8_t*>(rows[i] + b + 1);
          for (size_t off = 0; off < sizeof(Block); off += 64) __builtin_prefetch(next + off);
          __builtin_prefetch(next + sizeof(Block) - 1);
        }
      }
      pack_sub_super_block(rows, b, buffer + (b * kSubPanels + g) * kSubBytes);
    }
  }
  amx::tile_buffer_written();
  __mmask16 masks[kSubPanels];
  __m512 bias_rows[kSubPanels];
  for (int g = 0; g < num_sub; ++g) {
    const int rows = std::min(kRowsPerTile, num_rows - g * kRowsPerTile);
    masks[g] = static_cast<__mmask16>((1u << rows) - 1);
    bias_rows[g] = bias ? _mm512_maskz_loadu_ps(masks[g], bias + g * kRowsPerTile) : _mm512_setzero_ps();
  }
  multiply_panel<Block>(buffer, num_sub, masks, bias_rows, activation, activation_stride, num_tokens, nb, out,
                        out_stride);
}

}  // namespace

size_t quant_gemm_kquant_amx_buffer_bytes(int64_t n) { return static_cast<size_t>(n / kQK_K * kSubPanels * kSubBytes); }

QuantGemmFn select_quant_gemm_kquant_amx(GgmlType type) {
  if (!has_amx_int8()) return nullptr;
  switch (type) {
    case GgmlType::Q4_K: return gemm_kquant_amx<BlockQ4_K>;
    case GgmlType::Q5_K: return gemm_kquant_amx<BlockQ5_K>;
    case GgmlType::Q6_K: return gemm_kquant_amx<BlockQ6_K>;
    default: return nullptr;
  }
}

}  // namespace iwb::detail

#else

namespace iwb::detail {
size_t quant_gemm_kquant_amx_buffer_bytes(int64_t) { return 0; }
QuantGemmFn select_quant_gemm_kquant_amx(GgmlType) { return nullptr; }
}  // namespace iwb::detail

#endif
