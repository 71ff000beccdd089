// Reference dequantization of ggml's K-quants: 256-element super-blocks whose sub-block
// scales are themselves quantized (Q2_K, Q3_K, Q4_K, Q5_K, Q6_K). Loops follow the storage
// order of each layout (documented in quant_blocks.h) rather than the output order.
#include "dequantize_rows.h"

#include "iwb/kernels/dequantize.h"

namespace iwb::detail {
namespace {

// The 16 signed 6-bit scales of a Q3_K block (stored with a +32 bias). Scale i has its low
// nibble in byte i % 8 (low nibble for i < 8, high for i >= 8) and its top two bits in byte
// 8 + i % 4 at bit 2 * (i / 4).
void unpack_q3_k_scales(const uint8_t packed[12], int scales[16]) {
  for (int i = 0; i < 16; ++i) {
    const int low = (packed[i % 8] >> (4 * (i / 8))) & 0x0F;
    const int high = (packed[8 + i % 4] >> (2 * (i / 4))) & 0x03;
    scales[i] = (low | (high << 4)) - 32;
  }
}

}  // namespace

void dequantize_q2_k(const BlockQ2_K* src, float* dst, int64_t num_blocks) {
  for (int64_t b = 0; b < num_blocks; ++b) {
    const BlockQ2_K& block = src[b];
    const float d = fp16_to_f32(block.d);
    const float dmin = fp16_to_f32(block.dmin);
    float* out = dst + b * kQK_K;
    // Element e: half h = e / 128, bit pair p = (e % 128) / 32, byte l = e % 32.
    for (int e = 0; e < kQK_K; ++e) {
      const int half = e / 128, pair = (e % 128) / 32, l = e % 32;
      const int q = (block.qs[half * 32 + l] >> (2 * pair)) & 0x03;
      const uint8_t sm = block.scales[e / 16];
      const float scale = d * static_cast<float>(sm & 0x0F);
      const float min = dmin * static_cast<float>(sm >> 4);
      out[e] = scale * static_cast<float>(q) - min;
    }
  }
}

void dequantize_q3_k(const BlockQ3_K* src, float* dst, int64_t num_blocks) {
  for (int64_t b = 0; b < num_blocks; ++b) {
    const BlockQ3_K& block = src[b];
    const float d = fp16_to_f32(block.d);
    int scales[16];
    unpack_q3_k_scales(block.scales, scales);
    float* out = dst + b * kQK_K;
    for (int e = 0; e < kQK_K; ++e) {
      const int half = e / 128, pair = (e % 128) / 32, l = e % 32;
      const int low = (block.qs[half * 32 + l] >> (2 * pair)) & 0x03;
      // A clear hmask bit means the quant is negative: the stored range 0..7 maps to -4..3.
      const bool is_high_set = (block.hmask[l] >> (e / 32)) & 1;
      const int q = low - (is_high_set ? 0 : 4);
      out[e] = d * static_cast<float>(scales[e / 16]) * static_cast<float>(q);
    }
  }
}

void dequantize_q4_k(const BlockQ4_K* src, float* dst, int64_t num_blocks) {
  for (int64_t b = 0; b < num_blocks; ++b) {
    const BlockQ4_K& block = src[b];
    const float d = fp16_to_f32(block.d);
    const float dmin = fp16_to_f32(block.dmin);
    float* out = dst + b * kQK_K;
    // 4 chunks of 64: 32 bytes whose low nibbles are sub-block 2c, high nibbles 2c+1.
    for (int chunk = 0; chunk < 4; ++chunk) {
      uint8_t sc_lo, m_lo, sc_hi, m_hi;
      unpack_scale_min_k4(2 * chunk, block.scales, &sc_lo, &m_lo);
      unpack_scale_min_k4(2 * chunk + 1, block.scales, &sc_hi, &m_hi);
      const float scale_lo = d * sc_lo, min_lo = dmin * m_lo;
      const float scale_hi = d * sc_hi, min_hi = dmin * m_hi;
      const uint8_t* qs = block.qs + chunk * 32;
      float* y = out + chunk * 64;
      for (int l = 0; l < 32; ++l) {
        y[l] = scale_lo * static_cast<float>(qs[l] & 0x0F) - min_lo;
        y[l + 32] = scale_hi * static_cast<float>(qs[l] >> 4) - min_hi;
      }
    }
  }
}

void dequantize_q5_k(const BlockQ5_K* src, float* dst, int64_t num_blocks) {
  for (int64_t b = 0; b < num_blocks; ++b) {
    const BlockQ5_K& block = src[b];
    const float d = fp16_to_f32(block.d);
    const float dmin = fp16_to_f32(block.dmin);
    float* out = dst + b * kQK_K;
    for (int chunk = 0; chunk < 4; ++chunk) {
      uint8_t sc_lo, m_lo, sc_hi, m_hi;
      unpack_scale_min_k4(2 * chunk, block.scales, &sc_lo, &m_lo);
      unpack_scale_min_k4(2 * chunk + 1, block.scales, &sc_hi, &m_hi);
      const float scale_lo = d * sc_lo, min_lo = dmin * m_lo;
      const float scale_hi = d * sc_hi, min_hi = dmin * m_hi;
      const uint8_t* qs = block.qs + chunk * 32;
      float* y = out + chunk * 64;
      for (int l = 0; l < 32; ++l) {
        const int high_lo = ((block.qh[l] >> (2 * chunk)) & 1) << 4;
        const int high_hi = ((block.qh[l] >> (2 * chunk + 1)) & 1) << 4;
        y[l] = scale_lo * static_cast<float>((qs[l] & 0x0F) | high_lo) - min_lo;
        y[l + 32] = scale_hi * static_cast<float>((qs[l] >> 4) | high_hi) - min_hi;
      }
    }
  }
}

void dequantize_q6_k(const BlockQ6_K* src, float* dst, int64_t num_blocks) {
  for (int64_t b = 0; b < num_blocks; ++b) {
    const BlockQ6_K& block = src[b];
    const float d = fp16_to_f32(block.d);
    float* out = dst + b * kQK_K;
    for (int half = 0; half < 2; ++half) {
      const uint8_t* ql = block.ql + half * 64;
      const uint8_t* qh = block.qh + half * 32;
      const int8_t* sc = block.scales + half * 8;
      float* y = out + half * 128;
      for (int l = 0; l < 32; ++l) {
        const int s = l / 16;  // which 16-element sub-block within each 32
        const int q0 = ((ql[l] & 0x0F) | (((qh[l] >> 0) & 3) << 4)) - 32;
        const int q1 = ((ql[l + 32] & 0x0F) | (((qh[l] >> 2) & 3) << 4)) - 32;
        const int q2 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
        const int q3 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
        y[l] = d * static_cast<float>(sc[s]) * static_cast<float>(q0);
        y[l + 32] = d * static_cast<float>(sc[s + 2]) * static_cast<float>(q1);
        y[l + 64] = d * static_cast<float>(sc[s + 4]) * static_cast<float>(q2);
        y[l + 96] = d * static_cast<float>(sc[s + 6]) * static_cast<float>(q3);
      }
    }
  }
}

}  // namespace iwb::detail
