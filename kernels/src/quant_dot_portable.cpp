// Portable integer dot products: every quantized weight type with an 8-bit activation partner,
// in plain C++ (exact integer sums per block, f32 across blocks). They are what a CPU without
// AVX2 runs and the arithmetic the SIMD paths must reproduce.
#include "quant_dot.h"
#include "quantize_rows.h"

#include "iwb/kernels/dequantize.h"

#include <cmath>
#include <cstring>

namespace iwb::detail {
namespace {

uint32_t load_u32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// Unsigned 4-bit (plus optional 5th bit) values of a 32-element block: element j is the low
// nibble of qs[j], element j + 16 the high nibble; bit j of qh is element j's 5th bit.
void unpack_nibbles(const uint8_t* qs, uint32_t qh, bool has_high, int out[32]) {
  for (int j = 0; j < 16; ++j) {
    out[j] = qs[j] & 0x0F;
    out[j + 16] = qs[j] >> 4;
    if (has_high) {
      out[j] |= static_cast<int>((qh >> j) & 1u) << 4;
      out[j + 16] |= static_cast<int>((qh >> (j + 16)) & 1u) << 4;
    }
  }
}

int32_t dot32(const int* w, const int8_t* a) {
  int32_t sum = 0;
  for (int j = 0; j < 32; ++j) sum += w[j] * a[j];
  return sum;
}

int32_t sum32(const int8_t* a) {
  int32_t sum = 0;
  for (int j = 0; j < 32; ++j) sum += a[j];
  return sum;
}

template <typename Block, bool kHasMin, bool kHasHigh, int kOffset>
float vec_dot_nibbles(const void* weight, const void* act, int64_t n) {
  const auto* w = static_cast<const Block*>(weight);
  const auto* a = static_cast<const BlockQ8A*>(act);
  float sum = 0.0f;
  int q[32];
  for (int64_t b = 0; b < n / 32; ++b) {
    uint32_t qh = 0;
    if constexpr (kHasHigh) qh = load_u32(w[b].qh);
    unpack_nibbles(w[b].qs, qh, kHasHigh, q);
    // sum((q - offset) * a) = sum(q * a) - offset * sum(a), exactly, in integers.
    const int32_t dot = dot32(q, a[b].qs) - kOffset * sum32(a[b].qs);
    sum += fp16_to_f32(w[b].d) * a[b].d * static_cast<float>(dot);
    if constexpr (kHasMin) sum += fp16_to_f32(w[b].m) * a[b].s;
  }
  return sum;
}

float vec_dot_q8_0(const void* weight, const void* act, int64_t n) {
  const auto* w = static_cast<const BlockQ8_0*>(weight);
  const auto* a = static_cast<const BlockQ8A*>(act);
  float sum = 0.0f;
  for (int64_t b = 0; b < n / 32; ++b) {
    int32_t dot = 0;
    for (int j = 0; j < 32; ++j) dot += w[b].qs[j] * a[b].qs[j];
    sum += fp16_to_f32(w[b].d) * a[b].d * static_cast<float>(dot);
  }
  return sum;
}

// MXFP4: signed E2M1 values (doubled, -12..12) times the activations, exactly in integers,
// scaled by the power-of-two half scale.
float vec_dot_mxfp4(const void* weight, const void* act, int64_t n) {
  const auto* w = static_cast<const BlockMxfp4*>(weight);
  const auto* a = static_cast<const BlockQ8A*>(act);
  float sum = 0.0f;
  for (int64_t b = 0; b < n / kQKMxfp4; ++b) {
    int32_t dot = 0;
    for (int j = 0; j < kQKMxfp4 / 2; ++j) {
      dot += kMxfp4Values[w[b].qs[j] & 0x0F] * a[b].qs[j];
      dot += kMxfp4Values[w[b].qs[j] >> 4] * a[b].qs[j + kQKMxfp4 / 2];
    }
    sum += e8m0_to_f32_half(w[b].e) * a[b].d * static_cast<float>(dot);
  }
  return sum;
}

// Q4_K / Q5_K: sum_j d * sc_j * sum(q * a) - dmin * m_j * sum(a) over the 8 sub-blocks of 32.
template <typename Block, bool kHasHigh>
float vec_dot_k4(const void* weight, const void* act, int64_t n) {
  const auto* w = static_cast<const Block*>(weight);
  const auto* a = static_cast<const BlockQ8_K*>(act);
  float sum = 0.0f;
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    int32_t sum_scaled = 0, sum_mins = 0;
    for (int j = 0; j < 8; ++j) {
      uint8_t sc, m;
      unpack_scale_min_k4(j, w[b].scales, &sc, &m);
      const int chunk = j / 2, shift = 4 * (j % 2);
      int32_t dot = 0;
      for (int l = 0; l < 32; ++l) {
        int q = (w[b].qs[chunk * 32 + l] >> shift) & 0x0F;
        if constexpr (kHasHigh) q |= ((w[b].qh[l] >> j) & 1) << 4;
        dot += q * a[b].qs[j * 32 + l];
      }
      sum_scaled += sc * dot;
      sum_mins += m * (a[b].bsums[2 * j] + a[b].bsums[2 * j + 1]);
    }
    sum += a[b].d * (fp16_to_f32(w[b].d) * static_cast<float>(sum_scaled) -
                     fp16_to_f32(w[b].dmin) * static_cast<float>(sum_mins));
  }
  return sum;
}

float vec_dot_q6_k(const void* weight, const void* act, int64_t n) {
  const auto* w = static_cast<const BlockQ6_K*>(weight);
  const auto* a = static_cast<const BlockQ8_K*>(act);
  float sum = 0.0f;
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    int32_t sum_scaled = 0;
    for (int half = 0; half < 2; ++half) {
      const uint8_t* ql = w[b].ql + half * 64;
      const uint8_t* qh = w[b].qh + half * 32;
      const int8_t* aq = a[b].qs + half * 128;
      int32_t group[8] = {};  // 16-element sums of (q - 32) * a, in element order
      for (int l = 0; l < 32; ++l) {
        const int q0 = ((ql[l] & 0x0F) | ((qh[l] & 3) << 4)) - 32;
        const int q1 = ((ql[l + 32] & 0x0F) | (((qh[l] >> 2) & 3) << 4)) - 32;
        const int q2 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
        const int q3 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
        group[l / 16] += q0 * aq[l];
        group[2 + l / 16] += q1 * aq[l + 32];
        group[4 + l / 16] += q2 * aq[l + 64];
        group[6 + l / 16] += q3 * aq[l + 96];
      }
      for (int g = 0; g < 8; ++g) sum_scaled += w[b].scales[half * 8 + g] * group[g];
    }
    sum += a[b].d * fp16_to_f32(w[b].d) * static_cast<float>(sum_scaled);
  }
  return sum;
}

}  // namespace

// The Q8_1-style activation quantizer every path shares the rounding of: d = amax / 127 and
// q = round(x / d) as quantize_row_q8_1_ref (half away from zero), d kept in f32.
void quantize_q8a_portable(const float* x, void* dst, int64_t n) {
  auto* y = static_cast<BlockQ8A*>(dst);
  for (int64_t b = 0; b < n / 32; ++b, x += 32) {
    float amax = 0.0f;
    for (int j = 0; j < 32; ++j) amax = std::fmax(amax, std::fabs(x[j]));
    const float d = amax / 127.0f;
    float id = d != 0.0f ? 1.0f / d : 0.0f;
    if (!std::isfinite(id)) id = 0.0f;
    int32_t sum = 0;
    for (int j = 0; j < 32; ++j) {
      y[b].qs[j] = static_cast<int8_t>(std::round(x[j] * id));
      sum += y[b].qs[j];
    }
    y[b].d = d;
    y[b].s = d * static_cast<float>(sum);
  }
}

void quantize_q8k_portable(const float* x, void* dst, int64_t n) { quantize_q8_k(x, static_cast<BlockQ8_K*>(dst), n); }

bool select_quant_dot_portable(GgmlType type, DotKernels* out) {
  DotKernels k;
  switch (type) {
    case GgmlType::Q4_0: k.vec_dot = vec_dot_nibbles<BlockQ4_0, false, false, 8>; break;
    case GgmlType::Q4_1: k.vec_dot = vec_dot_nibbles<BlockQ4_1, true, false, 0>; break;
    case GgmlType::Q5_0: k.vec_dot = vec_dot_nibbles<BlockQ5_0, false, true, 16>; break;
    case GgmlType::Q5_1: k.vec_dot = vec_dot_nibbles<BlockQ5_1, true, true, 0>; break;
    case GgmlType::Q8_0: k.vec_dot = vec_dot_q8_0; break;
    case GgmlType::MXFP4: k.vec_dot = vec_dot_mxfp4; break;
    case GgmlType::Q4_K: k.vec_dot = vec_dot_k4<BlockQ4_K, false>; break;
    case GgmlType::Q5_K: k.vec_dot = vec_dot_k4<BlockQ5_K, true>; break;
    case GgmlType::Q6_K: k.vec_dot = vec_dot_q6_k; break;
    default: return false;
  }
  k.format = activation_format(type);
  k.quantize = select_activation_quantizer(k.format, CpuPath::Portable);
  *out = k;
  return true;
}

}  // namespace iwb::detail
