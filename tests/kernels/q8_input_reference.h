// The reference of matvec_cuda's int8-activation path (MatvecCudaArgs::x_q8): one Q4_0, Q8_0,
// Q4_K or Q6_K weight row against x quantized by quantize_x_q8_cuda, summed over each block's integers in
// int64 and scaled in double. Shared by the GPU test and its emulated twin.
#pragma once

#include "iwb/kernels/dequantize.h"
#include "iwb/kernels/ggml_type.h"
#include "iwb/kernels/quant_blocks.h"

#include <QString>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>

namespace iwb::test {

struct Q8InputReference {
  double value = 0;      // sum over blocks of d_w * d_x * sum_j q_w q_x
  double magnitude = 0;  // the same with |.| of each block's products: the rounding's scale
};

// Q4_K: sub-block j of super-block s against x block 8s + j, as
// d_x (d sc_j sum q_w q_x - dmin m_j sum q_x); the magnitude takes both terms' absolute values.
inline Q8InputReference q4_k_q8_input_reference(const uint8_t* row, const int8_t* q, const float* d,
                                                int64_t num_blocks) {
  Q8InputReference r;
  for (int64_t b = 0; b < num_blocks; ++b) {
    const uint8_t* block = row + static_cast<size_t>(b / 8) * sizeof(BlockQ4_K);
    const int j = static_cast<int>(b % 8);
    uint16_t d_bits, dmin_bits;
    std::memcpy(&d_bits, block, 2);
    std::memcpy(&dmin_bits, block + 2, 2);
    uint8_t sc, mn;
    unpack_scale_min_k4(j, block + 4, &sc, &mn);
    const double scale = static_cast<double>(fp16_to_f32(d_bits)) * sc;
    const double min = static_cast<double>(fp16_to_f32(dmin_bits)) * mn;
    const uint8_t* qs = block + 16 + 32 * (j / 2);
    int64_t dot = 0, dot_abs = 0, sum = 0, sum_abs = 0;
    for (int l = 0; l < 32; ++l) {
      const int w = j % 2 == 0 ? (qs[l] & 15) : (qs[l] >> 4);
      const int x = q[32 * b + l];
      dot += w * x;
      dot_abs += std::abs(w * x);
      sum += x;
      sum_abs += std::abs(x);
    }
    r.value += d[b] * (scale * static_cast<double>(dot) - min * static_cast<double>(sum));
    r.magnitude += std::fabs(d[b]) *
                   (std::fabs(scale) * static_cast<double>(dot_abs) + std::fabs(min) * static_cast<double>(sum_abs));
  }
  return r;
}

// Q6_K: value i of a block is d sc[i / 16] (q_i - 32) with q_i from ql and qh as
// dequantize_row_ref reads them; each 16-value group's integer sum against x block i / 32.
inline Q8InputReference q6_k_q8_input_reference(const uint8_t* row, const int8_t* q, const float* d,
                                                int64_t num_blocks) {
  Q8InputReference r;
  for (int64_t s = 0; s < num_blocks / 8; ++s) {
    const uint8_t* block = row + static_cast<size_t>(s) * sizeof(BlockQ6_K);
    const uint8_t* ql = block + offsetof(BlockQ6_K, ql);
    const uint8_t* qh = block + offsetof(BlockQ6_K, qh);
    const auto* scales = reinterpret_cast<const int8_t*>(block + offsetof(BlockQ6_K, scales));
    uint16_t d_bits;
    std::memcpy(&d_bits, block + offsetof(BlockQ6_K, d), 2);
    int w[256];
    for (int h = 0; h < 2; ++h) {
      for (int l = 0; l < 32; ++l) {
        const uint8_t lo = ql[64 * h + l], lo2 = ql[64 * h + 32 + l], hi = qh[32 * h + l];
        w[128 * h + l] = ((lo & 15) | ((hi & 3) << 4)) - 32;
        w[128 * h + 32 + l] = ((lo2 & 15) | (((hi >> 2) & 3) << 4)) - 32;
        w[128 * h + 64 + l] = ((lo >> 4) | (((hi >> 4) & 3) << 4)) - 32;
        w[128 * h + 96 + l] = ((lo2 >> 4) | (((hi >> 6) & 3) << 4)) - 32;
      }
    }
    for (int g = 0; g < 16; ++g) {
      const int64_t b = 8 * s + g / 2;
      const double scale = static_cast<double>(fp16_to_f32(d_bits)) * scales[g] * d[b];
      int64_t sum = 0, sum_abs = 0;
      for (int i = 16 * g; i < 16 * g + 16; ++i) {
        const int product = w[i] * q[256 * s + i];
        sum += product;
        sum_abs += std::abs(product);
      }
      r.value += scale * static_cast<double>(sum);
      r.magnitude += std::fabs(scale) * static_cast<double>(sum_abs);
    }
  }
  return r;
}

inline Q8InputReference q8_input_reference(GgmlType type, const uint8_t* row, const int8_t* q, const float* d,
                                           int64_t num_blocks) {
  if (type == GgmlType::Q4_K) return q4_k_q8_input_reference(row, q, d, num_blocks);
  if (type == GgmlType::Q6_K) return q6_k_q8_input_reference(row, q, d, num_blocks);
  const size_t block_bytes = type == GgmlType::Q4_0 ? 18 : 34;
  Q8InputReference r;
  for (int64_t b = 0; b < num_blocks; ++b) {
    const uint8_t* block = row + static_cast<size_t>(b) * block_bytes;
    uint16_t d_bits;
    std::memcpy(&d_bits, block, 2);
    const double scale = static_cast<double>(fp16_to_f32(d_bits)) * d[b];
    int64_t sum = 0, sum_abs = 0;
    for (int j = 0; j < 32; ++j) {
      const int w = type == GgmlType::Q4_0 ? (j < 16 ? (block[2 + j] & 15) : (block[2 + j - 16] >> 4)) - 8
                                           : static_cast<int8_t>(block[2 + j]);
      const int product = w * q[32 * b + j];
      sum += product;
      sum_abs += std::abs(product);
    }
    r.value += scale * static_cast<double>(sum);
    r.magnitude += std::fabs(scale) * static_cast<double>(sum_abs);
  }
  return r;
}

// The first of n tokens' outputs y[t][o] (every row_step-th row) that misses the reference
// (bias[o] when given, plus q8_input_reference of GGUF row o) by more than the rounding of its
// f32 sums; empty when none does. `what` names the product in the message.
inline QString q8_product_mismatch(GgmlType type, const uint8_t* gguf_rows, int64_t in_features, int64_t out_features,
                                   const int8_t* q, const float* d, int64_t n, const float* y, const float* bias,
                                   int64_t row_step, const QString& what) {
  const int64_t blocks = in_features / 32;
  const size_t row_bytes = *ggml_row_bytes(type, in_features);
  for (int64_t t = 0; t < n; ++t) {
    for (int64_t o = 0; o < out_features; o += row_step) {
      const Q8InputReference ref = q8_input_reference(type, gguf_rows + static_cast<size_t>(o) * row_bytes,
                                                      q + t * in_features, d + t * blocks, blocks);
      const double expected = (bias != nullptr ? bias[o] : 0.0) + ref.value;
      const float got = y[t * out_features + o];
      if (!(std::fabs(got - expected) <= 1e-5 * ref.magnitude + 1e-6 * std::fabs(expected))) {
        return QStringLiteral("%1 in=%2 n=%3: y[%4][%5] = %6, reference %7")
            .arg(what)
            .arg(in_features)
            .arg(n)
            .arg(t)
            .arg(o)
            .arg(got, 0, 'g', 9)
            .arg(expected, 0, 'g', 9);
      }
    }
  }
  return {};
}

}  // namespace iwb::test
