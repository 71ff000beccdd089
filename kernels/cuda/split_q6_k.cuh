// Q6_K in the GPU's split layout (iwb/kernels/split_blocks.h, q6_k_split_offsets) on the device:
// the regions of a matrix, a 32-value unit's values as the eight dp4a words the products take,
// and one value as a float (the embedding gather, the f16 dequantization for cuBLAS).
#pragma once

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace iwb::cuda_detail {

// A split Q6_K matrix of `rows` rows: per 32-value unit (row after row, unit index row * units +
// u) 16 bytes of low nibbles, 8 bytes of high bit pairs and two int8 16-value scales; per
// 256-value super-block (index unit / 8) one f16 d.
struct SplitQ6KMatrix {
  const uint8_t* low;
  const uint8_t* high;
  const int8_t* scales;
  const unsigned short* d;
};

__device__ __forceinline__ SplitQ6KMatrix split_q6_k_matrix(const uint8_t* weight, int64_t rows, int64_t in_features) {
  const int64_t units = rows * (in_features / 32);
  return {weight, weight + 16 * units, reinterpret_cast<const int8_t*>(weight + 24 * units),
          reinterpret_cast<const unsigned short*>(weight + 26 * units)};
}

// A unit's 16 low-nibble bytes (byte j: value j low, value j + 16 high) and its high bit pairs
// (value 4k + b at bits 8b + 2 (k % 4) of word k / 4) to eight words, word k holding values
// 4k..4k+3 as bytes 0..63 (stored + 32), the layout of an int8 activation block's words.
__device__ __forceinline__ void q6_k_split_words(uint4 low, uint2 high, int (&w)[8]) {
  const uint32_t nibbles[4] = {low.x, low.y, low.z, low.w};
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    w[k] = static_cast<int>((nibbles[k] & 0x0F0F0F0Fu) | (((high.x >> (2 * k)) & 0x03030303u) << 4));
    w[4 + k] = static_cast<int>(((nibbles[k] >> 4) & 0x0F0F0F0Fu) | (((high.y >> (2 * k)) & 0x03030303u) << 4));
  }
}

// A value from its stored q (0..63), its 16-value scale and its super-block's d: d sc (q - 32),
// each product exact in f32 (an 11-bit d, an 8-bit scale, a 6-bit q), so it equals the CPU
// decoder's whatever the order.
__device__ __forceinline__ float q6_k_split_dequant(float d, int scale, int q) {
  return d * static_cast<float>(scale) * static_cast<float>(q - 32);
}

// Value j (0..31) of unit `unit`, alone (the embedding gather: a thread per value).
__device__ __forceinline__ float q6_k_split_value(const SplitQ6KMatrix& m, int64_t unit, int j) {
  const uint8_t byte = m.low[unit * 16 + (j & 15)];
  const int nibble = j < 16 ? byte & 15 : byte >> 4;
  const int k = j / 4, b = j % 4;
  const uint32_t word = reinterpret_cast<const uint32_t*>(m.high + unit * 8)[k / 4];
  const int q = nibble | static_cast<int>(((word >> (8 * b + 2 * (k % 4))) & 3u) << 4);
  return q6_k_split_dequant(__half2float(__ushort_as_half(m.d[unit / 8])), m.scales[unit * 2 + j / 16], q);
}

}  // namespace iwb::cuda_detail
