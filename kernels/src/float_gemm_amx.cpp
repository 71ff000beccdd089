// AMX bf16 prefill GEMM for F16 and BF16 weights with f32 activations (tdpbf16ps: bf16 pairs,
// f32 accumulation). bf16 keeps 8 significant bits: rounding the activations to bf16 alone
// errs by up to 2^-9 per term, some 1e-4..1e-3 of the output's size, against the float tests'
// 1e-5 agreement with the f32 reference. So values are split: x = x_hi + x_lo (both bf16, 16
// significant bits together), and F16 weights w = w_hi + w_lo exactly (11 bits). BF16 weights
// take two products, w * x_hi and w * x_lo; F16 three, w_hi * x_hi + w_hi * x_lo + w_lo * x_hi
// (w_lo * x_lo, ~2^-16 of a term, is dropped). Measured (test_quant_matmul
// amxPrefillMatchesReference, 200 rows, 32/769/2048 columns, 17..100 tokens): max error
// 3.8e-6..6.3e-6 of max |output| for F16, 2.0e-6..5.7e-6 for BF16.
//
// A call takes up to kFloatGemmAmxRows = 128 rows, in panels of 32 packed as B tiles (16 pairs
// x 16 rows per 32 elements; hi and lo), a block of K steps at a time; per pair of 16-token
// groups the A tiles (hi and lo, split once per matmul by the driver through
// float_gemm_amx_prepare) are multiplied with both 16-row halves into four C tiles. Why this
// order is at gemm_float_amx.
#include "quant_dot.h"

#if defined(__x86_64__)
#include "amx_tiles.h"
#include "thread_buffer.h"

#include <algorithm>
#include <memory>

namespace iwb::detail {
namespace {

using namespace avx512;

constexpr int kRowsPerTile = 16;
constexpr int kSubPanels = kFloatGemmAmxPanelRows / kRowsPerTile;
static_assert(kSubPanels == 2);
constexpr int64_t kTileBytes = 1024;
constexpr uint32_t kConfigKey = 0x300;

// Tiles: 0, 1 A hi and lo (16 tokens x 32 bf16); 2, 3 B hi and lo of rows 0..15; 4, 5 of rows
// 16..31; 6, 7 C (16 tokens x 16 f32) of the two halves.
void configure() { amx::configure_full_tiles(kConfigKey); }

struct WeightF16 {
  static constexpr bool kHasLow = true;
  IWB_AMX static void load(const uint16_t* w, int count, __m512i* hi, __m512i* lo) {
    const __mmask32 m = static_cast<__mmask32>(count >= 32 ? 0xFFFFFFFFu : (1u << count) - 1);
    const __m512i h = _mm512_maskz_loadu_epi16(m, w);  // past count: zeros, split to zeros
    amx::split_pair(_mm512_cvtph_ps(_mm512_castsi512_si256(h)), _mm512_cvtph_ps(_mm512_extracti64x4_epi64(h, 1)), hi,
                    lo);
  }
};
struct WeightBf16 {
  static constexpr bool kHasLow = false;
  IWB_AMX static void load(const uint16_t* w, int count, __m512i* hi, __m512i* lo) {
    const __mmask32 m = static_cast<__mmask32>(count >= 32 ? 0xFFFFFFFFu : (1u << count) - 1);
    *hi = _mm512_maskz_loadu_epi16(m, w);
    *lo = _mm512_setzero_si512();
  }
};

// Packed weights: per 32-element step k, per half h, B hi then (F16) B lo.
template <typename W>
constexpr int64_t kStepBytes = kSubPanels*(W::kHasLow ? 2 : 1) * kTileBytes;

// Steps of K per block: the block of all tokens' A tiles (128 bytes a token and step) stays in
// L2 (kBlockActivationBytes) while the call's panels pass over it; at 512 tokens that is 8
// steps, and one panel's packed block (32 KiB for F16) then stays in L1 while every token group
// passes over it. Fewer tokens take longer blocks (up to kMaxStepsPerBlock): each block
// restarts the streams that pack 32 rows, and each costs the C tiles a trip through the
// accumulator.
constexpr int64_t kBlockActivationBytes = 512 * 1024;
constexpr int64_t kMinStepsPerBlock = 8;
constexpr int64_t kMaxStepsPerBlock = 64;
int64_t steps_per_block(int64_t num_groups) {
  return std::clamp<int64_t>(kBlockActivationBytes / (num_groups * 2 * kTileBytes), kMinStepsPerBlock,
                             kMaxStepsPerBlock);
}

constexpr int64_t kFetchAheadSteps = 4;  // 256 bytes of a row

// Steps [k0, k0 + steps) of a panel of num_rows <= 32 rows (the rest repeat the last row; their
// outputs are never written).
template <typename W>
IWB_AMX void pack_panel_block(const uint8_t* weight, size_t stride, int num_rows, int64_t n, int64_t k0, int64_t steps,
                              uint8_t* out) {
  for (int h = 0; h < kSubPanels; ++h) {
    const uint16_t* rows[16];
    for (int i = 0; i < 16; ++i) {
      rows[i] = reinterpret_cast<const uint16_t*>(weight + std::min(h * kRowsPerTile + i, num_rows - 1) * stride);
    }
    for (int64_t s = 0; s < steps; ++s) {
      const int64_t k = k0 + s;
      const int count = static_cast<int>(std::min<int64_t>(32, n - 32 * k));
      // Each row's bytes kFetchAheadSteps steps on, as the packing reaches them: 16 rows side by
      // side are streams the hardware prefetchers miss. (Before, the next block's rows went
      // into L2 in one burst per pair of token groups while the tiles worked: with one pair,
      // up to 2,048 lines at once, and the core stalled on them; Xeon model 167, F16 at 32
      // tokens, 1536x8960 / 8960x1536 from memory: 4.0-4.6 / 3.5-4.2 ms, now 3.2-3.7 /
      // 2.5-2.9; at 128 tokens 6.5-6.9 / 6.6-7.6, now 5.3-6.0 / 5.8-6.3; at 512 even.)
      for (int i = 0; i < 16; ++i) __builtin_prefetch(rows[i] + 32 * (k + kFetchAheadSteps));
      __m512i hi[16], lo[16];
      for (int i = 0; i < 16; ++i) W::load(rows[i] + 32 * k, count, &hi[i], &lo[i]);
      uint8_t* step = out + s * kStepBytes<W> + h * (W::kHasLow ? 2 : 1) * kTileBytes;
      amx::store_b_tile(hi, step);
      if constexpr (W::kHasLow) amx::store_b_tile(lo, step + kTileBytes);
    }
  }
}

// Activation A tiles of 16 tokens: per step k, hi then lo (16 rows x 64 bytes each).
IWB_AMX void split_tokens(const float* input, int64_t n, int tokens, uint8_t* out) {
  const int64_t nk = (n + 31) / 32;
  for (int t = 0; t < 16; ++t) {
    const float* x = input + std::min(t, tokens - 1) * n;
    for (int64_t k = 0; k < nk; ++k) {
      __m512i hi, lo;
      if (t < tokens) {
        amx::split_32(x + 32 * k, static_cast<int>(std::min<int64_t>(32, n - 32 * k)), &hi, &lo);
      } else {
        hi = lo = _mm512_setzero_si512();
      }
      _mm512_store_si512(out + k * 2 * kTileBytes + 64 * t, hi);
      _mm512_store_si512(out + k * 2 * kTileBytes + kTileBytes + 64 * t, lo);
    }
  }
}

// This thread's accumulator: the call's tokens (rounded up to whole groups) x its rows
// (rounded up to whole panels), f32.
struct AccumulatorTag;

// One block of steps for one or two token groups (kPair) and a panel's two halves: four C
// tiles (4, 5: group 0's halves; 6, 7: group 1's), so four independent accumulation chains keep
// the tile unit busy (two chains wait on the product latency), and every A and B tile loaded
// serves two products. F16 per step: A hi x B hi, A hi x B lo, A lo x B hi.
template <typename W, bool kPair>
IWB_AMX inline void block_products(const uint8_t* a0, const uint8_t* a1, const uint8_t* packed, int64_t steps) {
  for (int64_t s = 0; s < steps; ++s) {
    const uint8_t* b = packed + s * kStepBytes<W>;
    const uint8_t* x0 = a0 + s * 2 * kTileBytes;
    const uint8_t* x1 = a1 + s * 2 * kTileBytes;
    constexpr int64_t kHalf = (W::kHasLow ? 2 : 1) * kTileBytes;  // B of rows 16..31
    _tile_loadd(0, x0, 64);
    if constexpr (kPair) _tile_loadd(1, x1, 64);
    _tile_loadd(2, b, 64);
    _tile_loadd(3, b + kHalf, 64);
    _tile_dpbf16ps(4, 0, 2);
    _tile_dpbf16ps(5, 0, 3);
    if constexpr (kPair) {
      _tile_dpbf16ps(6, 1, 2);
      _tile_dpbf16ps(7, 1, 3);
    }
    if constexpr (W::kHasLow) {
      _tile_loadd(2, b + kTileBytes, 64);
      _tile_loadd(3, b + kHalf + kTileBytes, 64);
      _tile_dpbf16ps(4, 0, 2);
      _tile_dpbf16ps(5, 0, 3);
      if constexpr (kPair) {
        _tile_dpbf16ps(6, 1, 2);
        _tile_dpbf16ps(7, 1, 3);
      }
      _tile_loadd(2, b, 64);  // from L1: loaded two products ago
      _tile_loadd(3, b + kHalf, 64);
    }
    _tile_loadd(0, x0 + kTileBytes, 64);
    if constexpr (kPair) _tile_loadd(1, x1 + kTileBytes, 64);
    _tile_dpbf16ps(4, 0, 2);
    _tile_dpbf16ps(5, 0, 3);
    if constexpr (kPair) {
      _tile_dpbf16ps(6, 1, 2);
      _tile_dpbf16ps(7, 1, 3);
    }
  }
}

// Up to kFloatGemmAmxRows rows in panels of 32. Loop order: blocks of K steps, then panels,
// then pairs of token groups. Each block's A tiles of all tokens are read from L2 by every
// panel of the call instead of from L3 by every panel (512 tokens of 8960 elements are 18 MiB
// of A tiles), and the panel's block of B stays in L1; the C tiles go through the accumulator
// between blocks (2 KiB each way per 16 x 32 outputs and block, against 48 tile products).
template <typename W>
IWB_AMX void gemm_float_amx(const uint8_t* weight, size_t weight_stride, int num_rows, const uint8_t* activation,
                            size_t activation_stride, int64_t num_tokens, int64_t n, const float* bias, float* out,
                            int64_t out_stride, uint8_t* buffer) {
  const int64_t nk = (n + 31) / 32;
  const int num_panels = (num_rows + kFloatGemmAmxPanelRows - 1) / kFloatGemmAmxPanelRows;
  const int64_t num_groups = (num_tokens + 15) / 16;
  const int64_t acc_stride = static_cast<int64_t>(num_panels) * kFloatGemmAmxPanelRows;  // floats per token
  float* acc = reinterpret_cast<float*>(
      thread_buffer<AccumulatorTag>(static_cast<size_t>(num_groups * 16 * acc_stride) * sizeof(float)));
  uint8_t* packed = buffer;
  configure();
  const int64_t block_steps = steps_per_block(num_groups);
  for (int64_t k0 = 0; k0 < nk; k0 += block_steps) {
    const int64_t steps = std::min(block_steps, nk - k0);
    for (int p = 0; p < num_panels; ++p) {
      const int panel_rows = std::min(kFloatGemmAmxPanelRows, num_rows - p * kFloatGemmAmxPanelRows);
      pack_panel_block<W>(weight + p * kFloatGemmAmxPanelRows * weight_stride, weight_stride, panel_rows, n, k0, steps,
                          packed);
      amx::tile_buffer_written();
      for (int64_t g = 0; g < num_groups; g += 2) {
        const bool is_pair = g + 1 < num_groups;
        float* c0 = acc + g * 16 * acc_stride + p * kFloatGemmAmxPanelRows;
        float* c1 = c0 + 16 * acc_stride;
        const int64_t c_stride = acc_stride * static_cast<int64_t>(sizeof(float));
        if (k0 == 0) {
          _tile_zero(4);
          _tile_zero(5);
          _tile_zero(6);
          _tile_zero(7);
        } else {
          _tile_loadd(4, c0, c_stride);
          _tile_loadd(5, c0 + 16, c_stride);
          if (is_pair) {
            _tile_loadd(6, c1, c_stride);
            _tile_loadd(7, c1 + 16, c_stride);
          }
        }
        const uint8_t* a0 = activation + g * activation_stride + k0 * 2 * kTileBytes;
        if (is_pair) {
          block_products<W, true>(a0, a0 + activation_stride, packed, steps);
        } else {
          block_products<W, false>(a0, a0, packed, steps);  // the second group unused
        }
        _tile_stored(4, c0, c_stride);
        _tile_stored(5, c0 + 16, c_stride);
        if (is_pair) {
          _tile_stored(6, c1, c_stride);
          _tile_stored(7, c1 + 16, c_stride);
        }
      }
    }
  }
  // The outputs with the bias, row tails masked, token by token: each token's outputs are
  // written in one run.
  __m512 biases[kFloatGemmAmxRows / 16];
  __mmask16 masks[kFloatGemmAmxRows / 16];
  const int num_vectors = (num_rows + 15) / 16;
  for (int v = 0; v < num_vectors; ++v) {
    const int rows = std::min(16, num_rows - 16 * v);
    masks[v] = static_cast<__mmask16>(rows == 16 ? 0xFFFF : (1u << rows) - 1);
    biases[v] = bias ? _mm512_maskz_loadu_ps(masks[v], bias + 16 * v) : _mm512_setzero_ps();
  }
  for (int64_t t = 0; t < num_tokens; ++t) {
    const float* a = acc + t * acc_stride;
    float* o = out + t * out_stride;
    for (int v = 0; v < num_vectors; ++v) {
      _mm512_mask_storeu_ps(o + 16 * v, masks[v], _mm512_add_ps(_mm512_load_ps(a + 16 * v), biases[v]));
    }
  }
}

}  // namespace

size_t float_gemm_amx_buffer_bytes(int64_t n) {
  return static_cast<size_t>(std::min((n + 31) / 32, kMaxStepsPerBlock) * kStepBytes<WeightF16>);
}

size_t float_gemm_amx_group_bytes(int64_t n) { return static_cast<size_t>((n + 31) / 32) * 2 * kTileBytes; }

void float_gemm_amx_prepare(const float* input, int64_t n, int num_tokens, uint8_t* out) {
  split_tokens(input, n, num_tokens, out);
  amx::tile_buffer_written();
}

QuantGemmFn select_float_gemm_amx(GgmlType type) {
  if (!has_amx_bf16()) return nullptr;
  switch (type) {
    case GgmlType::F16: return gemm_float_amx<WeightF16>;
    case GgmlType::BF16: return gemm_float_amx<WeightBf16>;
    default: return nullptr;
  }
}

}  // namespace iwb::detail

#else

namespace iwb::detail {
size_t float_gemm_amx_buffer_bytes(int64_t) { return 0; }
size_t float_gemm_amx_group_bytes(int64_t) { return 0; }
void float_gemm_amx_prepare(const float*, int64_t, int, uint8_t*) {}
QuantGemmFn select_float_gemm_amx(GgmlType) { return nullptr; }
}  // namespace iwb::detail

#endif
