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
// A call takes up to kFloatGemmAmxRows = 128 rows, in panels of 32 packed as A tiles (16 rows
// x 32 values per step, a row's values as they are; hi and lo), a block of K steps at a time;
// per pair of 16-token groups the B tiles (hi and lo, split and laid out in bf16 pairs once per
// matmul by the driver through float_gemm_amx_prepare) are multiplied with both 16-row halves
// into four C tiles (weight rows x tokens). Why this order is at gemm_float_amx. The weights
// were the B operand until the fortieth session: their pair layout cost a 16 x 16 transpose per
// 16 rows and step in every call (F16 at 32 tokens, default model: pp32 +14%, pp128 +10% since).
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

// Tiles: 0, 1 B (activations: 16 bf16 pairs x 16 tokens) of the pair's two groups; 2, 3 A
// (weights: 16 rows x 32 bf16) of the panel's two halves; 4..7 C (16 rows x 16 tokens, f32).
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

// Packed weights: per 32-element step k, per half h, A hi then (F16) A lo.
template <typename W>
constexpr int64_t kStepBytes = kSubPanels*(W::kHasLow ? 2 : 1) * kTileBytes;

// Steps of K per block: the block of all tokens' B tiles (128 bytes a token and step) stays in
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
      // Row i of the A tiles: the row's 32 values as they are (hi, then lo).
      uint8_t* step = out + s * kStepBytes<W> + h * (W::kHasLow ? 2 : 1) * kTileBytes;
      for (int i = 0; i < 16; ++i) {
        __m512i hi, lo;
        W::load(rows[i] + 32 * k, count, &hi, &lo);
        _mm512_store_si512(step + 64 * i, hi);
        if constexpr (W::kHasLow) _mm512_store_si512(step + kTileBytes + 64 * i, lo);
      }
    }
  }
}

// Activation B tiles of 16 tokens: per step k, hi then lo, each 16 rows of 16 tokens' bf16
// pairs (row r: elements 2r and 2r + 1 of every token: a 16 x 16 dword transpose).
IWB_AMX void split_tokens(const float* input, int64_t n, int tokens, uint8_t* out) {
  const int64_t nk = (n + 31) / 32;
  for (int64_t k = 0; k < nk; ++k) {
    __m512i hi[16], lo[16];
    for (int t = 0; t < 16; ++t) {
      if (t < tokens) {
        amx::split_32(input + t * n + 32 * k, static_cast<int>(std::min<int64_t>(32, n - 32 * k)), &hi[t], &lo[t]);
      } else {
        hi[t] = lo[t] = _mm512_setzero_si512();
      }
    }
    amx::store_b_tile(hi, out + k * 2 * kTileBytes);
    amx::store_b_tile(lo, out + k * 2 * kTileBytes + kTileBytes);
  }
}

// This thread's accumulator: its rows (rounded up to whole panels) x the call's tokens (rounded
// up to whole groups), f32, as the C tiles hold them.
struct AccumulatorTag;

// One block of steps for one or two token groups (kPair) and a panel's two halves: four C
// tiles (4, 5: group 0's halves; 6, 7: group 1's), so four independent accumulation chains keep
// the tile unit busy (two chains wait on the product latency), and every A and B tile loaded
// serves two products. F16 per step: W hi x X hi, W lo x X hi, W hi x X lo (W: the weights' A
// tiles, X: the activations' B tiles).
template <typename W, bool kPair>
IWB_AMX inline void block_products(const uint8_t* a0, const uint8_t* a1, const uint8_t* packed, int64_t steps) {
  for (int64_t s = 0; s < steps; ++s) {
    const uint8_t* b = packed + s * kStepBytes<W>;  // the weights (A), x0 and x1 the tokens (B)
    const uint8_t* x0 = a0 + s * 2 * kTileBytes;
    const uint8_t* x1 = a1 + s * 2 * kTileBytes;
    constexpr int64_t kHalf = (W::kHasLow ? 2 : 1) * kTileBytes;  // the weights of rows 16..31
    _tile_loadd(0, x0, 64);
    if constexpr (kPair) _tile_loadd(1, x1, 64);
    _tile_loadd(2, b, 64);
    _tile_loadd(3, b + kHalf, 64);
    _tile_dpbf16ps(4, 2, 0);
    _tile_dpbf16ps(5, 3, 0);
    if constexpr (kPair) {
      _tile_dpbf16ps(6, 2, 1);
      _tile_dpbf16ps(7, 3, 1);
    }
    if constexpr (W::kHasLow) {
      _tile_loadd(2, b + kTileBytes, 64);
      _tile_loadd(3, b + kHalf + kTileBytes, 64);
      _tile_dpbf16ps(4, 2, 0);
      _tile_dpbf16ps(5, 3, 0);
      if constexpr (kPair) {
        _tile_dpbf16ps(6, 2, 1);
        _tile_dpbf16ps(7, 3, 1);
      }
      _tile_loadd(2, b, 64);  // from L1: loaded two products ago
      _tile_loadd(3, b + kHalf, 64);
    }
    _tile_loadd(0, x0 + kTileBytes, 64);
    if constexpr (kPair) _tile_loadd(1, x1 + kTileBytes, 64);
    _tile_dpbf16ps(4, 2, 0);
    _tile_dpbf16ps(5, 3, 0);
    if constexpr (kPair) {
      _tile_dpbf16ps(6, 2, 1);
      _tile_dpbf16ps(7, 3, 1);
    }
  }
}

// Up to kFloatGemmAmxRows rows in panels of 32. Loop order: blocks of K steps, then panels,
// then pairs of token groups. Each block's B tiles of all tokens are read from L2 by every
// panel of the call instead of from L3 by every panel (512 tokens of 8960 elements are 18 MiB
// of B tiles), and the panel's block of A stays in L1; the C tiles go through the accumulator
// between blocks (2 KiB each way per 16 x 32 outputs and block, against 48 tile products).
template <typename W>
IWB_AMX void gemm_float_amx(const uint8_t* weight, size_t weight_stride, int num_rows, const uint8_t* activation,
                            size_t activation_stride, int64_t num_tokens, int64_t n, const float* bias, float* out,
                            int64_t out_stride, uint8_t* buffer) {
  const int64_t nk = (n + 31) / 32;
  const int num_panels = (num_rows + kFloatGemmAmxPanelRows - 1) / kFloatGemmAmxPanelRows;
  const int64_t num_groups = (num_tokens + 15) / 16;
  // The accumulator by weight row (the C tiles' rows): acc_stride floats, one per token.
  const int64_t acc_stride = num_groups * 16;
  float* acc = reinterpret_cast<float*>(thread_buffer<AccumulatorTag>(
      static_cast<size_t>(num_panels * kFloatGemmAmxPanelRows * acc_stride) * sizeof(float)));
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
        // C tiles: 4 and 5 the panel's two halves (rows 0..15, 16..31) for group g, 6 and 7 for
        // group g + 1 (16 tokens on).
        float* c0 = acc + p * kFloatGemmAmxPanelRows * acc_stride + g * 16;
        float* c0_half = c0 + 16 * acc_stride;
        const int64_t c_stride = acc_stride * static_cast<int64_t>(sizeof(float));
        if (k0 == 0) {
          _tile_zero(4);
          _tile_zero(5);
          _tile_zero(6);
          _tile_zero(7);
        } else {
          _tile_loadd(4, c0, c_stride);
          _tile_loadd(5, c0_half, c_stride);
          if (is_pair) {
            _tile_loadd(6, c0 + 16, c_stride);
            _tile_loadd(7, c0_half + 16, c_stride);
          }
        }
        const uint8_t* a0 = activation + g * activation_stride + k0 * 2 * kTileBytes;
        if (is_pair) {
          block_products<W, true>(a0, a0 + activation_stride, packed, steps);
        } else {
          block_products<W, false>(a0, a0, packed, steps);  // the second group unused
        }
        _tile_stored(4, c0, c_stride);
        _tile_stored(5, c0_half, c_stride);
        if (is_pair) {
          _tile_stored(6, c0 + 16, c_stride);
          _tile_stored(7, c0_half + 16, c_stride);
        }
      }
    }
  }
  // The outputs with the bias, row tails masked: per 16 rows and 16 tokens, a transpose of
  // the accumulator's rows to the output's tokens.
  const int num_vectors = (num_rows + 15) / 16;
  for (int v = 0; v < num_vectors; ++v) {
    const int rows = std::min(16, num_rows - 16 * v);
    const __mmask16 mask = static_cast<__mmask16>(rows == 16 ? 0xFFFF : (1u << rows) - 1);
    const __m512 biases = bias ? _mm512_maskz_loadu_ps(mask, bias + 16 * v) : _mm512_setzero_ps();
    for (int64_t g = 0; g < num_groups; ++g) {
      __m512i by_row[16];
      for (int i = 0; i < 16; ++i) by_row[i] = _mm512_load_si512(acc + (16 * v + i) * acc_stride + 16 * g);
      amx::store_by_token(by_row, static_cast<int>(std::min<int64_t>(16, num_tokens - 16 * g)), mask, biases,
                          out + 16 * g * out_stride + 16 * v, out_stride);
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
