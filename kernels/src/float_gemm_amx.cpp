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
// A panel of kFloatGemmAmxRows = 32 rows is packed once per call as B tiles (16 pairs x 16
// rows per 32 elements; hi and lo), then per group of 16 tokens the A tiles (hi and lo, split
// once per matmul by the driver through float_gemm_amx_prepare) are multiplied with both 16-row
// halves, each in its own C tile that accumulates over all of K.
#include "quant_dot.h"

#if defined(__x86_64__)
#include "amx_tiles.h"

#include <algorithm>
#include <memory>

namespace iwb::detail {
namespace {

using namespace avx512;

constexpr int kRowsPerTile = 16;
constexpr int kSubPanels = kFloatGemmAmxRows / kRowsPerTile;
static_assert(kSubPanels == 2);
constexpr int64_t kTileBytes = 1024;
constexpr uint32_t kConfigKey = 0x300;

// Tiles: 0, 1 A hi and lo (16 tokens x 32 bf16); 2, 3 B hi and lo of rows 0..15; 4, 5 of rows
// 16..31; 6, 7 C (16 tokens x 16 f32) of the two halves.
void configure() {
  amx::TileConfig c;
  for (int t = 0; t < 8; ++t) c.rows[t] = 16, c.colsb[t] = 64;
  amx::ensure_tile_config(kConfigKey, c);
}

// x as bf16 hi and lo (x - hi, rounded): 32 f32 values, count < 32 reading zeros past it.
IWB_AMX inline void split_32(const float* x, int count, __m512i* hi, __m512i* lo) {
  const __mmask16 m0 = static_cast<__mmask16>(count >= 16 ? 0xFFFF : (1u << count) - 1);
  const __mmask16 m1 = static_cast<__mmask16>(count >= 32 ? 0xFFFF : count <= 16 ? 0 : (1u << (count - 16)) - 1);
  const __m512 x0 = _mm512_maskz_loadu_ps(m0, x), x1 = _mm512_maskz_loadu_ps(m1, x + 16);
  const __m512bh h = _mm512_cvtne2ps_pbh(x1, x0);
  const __m512i hv = reinterpret_cast<const __m512i&>(h);
  const __m512 h0 = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm512_castsi512_si256(hv)), 16));
  const __m512 h1 = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm512_extracti64x4_epi64(hv, 1)), 16));
  const __m512bh l = _mm512_cvtne2ps_pbh(_mm512_sub_ps(x1, h1), _mm512_sub_ps(x0, h0));
  *hi = hv;
  *lo = reinterpret_cast<const __m512i&>(l);
}

struct WeightF16 {
  static constexpr bool kHasLow = true;
  IWB_AMX static void load(const uint16_t* w, int count, __m512i* hi, __m512i* lo) {
    const __mmask32 m = static_cast<__mmask32>(count >= 32 ? 0xFFFFFFFFu : (1u << count) - 1);
    const __m512i h = _mm512_maskz_loadu_epi16(m, w);
    alignas(64) float f[32];
    _mm512_store_ps(f, _mm512_cvtph_ps(_mm512_castsi512_si256(h)));
    _mm512_store_ps(f + 16, _mm512_cvtph_ps(_mm512_extracti64x4_epi64(h, 1)));
    split_32(f, 32, hi, lo);
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
constexpr int64_t kStepBytes = kSubPanels * (W::kHasLow ? 2 : 1) * kTileBytes;

template <typename W>
IWB_AMX void pack_panel(const uint8_t* weight, size_t stride, int num_rows, int64_t n, uint8_t* out) {
  const int64_t nk = (n + 31) / 32;
  for (int h = 0; h < kSubPanels; ++h) {
    const uint16_t* rows[16];
    for (int i = 0; i < 16; ++i) {
      rows[i] = reinterpret_cast<const uint16_t*>(weight + std::min(h * kRowsPerTile + i, num_rows - 1) * stride);
    }
    for (int64_t k = 0; k < nk; ++k) {
      const int count = static_cast<int>(std::min<int64_t>(32, n - 32 * k));
      __m512i hi[16], lo[16];
      for (int i = 0; i < 16; ++i) W::load(rows[i] + 32 * k, count, &hi[i], &lo[i]);
      uint8_t* step = out + k * kStepBytes<W> + h * (W::kHasLow ? 2 : 1) * kTileBytes;
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
        split_32(x + 32 * k, static_cast<int>(std::min<int64_t>(32, n - 32 * k)), &hi, &lo);
      } else {
        hi = lo = _mm512_setzero_si512();
      }
      _mm512_store_si512(out + k * 2 * kTileBytes + 64 * t, hi);
      _mm512_store_si512(out + k * 2 * kTileBytes + kTileBytes + 64 * t, lo);
    }
  }
}

template <typename W>
IWB_AMX void gemm_float_amx(const uint8_t* weight, size_t weight_stride, int num_rows, const uint8_t* activation,
                            size_t activation_stride, int64_t num_tokens, int64_t n, const float* bias, float* out,
                            int64_t out_stride, uint8_t* buffer) {
  const int64_t nk = (n + 31) / 32;
  uint8_t* packed = buffer;
  pack_panel<W>(weight, weight_stride, num_rows, n, packed);
  amx::tile_buffer_written();
  configure();
  const __mmask16 mask0 = static_cast<__mmask16>(num_rows >= 16 ? 0xFFFF : (1u << num_rows) - 1);
  const __mmask16 mask1 = static_cast<__mmask16>(num_rows <= 16 ? 0 : num_rows >= 32 ? 0xFFFF : (1u << (num_rows - 16)) - 1);
  const __m512 bias0 = bias ? _mm512_maskz_loadu_ps(mask0, bias) : _mm512_setzero_ps();
  const __m512 bias1 = bias ? _mm512_maskz_loadu_ps(mask1, bias + 16) : _mm512_setzero_ps();
  alignas(64) float c[2][16 * 16];
  for (int64_t t0 = 0; t0 < num_tokens; t0 += 16) {
    const int tokens = static_cast<int>(std::min<int64_t>(16, num_tokens - t0));
    // The group's A tiles, split once per call by the driver (float_gemm_amx_prepare).
    const uint8_t* a = activation + (t0 / 16) * activation_stride;
    _tile_zero(6);
    _tile_zero(7);
    for (int64_t k = 0; k < nk; ++k) {
      const uint8_t* step = packed + k * kStepBytes<W>;
      _tile_loadd(0, a + k * 2 * kTileBytes, 64);
      _tile_loadd(1, a + k * 2 * kTileBytes + kTileBytes, 64);
      if constexpr (W::kHasLow) {
        _tile_loadd(2, step, 64);
        _tile_loadd(3, step + kTileBytes, 64);
        _tile_loadd(4, step + 2 * kTileBytes, 64);
        _tile_loadd(5, step + 3 * kTileBytes, 64);
        _tile_dpbf16ps(6, 0, 2);
        _tile_dpbf16ps(7, 0, 4);
        _tile_dpbf16ps(6, 1, 2);
        _tile_dpbf16ps(7, 1, 4);
        _tile_dpbf16ps(6, 0, 3);
        _tile_dpbf16ps(7, 0, 5);
      } else {
        _tile_loadd(2, step, 64);
        _tile_loadd(4, step + kTileBytes, 64);
        _tile_dpbf16ps(6, 0, 2);
        _tile_dpbf16ps(7, 0, 4);
        _tile_dpbf16ps(6, 1, 2);
        _tile_dpbf16ps(7, 1, 4);
      }
    }
    IWB_TILE_STORE(6, c[0]);
    IWB_TILE_STORE(7, c[1]);
    for (int t = 0; t < tokens; ++t) {
      float* o = out + (t0 + t) * out_stride;
      _mm512_mask_storeu_ps(o, mask0, _mm512_add_ps(_mm512_load_ps(c[0] + 16 * t), bias0));
      if (mask1 != 0) _mm512_mask_storeu_ps(o + 16, mask1, _mm512_add_ps(_mm512_load_ps(c[1] + 16 * t), bias1));
    }
  }
}

}  // namespace

size_t float_gemm_amx_buffer_bytes(int64_t n) { return static_cast<size_t>((n + 31) / 32) * kStepBytes<WeightF16>; }

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
