// The reference of matvec_cuda's int8-activation path (MatvecCudaArgs::x_q8): one Q4_0 or Q8_0
// weight row against x quantized by quantize_x_q8_cuda, summed over each block's integers in
// int64 and scaled in double. Shared by the GPU test and its emulated twin.
#pragma once

#include "iwb/kernels/dequantize.h"
#include "iwb/kernels/ggml_type.h"

#include <QString>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>

namespace iwb::test {

struct Q8InputReference {
  double value = 0;      // sum over blocks of d_w * d_x * sum_j q_w q_x
  double magnitude = 0;  // the same with |.| of each block's products: the rounding's scale
};

inline Q8InputReference q8_input_reference(GgmlType type, const uint8_t* row, const int8_t* q, const float* d,
                                           int64_t num_blocks) {
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
