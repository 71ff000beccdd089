// Per-element decoding of GGUF blocks on the GPU (__device__ helpers shared by the dequantize,
// embedding and matrix-vector kernels): each decoder names its block type and turns element e
// of one block into a float, exactly as dequantize_row_ref does.
#pragma once

#include "iwb/kernels/quant_blocks.h"

#include <cuda_fp16.h>

#include <cstdint>

namespace iwb::cuda_detail {

__device__ inline float half_bits_to_float(uint16_t bits) { return __half2float(__ushort_as_half(bits)); }

struct DecodeF16 {
  using Block = uint16_t;
  static constexpr int kBlockSize = 1;
  __device__ static float decode(const Block& b, int) { return half_bits_to_float(b); }
};

struct DecodeBF16 {
  using Block = uint16_t;
  static constexpr int kBlockSize = 1;
  __device__ static float decode(const Block& b, int) { return __uint_as_float(static_cast<uint32_t>(b) << 16); }
};

struct DecodeQ8_0 {
  using Block = BlockQ8_0;
  static constexpr int kBlockSize = kQK8_0;
  __device__ static float decode(const Block& b, int e) {
    return static_cast<float>(b.qs[e]) * half_bits_to_float(b.d);
  }
};

struct DecodeQ4_0 {
  using Block = BlockQ4_0;
  static constexpr int kBlockSize = kQK4_0;
  __device__ static float decode(const Block& b, int e) {
    const uint8_t byte = b.qs[e % (kQK4_0 / 2)];
    const int q = e < kQK4_0 / 2 ? (byte & 0x0F) : (byte >> 4);
    return static_cast<float>(q - 8) * half_bits_to_float(b.d);
  }
};

struct DecodeQ4_K {
  using Block = BlockQ4_K;
  static constexpr int kBlockSize = kQK_K;
  // Chunk c of 64 elements uses qs[32c .. 32c+31]: low nibbles for its first 32, high for
  // the rest, with sub-block scale/min 2c and 2c+1.
  __device__ static float decode(const Block& b, int e) {
    const int chunk = e / 64, l = e % 32;
    const bool is_high = (e % 64) >= 32;
    uint8_t scale, min;
    unpack_scale_min_k4(2 * chunk + (is_high ? 1 : 0), b.scales, &scale, &min);
    const uint8_t byte = b.qs[chunk * 32 + l];
    const int q = is_high ? (byte >> 4) : (byte & 0x0F);
    return half_bits_to_float(b.d) * scale * static_cast<float>(q) - half_bits_to_float(b.dmin) * min;
  }
};

struct DecodeQ6_K {
  using Block = BlockQ6_K;
  static constexpr int kBlockSize = kQK_K;
  // Within a 128-element half, quarter k (32 elements) takes ql[l + 32 * (k & 1)] (low
  // nibble for k < 2, high for k >= 2) and bit pair k of qh[l].
  __device__ static float decode(const Block& b, int e) {
    const int half = e / 128, quarter = (e % 128) / 32, l = e % 32;
    const uint8_t low_byte = b.ql[half * 64 + (quarter & 1) * 32 + l];
    const int low = quarter < 2 ? (low_byte & 0x0F) : (low_byte >> 4);
    const int high = (b.qh[half * 32 + l] >> (2 * quarter)) & 0x03;
    const int scale = b.scales[half * 8 + l / 16 + 2 * quarter];
    return half_bits_to_float(b.d) * static_cast<float>(scale) * static_cast<float>((low | (high << 4)) - 32);
  }
};

struct DecodeF32 {
  using Block = float;
  static constexpr int kBlockSize = 1;
  __device__ static float decode(const Block& b, int) { return b; }
};

// Q4_1/Q5_0/Q5_1/Q5_K (added for dequantize_rows_f16_cuda). Q5 fifth bits: bit j of the
// little-endian qh word is bit 4 of element j; Q5_K: bit 2c (+1 for the high 32) of qh[l].
struct DecodeQ4_1 {
  using Block = BlockQ4_1;
  static constexpr int kBlockSize = kQK4_1;
  __device__ static float decode(const Block& b, int e) {
    const uint8_t byte = b.qs[e % (kQK4_1 / 2)];
    const int q = e < kQK4_1 / 2 ? (byte & 0x0F) : (byte >> 4);
    return static_cast<float>(q) * half_bits_to_float(b.d) + half_bits_to_float(b.m);
  }
};

template <typename QBlock>
__device__ inline int q5_value(const QBlock& b, int e) {
  const uint8_t byte = b.qs[e % 16];
  const int low = e < 16 ? (byte & 0x0F) : (byte >> 4);
  return low | (((b.qh[e / 8] >> (e % 8)) & 1) << 4);
}

struct DecodeQ5_0 {
  using Block = BlockQ5_0;
  static constexpr int kBlockSize = kQK5_0;
  __device__ static float decode(const Block& b, int e) {
    return static_cast<float>(q5_value(b, e) - 16) * half_bits_to_float(b.d);
  }
};

struct DecodeQ5_1 {
  using Block = BlockQ5_1;
  static constexpr int kBlockSize = kQK5_1;
  __device__ static float decode(const Block& b, int e) {
    return static_cast<float>(q5_value(b, e)) * half_bits_to_float(b.d) + half_bits_to_float(b.m);
  }
};

struct DecodeQ5_K {
  using Block = BlockQ5_K;
  static constexpr int kBlockSize = kQK_K;
  __device__ static float decode(const Block& b, int e) {
    const int chunk = e / 64, l = e % 32;
    const int sub = 2 * chunk + ((e % 64) >= 32 ? 1 : 0);
    uint8_t scale, min;
    unpack_scale_min_k4(sub, b.scales, &scale, &min);
    const uint8_t byte = b.qs[chunk * 32 + l];
    const int q = (sub & 1 ? (byte >> 4) : (byte & 0x0F)) | (((b.qh[l] >> sub) & 1) << 4);
    return half_bits_to_float(b.d) * scale * static_cast<float>(q) - half_bits_to_float(b.dmin) * min;
  }
};

}  // namespace iwb::cuda_detail
