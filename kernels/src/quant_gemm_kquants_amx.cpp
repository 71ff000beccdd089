// AMX int8 prefill GEMM for the K-quants (Q4_K, Q5_K, Q6_K) with Q8_K activations. The integer
// sub-block scales are folded into the weights when the panel is repacked: w = sc * q (Q4_K,
// Q5_K: 0..1953) or sc * (q - 32) (Q6_K: -4064..4096) does not fit a byte, so it is split as
// w = 128 * hi + lo (lo 0..127, hi -32..32) into two tiles, and per super-block two int32 tiles
// (hi and lo, tdpbssd over 4 steps of 64 elements) give sum(w * a) = 128 * C_hi + C_lo
// exactly. Only one f32 scale per super-block and token remains (d_w * d_a), instead of one per
// 16- or 32-element sub-block: the vector units, not the tiles, bound an int8 AMX GEMM. The
// Q4_K/Q5_K mins meet the activations' sub-block sums through vpdpwssd, as in the VNNI GEMM.
//
// The weights are the A operand (16 rows of 64 bytes: a row's elements as they are) and the
// activations the B operand, whose "VNNI" layout (4 bytes of each of 16 tokens per tile row)
// needs a transpose: the activations' is made once per matmul by all threads
// (quant_gemm_kquant_amx_prepare, 16 tokens a group), where the weights' was made for every
// panel (with weights as B, the transposes took a third of the packing and the packing two
// thirds of a 32-token product). The C tiles hold a row's sums for 16 tokens; they are scaled
// as rows and transposed once, when a group of tokens is done.
//
// Loop order per panel (kQuantGemmAmxRows rows, 16-row sub-panels): pairs of token groups (two
// B tiles), then super-blocks, then sub-panels. A pair's sums stay in L1 over all super-blocks;
// the packed panel (34 KiB a super-block) is read from L2 once per pair.
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
constexpr int kSubPanels = kQuantGemmAmxRows / kRowsPerTile;
constexpr int64_t kTileBytes = 1024;                  // one tile: 16 rows x 64 bytes
constexpr int64_t kWeightBytes = 4 * 2 * kTileBytes;  // 4 steps of 64 elements, hi and lo
// Per sub-panel and super-block: the weight tiles, d[16], dmin[16], 16 rows x 4 min pairs.
constexpr int64_t kSubBytes = kWeightBytes + 64 + 64 + 256;
// Per group of 16 tokens and super-block (the prepared activations): 4 B tiles (one per step),
// d[16], and 4 x 16 pairs of sub-block sums (pair j: sub-blocks 2j, 2j + 1 of every token).
constexpr int64_t kActTilesBytes = 4 * kTileBytes;
constexpr int64_t kActBlockBytes = kActTilesBytes + 64 + 256;
static_assert(kActBlockBytes % 64 == 0);
constexpr uint32_t kConfigKey = 0x200;

template <typename Block>
constexpr bool kIsQ6 = std::is_same_v<Block, BlockQ6_K>;

// A row's sub-block scales as 16-bit words, for chunk_scales: Q4_K/Q5_K the 8 unpacked 6-bit
// scales (`sc`, byte j: sub-block j), Q6_K its 16 signed scales.
template <typename Block>
IWB_AVX512 inline __m512i row_scale_words(const Block& blk, uint64_t sc) {
  if constexpr (kIsQ6<Block>) {
    return _mm512_cvtepi8_epi16(_mm256_castsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk.scales))));
  } else {
    return _mm512_cvtepu8_epi16(_mm256_castsi128_si256(_mm_cvtsi64_si128(static_cast<long long>(sc))));
  }
}

// The scales of chunk c's 64 elements as 16-bit lanes, per 128-bit lane (elements 16L .. 16L+15),
// picked from the row's scale words by one vpermw (a broadcast of each scale from a general
// register and an insert took 5 uops, all on the port the packing's other shuffles need).
template <typename Block>
IWB_AVX512 inline __m512i chunk_scales(__m512i words, int c) {
  // Q6_K: 16-element groups 4c .. 4c+3, one per 128-bit lane; Q4_K/Q5_K: 32-element sub-blocks
  // 2c (lanes 0, 1) and 2c+1 (lanes 2, 3).
  return _mm512_permutexvar_epi16(kIsQ6<Block> ? quarter_indices(4 * c) : halves_epi16(2 * c, 2 * c + 1), words);
}

// Super-block b of 16 rows into out (kSubBytes, 64-byte aligned): per step c the rows' hi and
// lo bytes as two A tiles, row i at 64 i, each row's elements in order.
template <typename Block>
IWB_AVX512 void pack_sub_super_block(const Block* const* rows, int64_t b, uint8_t* out) {
  // Each row's 6-bit scales and mins unpacked once (they were unpacked again for every chunk).
  uint64_t sc[16] = {}, m[16] = {};
  if constexpr (!kIsQ6<Block>) {
    for (int i = 0; i < 16; ++i) unpack_k4_scales(rows[i][b].scales, &sc[i], &m[i]);
  }
  const __m512i zero = _mm512_setzero_si512(), low7 = _mm512_set1_epi16(127);
  for (int c = 0; c < 4; ++c) {
    uint8_t* hi_tile = out + (2 * c) * kTileBytes;
    uint8_t* lo_tile = hi_tile + kTileBytes;
#pragma GCC unroll 2
    for (int i = 0; i < 16; ++i) {
      const __m512i q = unpack_chunk(rows[i][b], c);
      const __m512i s = chunk_scales<Block>(row_scale_words(rows[i][b], sc[i]), c);
      // Words of each 128-bit lane's bytes 0..7 and 8..15: vpacksswb below puts them back in
      // the same order (it packs its two sources lane by lane), so no permute is needed.
      __m512i w0 = _mm512_unpacklo_epi8(q, zero), w1 = _mm512_unpackhi_epi8(q, zero);
      if constexpr (kIsQ6<Block>) {
        w0 = _mm512_sub_epi16(w0, _mm512_set1_epi16(32));
        w1 = _mm512_sub_epi16(w1, _mm512_set1_epi16(32));
      }
      w0 = _mm512_mullo_epi16(w0, s);
      w1 = _mm512_mullo_epi16(w1, s);
      // The values fit a signed byte: nothing saturates.
      _mm512_store_si512(hi_tile + 64 * i, _mm512_packs_epi16(_mm512_srai_epi16(w0, 7), _mm512_srai_epi16(w1, 7)));
      _mm512_store_si512(lo_tile + 64 * i, _mm512_packs_epi16(_mm512_and_si512(w0, low7), _mm512_and_si512(w1, low7)));
    }
  }
  auto* d = reinterpret_cast<float*>(out + kWeightBytes);
  float* dmin = d + 16;
  auto* min_pairs = reinterpret_cast<int32_t*>(dmin + 16);  // [row][pair]
  for (int i = 0; i < 16; ++i) {
    d[i] = half(rows[i][b].d);
    if constexpr (!kIsQ6<Block>) {
      dmin[i] = half(rows[i][b].dmin);
      for (int j = 0; j < 4; ++j) {
        min_pairs[4 * i + j] =
            static_cast<int32_t>(((m[i] >> (16 * j)) & 0xFF) | (((m[i] >> (16 * j + 8)) & 0xFF) << 16));
      }
    } else {
      dmin[i] = 0.0f;
      for (int j = 0; j < 4; ++j) min_pairs[4 * i + j] = 0;
    }
  }
}

// The 8 sub-block sums of a Q8_K block (pairs of its 16-element bsums) as int16, 4 dwords.
IWB_AVX512 inline __m128i sub_block_sums(const BlockQ8_K& x) {
  const __m256i bs = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.bsums));
  return _mm256_cvtepi32_epi16(_mm256_madd_epi16(bs, _mm256_set1_epi16(1)));
}

// One sub-panel's sums for one group of tokens (acc: 16 rows of 16 tokens) += super-block b's
// share, from the C tiles (hi, lo) as stored: 128 * hi + lo, times d_w * d_a, less the mins.
// `act` is the group's prepared super-block.
template <typename Block>
IWB_AVX512 inline void scale_rows(const int32_t* c_hi, const int32_t* c_lo, const uint8_t* sub, const uint8_t* act,
                                  float* acc) {
  const auto* dw = reinterpret_cast<const float*>(sub + kWeightBytes);
  const auto* min_pairs = reinterpret_cast<const int32_t*>(dw + 32);
  const auto* act_d = reinterpret_cast<const float*>(act + kActTilesBytes);
  const __m512 da = _mm512_load_ps(act_d);
  __m512i sums[4];
  if constexpr (!kIsQ6<Block>) {
    for (int j = 0; j < 4; ++j) sums[j] = _mm512_load_si512(act_d + 16 + 16 * j);
  }
#pragma GCC unroll 2
  for (int i = 0; i < 16; ++i) {
    const __m512i total =
        _mm512_add_epi32(_mm512_slli_epi32(_mm512_load_si512(c_hi + 16 * i), 7), _mm512_load_si512(c_lo + 16 * i));
    __m512 sum = _mm512_load_ps(acc + 16 * i);
    if constexpr (kIsQ6<Block>) {
      sum = _mm512_fmadd_ps(_mm512_cvtepi32_ps(total), _mm512_mul_ps(da, _mm512_set1_ps(dw[i])), sum);
    } else {
      __m512i mins = _mm512_setzero_si512();
#pragma GCC unroll 4
      for (int j = 0; j < 4; ++j) mins = _mm512_dpwssd_epi32(mins, sums[j], _mm512_set1_epi32(min_pairs[4 * i + j]));
      const __m512 f = _mm512_fmsub_ps(_mm512_cvtepi32_ps(total), _mm512_set1_ps(dw[i]),
                                       _mm512_mul_ps(_mm512_cvtepi32_ps(mins), _mm512_set1_ps(dw[16 + i])));
      sum = _mm512_fmadd_ps(f, da, sum);
    }
    _mm512_store_ps(acc + 16 * i, sum);
  }
}

// The packed panel times every token, two prepared groups (32 tokens) at a time: C tiles 4, 5
// (hi, lo) for the first group, 6, 7 for the second, from A tiles 0, 1 (a sub-panel's hi and lo
// bytes) and B tiles 2, 3 (the groups' activations). A pair's sums stay in 8 KiB of this
// thread's stack (L1) over all super-blocks, while the next pair's output lines (a matrix row
// apart per token) are fetched, a share during each unit. Before: every token's sums in an L2
// buffer read and written per super-block, then copied to `out` with thousands of store misses
// in a burst (a quarter of the kernel's time at 1536 x 8960 and 512 tokens).
template <typename Block>
IWB_AMX void multiply_panel(const uint8_t* buffer, int num_sub, const __mmask16* masks, const float* bias_rows,
                            const uint8_t* groups, size_t group_stride, int64_t num_tokens, int64_t nb, float* out,
                            int64_t out_stride) {
  alignas(64) float acc[kSubPanels][2][16 * 16];  // [sub-panel][group][row][token]
  alignas(64) int32_t c[4][16 * 16];
  const int64_t units = nb * num_sub;
  amx::configure_full_tiles(kConfigKey);
  for (int64_t t0 = 0; t0 < num_tokens; t0 += 2 * kGroupTokens) {
    const int tokens = static_cast<int>(std::min<int64_t>(2 * kGroupTokens, num_tokens - t0));
    const bool two = tokens > kGroupTokens;
    for (int g = 0; g < num_sub; ++g) {
      for (int h = 0; h < (two ? 2 : 1); ++h) {
        for (int i = 0; i < 16; ++i) _mm512_store_ps(acc[g][h] + 16 * i, _mm512_set1_ps(bias_rows[16 * g + i]));
      }
    }
    const int64_t next = t0 + 2 * kGroupTokens;
    const int64_t fetch_lines = next < num_tokens ? std::min<int64_t>(32, num_tokens - next) * num_sub : 0;
    const int64_t fetch_per_unit = (fetch_lines + units - 1) / units;
    int64_t fetched = 0;
    const uint8_t* group0 = groups + (t0 / kGroupTokens) * group_stride;
    const uint8_t* group1 = group0 + group_stride;
    for (int64_t b = 0; b < nb; ++b) {
      const uint8_t* act0 = group0 + b * kActBlockBytes;
      const uint8_t* act1 = group1 + b * kActBlockBytes;
      for (int g = 0; g < num_sub; ++g) {
        for (const int64_t end = std::min(fetch_lines, fetched + fetch_per_unit); fetched < end; ++fetched) {
          __builtin_prefetch(out + (next + fetched / num_sub) * out_stride + (fetched % num_sub) * kRowsPerTile, 1, 3);
        }
        const uint8_t* sub = buffer + (b * kSubPanels + g) * kSubBytes;
        _tile_zero(4);
        _tile_zero(5);
        if (two) {
          _tile_zero(6);
          _tile_zero(7);
        }
        for (int k = 0; k < 4; ++k) {
          _tile_loadd(0, sub + (2 * k) * kTileBytes, 64);
          _tile_loadd(1, sub + (2 * k + 1) * kTileBytes, 64);
          _tile_loadd(2, act0 + k * kTileBytes, 64);
          _tile_dpbssd(4, 0, 2);
          _tile_dpbssd(5, 1, 2);
          if (two) {
            _tile_loadd(3, act1 + k * kTileBytes, 64);
            _tile_dpbssd(6, 0, 3);
            _tile_dpbssd(7, 1, 3);
          }
        }
        IWB_TILE_STORE(4, c[0]);
        IWB_TILE_STORE(5, c[1]);
        scale_rows<Block>(c[0], c[1], sub, act0, acc[g][0]);
        if (two) {
          IWB_TILE_STORE(6, c[2]);
          IWB_TILE_STORE(7, c[3]);
          scale_rows<Block>(c[2], c[3], sub, act1, acc[g][1]);
        }
      }
    }
    for (int g = 0; g < num_sub; ++g) {
      for (int h = 0; h < (two ? 2 : 1); ++h) {
        __m512i rows[16];
        for (int i = 0; i < 16; ++i) rows[i] = _mm512_load_si512(acc[g][h] + 16 * i);
        amx::store_by_token(rows, std::min(kGroupTokens, tokens - h * kGroupTokens), masks[g], _mm512_setzero_ps(),
                            out + (t0 + h * kGroupTokens) * out_stride + g * kRowsPerTile, out_stride);
      }
    }
  }
}

template <typename Block>
IWB_AMX void gemm_kquant_amx(const uint8_t* weight, size_t weight_stride, int num_rows, const uint8_t* groups,
                             size_t group_stride, int64_t num_tokens, int64_t n, const float* bias, float* out,
                             int64_t out_stride, uint8_t* buffer) {
  const int64_t nb = n / kQK_K;
  const int num_sub = (num_rows + kRowsPerTile - 1) / kRowsPerTile;
  // Packed as [super-block][sub-panel], each sub-panel's super-blocks in turn. While one is
  // packed, the next (the next sub-panel's first after a sub-panel's last, the first 16 rows
  // of the next panel after this panel's last: they follow in memory, and a prefetch past the
  // matrix does not fault) goes into L1: sixteen rows side by side are streams the hardware
  // prefetchers miss, and the first touches waited on L2 or memory. On rows of 1536 inputs
  // (6 super-blocks) the sub-panels' first super-blocks, unfetched, cost a sixth more (Q4_K 1536 x 8960
  // from memory, 20-32 tokens: 0.99-1.07 ms against 0.83-0.85 with them fetched).
  for (int g = 0; g < num_sub; ++g) {
    for (int64_t b = 0; b < nb; ++b) {
      const int next_first_row = (g + (b + 1 == nb ? 1 : 0)) * kRowsPerTile;
      const int64_t next_b = b + 1 == nb ? 0 : b + 1;
      for (int i = 0; i < 16; ++i) {
        const auto* next = weight + (next_first_row + i) * weight_stride + next_b * sizeof(Block);
        for (size_t off = 0; off < sizeof(Block); off += 64) __builtin_prefetch(next + off);
        __builtin_prefetch(next + sizeof(Block) - 1);
      }
      const Block* rows[16];
      for (int i = 0; i < 16; ++i) {
        rows[i] = reinterpret_cast<const Block*>(weight + std::min(g * kRowsPerTile + i, num_rows - 1) * weight_stride);
      }
      pack_sub_super_block(rows, b, buffer + (b * kSubPanels + g) * kSubBytes);
    }
  }
  amx::tile_buffer_written();
  __mmask16 masks[kSubPanels];
  alignas(64) float bias_rows[kQuantGemmAmxRows] = {};
  for (int g = 0; g < num_sub; ++g) {
    const int rows = std::min(kRowsPerTile, num_rows - g * kRowsPerTile);
    masks[g] = static_cast<__mmask16>((1u << rows) - 1);
  }
  if (bias != nullptr) std::copy(bias, bias + num_rows, bias_rows);
  multiply_panel<Block>(buffer, num_sub, masks, bias_rows, groups, group_stride, num_tokens, nb, out, out_stride);
}

}  // namespace

size_t quant_gemm_kquant_amx_buffer_bytes(int64_t n) { return static_cast<size_t>(n / kQK_K * kSubPanels * kSubBytes); }

size_t quant_gemm_kquant_amx_group_bytes(int64_t n) { return static_cast<size_t>(n / kQK_K * kActBlockBytes); }

// Up to 16 tokens of f32 activations as Q8_K blocks (the quantizer's own values), each
// super-block's bytes as 4 B tiles (tile row r: bytes 4r .. 4r+3 of every token), with the
// tokens' scales and sub-block sum pairs beside them; absent tokens are zero.
IWB_AVX512 void quant_gemm_kquant_amx_prepare(const float* input, int64_t n, int num_tokens, uint8_t* out) {
  const QuantizeActivationFn quantize = select_activation_quantizer(ActivationFormat::Q8_K, CpuPath::Avx512);
  BlockQ8_K blocks[kGroupTokens];
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    for (int t = 0; t < num_tokens; ++t) quantize(input + t * n + b * kQK_K, &blocks[t], kQK_K);
    uint8_t* o = out + b * kActBlockBytes;
    for (int k = 0; k < 4; ++k) {
      __m512i qs[kGroupTokens];
      for (int t = 0; t < kGroupTokens; ++t) {
        qs[t] = t < num_tokens ? _mm512_loadu_si512(blocks[t].qs + 64 * k) : _mm512_setzero_si512();
      }
      amx::store_b_tile(qs, o + k * kTileBytes);
    }
    auto* d = reinterpret_cast<float*>(o + kActTilesBytes);
    auto* sums = reinterpret_cast<int32_t*>(d + 16);  // [pair][token]
    for (int t = 0; t < kGroupTokens; ++t) {
      alignas(16) int32_t pairs[4] = {};
      if (t < num_tokens) _mm_store_si128(reinterpret_cast<__m128i*>(pairs), sub_block_sums(blocks[t]));
      d[t] = t < num_tokens ? blocks[t].d : 0.0f;
      for (int j = 0; j < 4; ++j) sums[16 * j + t] = pairs[j];
    }
  }
  amx::tile_buffer_written();
}

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
size_t quant_gemm_kquant_amx_group_bytes(int64_t) { return 0; }
void quant_gemm_kquant_amx_prepare(const float*, int64_t, int, uint8_t*) {}
QuantGemmFn select_quant_gemm_kquant_amx(GgmlType) { return nullptr; }
}  // namespace iwb::detail

#endif
