// Reference dequantization of the plain half types and ggml's 32-element block formats
// (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, MXFP4). Scalar on purpose: every fast path is tested against this.
#include "dequantize_rows.h"

#include "iwb/kernels/dequantize.h"

namespace iwb::detail {
namespace {

// The 32 fifth bits of a Q5 block; read byte-wise because the field is not 4-byte aligned.
uint32_t load_qh(const uint8_t qh[4]) {
  return static_cast<uint32_t>(qh[0]) | (static_cast<uint32_t>(qh[1]) << 8) |
         (static_cast<uint32_t>(qh[2]) << 16) | (static_cast<uint32_t>(qh[3]) << 24);
}

}  // namespace

void dequantize_f16(const uint16_t* src, float* dst, int64_t num_elements) {
  for (int64_t i = 0; i < num_elements; ++i) dst[i] = fp16_to_f32(src[i]);
}

void dequantize_bf16(const uint16_t* src, float* dst, int64_t num_elements) {
  for (int64_t i = 0; i < num_elements; ++i) dst[i] = bf16_to_f32(src[i]);
}

void dequantize_q4_0(const BlockQ4_0* src, float* dst, int64_t num_blocks) {
  constexpr int kHalf = kQK4_0 / 2;
  for (int64_t b = 0; b < num_blocks; ++b) {
    const BlockQ4_0& block = src[b];
    const float d = fp16_to_f32(block.d);
    float* out = dst + b * kQK4_0;
    for (int j = 0; j < kHalf; ++j) {
      out[j] = static_cast<float>((block.qs[j] & 0x0F) - 8) * d;
      out[j + kHalf] = static_cast<float>((block.qs[j] >> 4) - 8) * d;
    }
  }
}

void dequantize_q4_1(const BlockQ4_1* src, float* dst, int64_t num_blocks) {
  constexpr int kHalf = kQK4_1 / 2;
  for (int64_t b = 0; b < num_blocks; ++b) {
    const BlockQ4_1& block = src[b];
    const float d = fp16_to_f32(block.d);
    const float m = fp16_to_f32(block.m);
    float* out = dst + b * kQK4_1;
    for (int j = 0; j < kHalf; ++j) {
      out[j] = static_cast<float>(block.qs[j] & 0x0F) * d + m;
      out[j + kHalf] = static_cast<float>(block.qs[j] >> 4) * d + m;
    }
  }
}

void dequantize_q5_0(const BlockQ5_0* src, float* dst, int64_t num_blocks) {
  constexpr int kHalf = kQK5_0 / 2;
  for (int64_t b = 0; b < num_blocks; ++b) {
    const BlockQ5_0& block = src[b];
    const float d = fp16_to_f32(block.d);
    const uint32_t qh = load_qh(block.qh);
    float* out = dst + b * kQK5_0;
    for (int j = 0; j < kHalf; ++j) {
      const int high_lo = static_cast<int>((qh >> j) & 1u) << 4;
      const int high_hi = static_cast<int>((qh >> (j + kHalf)) & 1u) << 4;
      out[j] = static_cast<float>(((block.qs[j] & 0x0F) | high_lo) - 16) * d;
      out[j + kHalf] = static_cast<float>(((block.qs[j] >> 4) | high_hi) - 16) * d;
    }
  }
}

void dequantize_q5_1(const BlockQ5_1* src, float* dst, int64_t num_blocks) {
  constexpr int kHalf = kQK5_1 / 2;
  for (int64_t b = 0; b < num_blocks; ++b) {
    const BlockQ5_1& block = src[b];
    const float d = fp16_to_f32(block.d);
    const float m = fp16_to_f32(block.m);
    const uint32_t qh = load_qh(block.qh);
    float* out = dst + b * kQK5_1;
    for (int j = 0; j < kHalf; ++j) {
      const int high_lo = static_cast<int>((qh >> j) & 1u) << 4;
      const int high_hi = static_cast<int>((qh >> (j + kHalf)) & 1u) << 4;
      out[j] = static_cast<float>((block.qs[j] & 0x0F) | high_lo) * d + m;
      out[j + kHalf] = static_cast<float>((block.qs[j] >> 4) | high_hi) * d + m;
    }
  }
}

void dequantize_q8_0(const BlockQ8_0* src, float* dst, int64_t num_blocks) {
  for (int64_t b = 0; b < num_blocks; ++b) {
    const BlockQ8_0& block = src[b];
    const float d = fp16_to_f32(block.d);
    float* out = dst + b * kQK8_0;
    for (int j = 0; j < kQK8_0; ++j) out[j] = static_cast<float>(block.qs[j]) * d;
  }
}

// int8 value times a power of two: every product is exact, so this equals ggml's
// dequantize_row_mxfp4 bit for bit (tests/kernels/test_mxfp4.cpp checks it on ggml's output).
void dequantize_mxfp4(const BlockMxfp4* src, float* dst, int64_t num_blocks) {
  constexpr int kHalf = kQKMxfp4 / 2;
  for (int64_t b = 0; b < num_blocks; ++b) {
    const BlockMxfp4& block = src[b];
    const float d = e8m0_to_f32_half(block.e);
    float* out = dst + b * kQKMxfp4;
    for (int j = 0; j < kHalf; ++j) {
      out[j] = static_cast<float>(kMxfp4Values[block.qs[j] & 0x0F]) * d;
      out[j + kHalf] = static_cast<float>(kMxfp4Values[block.qs[j] >> 4]) * d;
    }
  }
}

}  // namespace iwb::detail
