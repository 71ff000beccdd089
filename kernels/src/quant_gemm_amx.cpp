// AMX int8 prefill GEMM for the 32-element types (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, MXFP4) with
// Q8_1-style activations (BlockQ8A). The weights are the A operand: a sub-panel's 16 rows are
// repacked into one 16-row tile per block, a row's 32 weights as they are (no transpose),
// signed where the type has an offset (Q4_0 q - 8, Q5_0 q - 16, Q8_0 as stored, MXFP4's E2M1
// values) so no offset term remains, unsigned with their "+ m" for Q4_1/Q5_1. The activations
// are the B operand, whose "VNNI" layout (4 bytes of each of 16 tokens per tile row) is made
// once per matmul by all threads (quant_gemm_amx_prepare, 16 tokens a group) rather than, as
// when the weights were B, a transpose of every weight block in every panel (a third of the
// packing, and the packing about half of a 32-token product). Per block one tdpbssd (tdpbusd)
// gives a 16 x 16 int32 tile (row: weight row, column: token); AVX-512 then applies d_w * d_a
// (and m_w * s_a) into f32 accumulators, a register per weight row (lane = token), transposed
// once at the end. Two blocks' products are in flight in two accumulator tiles while the vector
// units scale the previous two.
#include "quant_dot.h"

#if defined(__x86_64__)
#include "amx_tiles.h"

#include <algorithm>

namespace iwb::detail {
namespace {

using namespace avx512;

constexpr int kRowsPerTile = 16;
constexpr int kGroupTokens = kPreparedGroupTokens;  // the tokens of one B tile
static_assert(kGroupTokens == 16);
constexpr int64_t kPairBytes = 1024;    // two blocks of 16 rows: 16 x 64 bytes, a row's two blocks side by side
constexpr int64_t kActTileBytes = 512;  // one B tile: 8 rows x 64 bytes
constexpr int64_t kActBlockBytes = kActTileBytes + 2 * 64;  // + the tokens' d[16] and s[16]
constexpr uint32_t kConfigKey = 0x100;

template <typename Block>
constexpr bool kIsSigned = Legacy<Block>::kOffset != 0;

// Tiles: 0, 1 A (16 weight rows x 32 bytes, a row stride of 64); 2, 3 B (8 x 64 bytes); 4, 5
// and 6, 7 C (16 x 16 int32) of two blocks each.
void configure() {
  amx::TileConfig c;
  for (int t : {0, 1}) c.rows[t] = 16, c.colsb[t] = 32;
  for (int t : {2, 3}) c.rows[t] = 8, c.colsb[t] = 64;
  for (int t : {4, 5, 6, 7}) c.rows[t] = 16, c.colsb[t] = 64;
  amx::ensure_tile_config(kConfigKey, c);
}

// The packed form of 16 rows (one sub-panel): the blocks in pairs (kPairBytes each, the last
// one half empty for an odd count), then nb x 16 scales d, then (Q4_1, Q5_1) nb x 16 mins m.
int64_t pair_count(int64_t nb) { return (nb + 1) / 2; }
size_t sub_panel_bytes(int64_t nb) {
  return static_cast<size_t>(pair_count(nb) * kPairBytes + nb * 2 * 16 * static_cast<int64_t>(sizeof(float)));
}

template <typename Block>
IWB_AMX void pack_sub_panel(const uint8_t* weight, size_t stride, int num_rows, int64_t nb, uint8_t* out) {
  const Block* rows[16];
  for (int i = 0; i < 16; ++i) rows[i] = reinterpret_cast<const Block*>(weight + std::min(i, num_rows - 1) * stride);
  const RowOffsets offsets = row_offsets(rows);
  auto* d = reinterpret_cast<float*>(out + pair_count(nb) * kPairBytes);
  float* m = d + nb * 16;
  // The 16 rows side by side are streams the hardware prefetchers miss: each row's bytes
  // kFetchAhead on are fetched as the packing reaches a new cache line there (the driver's
  // prefetch of the whole next panel before each call stalled the core instead:
  // DotKernels::gemm_fetches_rows).
  constexpr size_t kFetchAhead = 256;
  const __m512i offset = _mm512_set1_epi8(static_cast<char>(Legacy<Block>::kOffset));
  for (int64_t p = 0; p < pair_count(nb); ++p) {
    const int64_t b = 2 * p;
    const size_t ahead = static_cast<size_t>(b) * sizeof(Block) + kFetchAhead;
    if (b == 0 || ahead / 64 != (ahead - 2 * sizeof(Block)) / 64) {
      for (int i = 0; i < 16; ++i) __builtin_prefetch(reinterpret_cast<const uint8_t*>(rows[i]) + ahead);
    }
    uint8_t* tile = out + p * kPairBytes;
    if (b + 1 < nb) {
#pragma GCC unroll 4
      for (int i = 0; i < 16; ++i) {
        __m512i u = unpack_two(rows[i] + b);
        if constexpr (kIsSigned<Block>) u = _mm512_sub_epi8(u, offset);
        _mm512_store_si512(tile + 64 * i, u);
      }
      block_scales(rows, offsets, b + 1, d + (b + 1) * 16, m + (b + 1) * 16);
    } else {  // an odd count's last block
      for (int i = 0; i < 16; ++i) {
        __m256i u = unpack_one(rows[i][b]);
        if constexpr (kIsSigned<Block>) u = _mm256_sub_epi8(u, _mm512_castsi512_si256(offset));
        _mm512_store_si512(tile + 64 * i, _mm512_zextsi256_si512(u));
      }
    }
    block_scales(rows, offsets, b, d + b * 16, m + b * 16);
  }
}

// acc[i] (lane t: token t) += the scaled int32 tile c (row i: weight row i, column t: token t)
// of block b. `act` is the group's prepared block b (its d and s after the B tile).
template <typename Block>
IWB_AMX inline void scale_tile(const int32_t* c, const float* d, const float* m, int64_t b, const uint8_t* act,
                               __m512* acc) {
  const auto* act_d = reinterpret_cast<const float*>(act + kActTileBytes);
  const __m512 xd = _mm512_load_ps(act_d);
#pragma GCC unroll 16
  for (int i = 0; i < kRowsPerTile; ++i) {
    acc[i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_load_si512(c + 16 * i)),
                             _mm512_mul_ps(xd, _mm512_set1_ps(d[b * 16 + i])), acc[i]);
    if constexpr (Legacy<Block>::kHasMin)
      acc[i] = _mm512_fmadd_ps(_mm512_load_ps(act_d + 16), _mm512_set1_ps(m[b * 16 + i]), acc[i]);
  }
}

// Block `blk`'s product into C tile `ctile` through A tile `atile` and B tile `btile` (tile
// numbers are instruction operands: literals). A row of block b: 32 bytes into its pair's row.
#define IWB_BLOCK_PRODUCT(ctile, atile, btile, blk)                               \
  do {                                                                            \
    _tile_zero(ctile);                                                            \
    _tile_loadd(atile, packed + ((blk) / 2) * kPairBytes + ((blk) % 2) * 32, 64); \
    _tile_loadd(btile, group + (blk)*kActBlockBytes, 64);                         \
    if constexpr (kIsSigned<Block>)                                               \
      _tile_dpbssd(ctile, atile, btile);                                          \
    else                                                                          \
      _tile_dpbusd(ctile, atile, btile);                                          \
  } while (0)

// C tile `ctile` (block `blk`) stored and scaled into the accumulators.
#define IWB_SCALE_BLOCK(ctile, blk)                                       \
  do {                                                                    \
    IWB_TILE_STORE(ctile, c);                                             \
    scale_tile<Block>(c, d, m, (blk), group + (blk)*kActBlockBytes, acc); \
  } while (0)

// One 16-row sub-panel times one prepared group of up to 16 tokens (absent tokens are zero
// and not stored). The blocks go in pairs, and a pair's products are issued before the
// previous pair's C tiles are stored and scaled (tiles 4, 5 and 6, 7 in turn): a tile store
// right after its product waited for the product (15% of a Q4_0 pp512 on that store's first
// vector load).
template <typename Block>
IWB_AMX void sub_panel_group(const uint8_t* packed, int64_t nb, const uint8_t* group, int tokens,
                             const float* bias_rows, __mmask16 rows_mask, float* out, int64_t out_stride) {
  // The output lines this writes at the end (a matrix row apart per token) are fetched
  // meanwhile, four every four blocks: sixteen at once stalled on the fill buffers (5%).
  int fetched = 0;
  auto fetch_out = [&] {
    for (const int end = std::min(tokens, fetched + 4); fetched < end; ++fetched)
      __builtin_prefetch(out + fetched * out_stride, 1, 3);
  };
  const auto* d = reinterpret_cast<const float*>(packed + pair_count(nb) * kPairBytes);
  const float* m = d + nb * 16;
  alignas(64) int32_t c[16 * 16];
  __m512 acc[kRowsPerTile];
#pragma GCC unroll 16
  for (int i = 0; i < kRowsPerTile; ++i) acc[i] = _mm512_set1_ps(bias_rows[i]);
  int64_t b = 0;
  if (nb >= 2) {
    IWB_BLOCK_PRODUCT(4, 0, 2, 0);
    IWB_BLOCK_PRODUCT(5, 1, 3, 1);
    b = 2;
    // Tiles 4, 5 hold blocks b - 2, b - 1 here.
    for (; b + 4 <= nb; b += 4) {
      fetch_out();
      IWB_BLOCK_PRODUCT(6, 0, 2, b);
      IWB_BLOCK_PRODUCT(7, 1, 3, b + 1);
      IWB_SCALE_BLOCK(4, b - 2);
      IWB_SCALE_BLOCK(5, b - 1);
      IWB_BLOCK_PRODUCT(4, 0, 2, b + 2);
      IWB_BLOCK_PRODUCT(5, 1, 3, b + 3);
      IWB_SCALE_BLOCK(6, b);
      IWB_SCALE_BLOCK(7, b + 1);
    }
    if (b + 2 <= nb) {
      IWB_BLOCK_PRODUCT(6, 0, 2, b);
      IWB_BLOCK_PRODUCT(7, 1, 3, b + 1);
      IWB_SCALE_BLOCK(4, b - 2);
      IWB_SCALE_BLOCK(5, b - 1);
      IWB_SCALE_BLOCK(6, b);
      IWB_SCALE_BLOCK(7, b + 1);
      b += 2;
    } else {
      IWB_SCALE_BLOCK(4, b - 2);
      IWB_SCALE_BLOCK(5, b - 1);
    }
  }
  if (b < nb) {
    IWB_BLOCK_PRODUCT(4, 0, 2, b);
    IWB_SCALE_BLOCK(4, b);
  }
  __m512i rows[16];
  for (int i = 0; i < 16; ++i) rows[i] = _mm512_castps_si512(acc[i]);
  amx::store_by_token(rows, tokens, rows_mask, _mm512_setzero_ps(), out, out_stride);
}

#undef IWB_BLOCK_PRODUCT
#undef IWB_SCALE_BLOCK

template <typename Block>
IWB_AMX void gemm_amx(const uint8_t* weight, size_t weight_stride, int num_rows, const uint8_t* groups,
                      size_t group_stride, int64_t num_tokens, int64_t n, const float* bias, float* out,
                      int64_t out_stride, uint8_t* buffer) {
  const int64_t nb = n / kQK8_0;
  const int num_sub_panels = (num_rows + kRowsPerTile - 1) / kRowsPerTile;
  const size_t sub_bytes = sub_panel_bytes(nb);
  for (int g = 0; g < num_sub_panels; ++g) {
    pack_sub_panel<Block>(weight + g * kRowsPerTile * weight_stride, weight_stride, num_rows - g * kRowsPerTile, nb,
                          buffer + g * sub_bytes);
  }
  amx::tile_buffer_written();
  alignas(64) float bias_rows[kQuantGemmAmxRows] = {};
  if (bias != nullptr) std::copy(bias, bias + num_rows, bias_rows);
  configure();
  for (int64_t t0 = 0; t0 < num_tokens; t0 += kGroupTokens) {
    const int tokens = static_cast<int>(std::min<int64_t>(kGroupTokens, num_tokens - t0));
    const uint8_t* group = groups + (t0 / kGroupTokens) * group_stride;
    for (int g = 0; g < num_sub_panels; ++g) {
      const int rows = std::min(kRowsPerTile, num_rows - g * kRowsPerTile);
      const __mmask16 rows_mask = static_cast<__mmask16>((1u << rows) - 1);
      sub_panel_group<Block>(buffer + g * sub_bytes, nb, group, tokens, bias_rows + g * kRowsPerTile, rows_mask,
                             out + t0 * out_stride + g * kRowsPerTile, out_stride);
    }
  }
}

}  // namespace

size_t quant_gemm_amx_buffer_bytes(int64_t n) {
  return static_cast<size_t>(kQuantGemmAmxRows / kRowsPerTile) * sub_panel_bytes(n / kQK8_0);
}

size_t quant_gemm_amx_group_bytes(int64_t n) { return static_cast<size_t>(n / kQK8_0 * kActBlockBytes); }

// Up to 16 tokens of f32 activations as BlockQ8A (the quantizer's own values), each block's
// bytes as a B tile (tile row r: bytes 4r .. 4r+3 of every token), with the tokens' d and s
// beside it; absent tokens are zero.
IWB_AVX512 void quant_gemm_amx_prepare(const float* input, int64_t n, int num_tokens, uint8_t* out) {
  const QuantizeActivationFn quantize = select_activation_quantizer(ActivationFormat::Q8_1, CpuPath::Avx512);
  constexpr int64_t kChunkBlocks = 32;  // 16 tokens x 32 blocks x 40 bytes on the stack
  BlockQ8A blocks[kGroupTokens][kChunkBlocks];
  const int64_t nb = n / kQK8_0;
  for (int64_t b0 = 0; b0 < nb; b0 += kChunkBlocks) {
    const int64_t count = std::min(kChunkBlocks, nb - b0);
    for (int t = 0; t < num_tokens; ++t) quantize(input + t * n + b0 * kQK8_0, blocks[t], count * kQK8_0);
    for (int64_t j = 0; j < count; ++j) {
      uint8_t* o = out + (b0 + j) * kActBlockBytes;
      __m256i qs[kGroupTokens];
      for (int t = 0; t < kGroupTokens; ++t) {
        qs[t] = t < num_tokens ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blocks[t][j].qs))
                               : _mm256_setzero_si256();
      }
      __m512i z[8];
      for (int i = 0; i < 8; ++i) z[i] = _mm512_inserti64x4(_mm512_castsi256_si512(qs[i]), qs[i + 8], 1);
      avx512::transpose_dword_halves(z);  // z[k]: dword k of tokens 0..15, B tile row k
      for (int k = 0; k < 8; ++k) _mm512_store_si512(o + 64 * k, z[k]);
      auto* d = reinterpret_cast<float*>(o + kActTileBytes);
      for (int t = 0; t < kGroupTokens; ++t) {
        d[t] = t < num_tokens ? blocks[t][j].d : 0.0f;
        d[16 + t] = t < num_tokens ? blocks[t][j].s : 0.0f;
      }
    }
  }
  amx::tile_buffer_written();
}

QuantGemmFn select_quant_gemm_amx(GgmlType type) {
  if (!has_amx_int8()) return nullptr;
  switch (type) {
    case GgmlType::Q4_0: return gemm_amx<BlockQ4_0>;
    case GgmlType::Q4_1: return gemm_amx<BlockQ4_1>;
    case GgmlType::Q5_0: return gemm_amx<BlockQ5_0>;
    case GgmlType::Q5_1: return gemm_amx<BlockQ5_1>;
    case GgmlType::Q8_0: return gemm_amx<BlockQ8_0>;
    case GgmlType::MXFP4: return gemm_amx<BlockMxfp4>;
    default: return nullptr;
  }
}

}  // namespace iwb::detail

#else

namespace iwb::detail {
size_t quant_gemm_amx_buffer_bytes(int64_t) { return 0; }
size_t quant_gemm_amx_group_bytes(int64_t) { return 0; }
void quant_gemm_amx_prepare(const float*, int64_t, int, uint8_t*) {}
QuantGemmFn select_quant_gemm_amx(GgmlType) { return nullptr; }
}  // namespace iwb::detail

#endif
