// Reference quantizers of the 8-bit activation blocks the integer dot products consume:
// Q8_1 (partner of Q4_1/Q5_1 weights) and Q8_K (partner of the K-quants). Rounding as ggml's
// quantize_row_q8_1_ref / quantize_row_q8_K_ref, so fast paths can be checked bit for bit.
#include "quantize_rows.h"
#include "quantize_search.h"

#include "iwb/kernels/dequantize.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace iwb::detail {

void quantize_q8_1(const float* x, BlockQ8_1* y, int64_t num_elements) {
  constexpr int kQK = 32;
  for (int64_t b = 0; b < num_elements / kQK; ++b, x += kQK) {
    float amax = 0.0f;
    for (int j = 0; j < kQK; ++j) amax = std::max(amax, std::fabs(x[j]));
    const float d = amax / 127.0f;
    float id = d != 0.0f ? 1.0f / d : 0.0f;
    if (!std::isfinite(id)) id = 0.0f;  // an f32-subnormal block: all levels 0
    y[b].d = f32_to_fp16(d);
    int sum = 0;
    for (int j = 0; j < kQK; ++j) {
      y[b].qs[j] = static_cast<int8_t>(std::round(x[j] * id));
      sum += y[b].qs[j];
    }
    // s carries the unrounded d, as ggml's does.
    y[b].s = f32_to_fp16(static_cast<float>(sum) * d);
  }
}

void quantize_q8_k(const float* x, BlockQ8_K* y, int64_t num_elements) {
  for (int64_t b = 0; b < num_elements / kQK_K; ++b, x += kQK_K) {
    float max = 0.0f, amax = 0.0f;
    for (int j = 0; j < kQK_K; ++j) {
      if (std::fabs(x[j]) > amax) {
        amax = std::fabs(x[j]);
        max = x[j];
      }
    }
    if (amax == 0.0f) {
      std::memset(&y[b], 0, sizeof(y[b]));  // ggml leaves bsums stale here; zeros are defined
      continue;
    }
    // -127 rather than -128: the signed extreme maps to -127 and every level fits -127..127,
    // which keeps the SIMD sign tricks of the dot products exact.
    const float iscale = -127.0f / max;
    for (int j = 0; j < kQK_K; ++j) y[b].qs[j] = static_cast<int8_t>(std::min(127, nearest_int(iscale * x[j])));
    for (int g = 0; g < kQK_K / 16; ++g) {
      int sum = 0;
      for (int i = 0; i < 16; ++i) sum += y[b].qs[16 * g + i];
      y[b].bsums[g] = static_cast<int16_t>(sum);
    }
    y[b].d = 1.0f / iscale;
  }
}

}  // namespace iwb::detail
