// AMX int8 prefill GEMM for the 32-element types (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, MXFP4) with Q8_1-style
// activations (BlockQ8A). The panel's rows are repacked, 16 at a time, into one B tile per block
// (8 rows of 64 bytes: 4 weights of each of 16 rows per row, the VNNI order), signed where the
// type has an offset (Q4_0 q - 8, Q5_0 q - 16, Q8_0 as stored, MXFP4's E2M1 values) so no offset term remains,
// unsigned with their "+ m" for Q4_1/Q5_1. The A tile is read in place: 16 tokens' qs of one
// block, a row per token at the activations' stride. Per block one tdpbssd (tdpbsud) gives a
// 16 x 16 int32 tile; AVX-512 then applies d_w * d_a (and m_w * s_a) into f32 accumulators, a
// register per token (lane = weight row). Two blocks' products are in flight in two accumulator
// tiles while the vector units scale the previous two.
#include "quant_dot.h"

#if defined(__x86_64__)
#include "amx_tiles.h"

#include <algorithm>

namespace iwb::detail {
namespace {

using namespace avx512;

constexpr int kRowsPerTile = 16;
constexpr int kTokensPerTile = 16;
constexpr int64_t kBlockBytes = 512;  // one packed B tile: 8 rows x 64 bytes
constexpr uint32_t kConfigKey = 0x100;

template <typename Block>
constexpr bool kIsSigned = Legacy<Block>::kOffset != 0;

// Tiles: 0, 1 A (tokens x 32 bytes); 2, 3 B (8 x 64 bytes); 4, 5 and 6, 7 C (tokens x 16
// int32) of two blocks each.
void configure(int tokens) {
  amx::TileConfig c;
  for (int t : {0, 1}) c.rows[t] = static_cast<uint8_t>(tokens), c.colsb[t] = 32;
  for (int t : {2, 3}) c.rows[t] = 8, c.colsb[t] = 64;
  for (int t : {4, 5, 6, 7}) c.rows[t] = static_cast<uint8_t>(tokens), c.colsb[t] = 64;
  amx::ensure_tile_config(kConfigKey + static_cast<uint32_t>(tokens), c);
}

// The packed form of 16 rows (one sub-panel): nb B tiles, then nb x 16 scales d, then (Q4_1,
// Q5_1) nb x 16 mins m.
size_t sub_panel_bytes(int64_t nb) { return static_cast<size_t>(nb) * (kBlockBytes + 2 * 16 * sizeof(float)); }

template <typename Block>
IWB_AMX void pack_sub_panel(const uint8_t* weight, size_t stride, int num_rows, int64_t nb, uint8_t* out) {
  const Block* rows[16];
  for (int i = 0; i < 16; ++i) rows[i] = reinterpret_cast<const Block*>(weight + std::min(i, num_rows - 1) * stride);
  const RowOffsets offsets = row_offsets(rows);
  auto* d = reinterpret_cast<float*>(out + nb * kBlockBytes);
  float* m = d + nb * 16;
  // The 16 rows side by side are streams the hardware prefetchers miss: each row's bytes
  // kFetchAhead on are fetched as the packing reaches a new cache line there (the driver's
  // prefetch of the whole next panel before each call stalled the core instead:
  // DotKernels::gemm_fetches_rows).
  constexpr size_t kFetchAhead = 256;
  for (int64_t b = 0; b < nb; ++b) {
    const size_t ahead = static_cast<size_t>(b) * sizeof(Block) + kFetchAhead;
    if (b == 0 || ahead / 64 != (ahead - sizeof(Block)) / 64) {
      for (int i = 0; i < 16; ++i) __builtin_prefetch(reinterpret_cast<const uint8_t*>(rows[i]) + ahead);
    }
    __m512i z[8];
#pragma GCC unroll 8
    for (int i = 0; i < 8; ++i) {
      __m256i lo = unpack_one(rows[i][b]), hi = unpack_one(rows[i + 8][b]);
      if constexpr (kIsSigned<Block>) {
        const __m256i offset = _mm256_set1_epi8(static_cast<char>(Legacy<Block>::kOffset));
        lo = _mm256_sub_epi8(lo, offset);
        hi = _mm256_sub_epi8(hi, offset);
      }
      z[i] = _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
    }
    avx512::transpose_dword_halves(z);
#pragma GCC unroll 8
    for (int k = 0; k < 8; ++k) _mm512_store_si512(out + b * kBlockBytes + 64 * k, z[k]);
    block_scales(rows, offsets, b, d + b * 16, m + b * 16);
  }
}

// acc[t] += the scaled int32 tile c (row t: token t, lane i: weight row i) of block b.
// `token_row(t)` is token t's activation row.
template <typename Block, typename TokenRow>
IWB_AMX inline void scale_tile(const int32_t* c, const float* d, const float* m, int64_t b, TokenRow token_row,
                               __m512* acc) {
  const __m512 dw = _mm512_load_ps(d + b * 16);
#pragma GCC unroll 16
  for (int t = 0; t < kTokensPerTile; ++t) {
    const BlockQ8A& x = reinterpret_cast<const BlockQ8A*>(token_row(t))[b];
    acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_load_si512(c + 16 * t)), _mm512_mul_ps(dw, _mm512_set1_ps(x.d)),
                             acc[t]);
    if constexpr (Legacy<Block>::kHasMin)
      acc[t] = _mm512_fmadd_ps(_mm512_load_ps(m + b * 16), _mm512_set1_ps(x.s), acc[t]);
  }
}

// Block `blk`'s product into C tile `ctile` through A tile `atile` and B tile `btile` (tile
// numbers are instruction operands: literals).
#define IWB_BLOCK_PRODUCT(ctile, atile, btile, blk)                                 \
  do {                                                                              \
    _tile_zero(ctile);                                                              \
    _tile_loadd(atile, a + (blk) * static_cast<int64_t>(sizeof(BlockQ8A)), stride); \
    _tile_loadd(btile, packed + (blk)*kBlockBytes, 64);                             \
    if constexpr (kIsSigned<Block>)                                                 \
      _tile_dpbssd(ctile, atile, btile);                                            \
    else                                                                            \
      _tile_dpbsud(ctile, atile, btile);                                            \
  } while (0)

// C tile `ctile` (block `blk`) stored and scaled into the accumulators.
#define IWB_SCALE_BLOCK(ctile, blk)                    \
  do {                                                 \
    IWB_TILE_STORE(ctile, c);                          \
    scale_tile<Block>(c, d, m, (blk), token_row, acc); \
  } while (0)

// One 16-row sub-panel times up to 16 tokens (rows of the A tile: `tokens`, configured). The
// blocks go in pairs, and a pair's products are issued before the previous pair's C tiles are
// stored and scaled (tiles 4, 5 and 6, 7 in turn): a tile store right after its product waited
// for the product (15% of a Q4_0 pp512 on that store's first vector load).
template <typename Block, typename TokenRow>
IWB_AMX void sub_panel_tokens(const uint8_t* packed, int64_t nb, const uint8_t* first_row, size_t act_stride,
                              TokenRow token_row, int tokens, __m512 bias, __mmask16 rows_mask, float* out,
                              int64_t out_stride) {
  // The output lines this writes at the end (a matrix row apart per token) are fetched
  // meanwhile, four every four blocks: sixteen at once stalled on the fill buffers (5%).
  int fetched = 0;
  auto fetch_out = [&] {
    for (const int end = std::min(tokens, fetched + 4); fetched < end; ++fetched)
      __builtin_prefetch(out + fetched * out_stride, 1, 3);
  };
  const auto* d = reinterpret_cast<const float*>(packed + nb * kBlockBytes);
  const float* m = d + nb * 16;
  alignas(64) int32_t c[16 * 16];
  __m512 acc[kTokensPerTile];
#pragma GCC unroll 16
  for (int t = 0; t < kTokensPerTile; ++t) acc[t] = bias;
  // A row of block b: its qs, 8 bytes into the BlockQ8A.
  const uint8_t* a = first_row + offsetof(BlockQ8A, qs);
  const auto stride = static_cast<long>(act_stride);
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
  for (int t = 0; t < tokens; ++t) _mm512_mask_storeu_ps(out + t * out_stride, rows_mask, acc[t]);
}

#undef IWB_BLOCK_PRODUCT
#undef IWB_SCALE_BLOCK

template <typename Block>
IWB_AMX void gemm_amx(const uint8_t* weight, size_t weight_stride, int num_rows, const uint8_t* activation,
                      size_t activation_stride, int64_t num_tokens, int64_t n, const float* bias, float* out,
                      int64_t out_stride, uint8_t* buffer) {
  const int64_t nb = n / kQK8_0;
  const int num_sub_panels = (num_rows + kRowsPerTile - 1) / kRowsPerTile;
  const size_t sub_bytes = sub_panel_bytes(nb);
  for (int g = 0; g < num_sub_panels; ++g) {
    pack_sub_panel<Block>(weight + g * kRowsPerTile * weight_stride, weight_stride, num_rows - g * kRowsPerTile, nb,
                          buffer + g * sub_bytes);
  }
  amx::tile_buffer_written();
  int configured = -1;  // loaded once per call and when the token count changes (ldtilecfg is not cheap)
  for (int64_t t0 = 0; t0 < num_tokens; t0 += kTokensPerTile) {
    const int tokens = static_cast<int>(std::min<int64_t>(kTokensPerTile, num_tokens - t0));
    if (tokens != configured) {
      configure(tokens);
      configured = tokens;
    }
    const uint8_t* first_row = activation + t0 * activation_stride;
    for (int g = 0; g < num_sub_panels; ++g) {
      const int rows = std::min(kRowsPerTile, num_rows - g * kRowsPerTile);
      const __mmask16 rows_mask = static_cast<__mmask16>((1u << rows) - 1);
      const __m512 bv = bias ? _mm512_maskz_loadu_ps(rows_mask, bias + g * kRowsPerTile) : _mm512_setzero_ps();
      float* o = out + t0 * out_stride + g * kRowsPerTile;
      const uint8_t* packed = buffer + g * sub_bytes;
      if (tokens == kTokensPerTile) {
        auto row = [&](int t) { return first_row + t * activation_stride; };
        sub_panel_tokens<Block>(packed, nb, first_row, activation_stride, row, tokens, bv, rows_mask, o, out_stride);
      } else {
        // A short last group: its missing tokens read the last real one (never stored).
        auto row = [&](int t) { return first_row + std::min(t, tokens - 1) * activation_stride; };
        sub_panel_tokens<Block>(packed, nb, first_row, activation_stride, row, tokens, bv, rows_mask, o, out_stride);
      }
    }
  }
}

}  // namespace

size_t quant_gemm_amx_buffer_bytes(int64_t n) {
  return static_cast<size_t>(kQuantGemmAmxRows / kRowsPerTile) * sub_panel_bytes(n / kQK8_0);
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
QuantGemmFn select_quant_gemm_amx(GgmlType) { return nullptr; }
}  // namespace iwb::detail

#endif
