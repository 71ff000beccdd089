// Device pieces of the quantized KV cache (layout and rotation in paged_attention.h and
// kernels/src/paged_attention_quant.h): a warp's Walsh-Hadamard rotation of a row in shared
// memory, ggml's reference quantizers of one 32-value block and FP8 E4M3 conversions, written to
// round exactly as the CPU writer does, and the expansion of 16 cached values for attention.
#pragma once

#include "cuda_common.cuh"
#include "iwb/kernels/ggml_type.h"
#include "iwb/kernels/quant_blocks.h"

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace iwb::cuda_detail {

// Runtime codes of the cache types in kernel parameters (one kernel serves every pair of types).
enum KvCode : int { kKvF16 = 0, kKvQ8_0, kKvQ5_1, kKvQ5_0, kKvQ4_1, kKvQ4_0, kKvF8 };

inline KvCode kv_code(GgmlType type) {
  switch (type) {
    case GgmlType::Q8_0: return kKvQ8_0;
    case GgmlType::Q5_1: return kKvQ5_1;
    case GgmlType::Q5_0: return kKvQ5_0;
    case GgmlType::Q4_1: return kKvQ4_1;
    case GgmlType::Q4_0: return kKvQ4_0;
    case GgmlType::F8_E4M3: return kKvF8;
    default: return kKvF16;
  }
}

// uint16 units of one 32-value block of a block type.
__host__ __device__ inline int kv_block_units(int code) {
  switch (code) {
    case kKvQ8_0: return 17;
    case kKvQ5_1: return 12;
    case kKvQ5_0: return 11;
    case kKvQ4_1: return 10;
    default: return 9;  // Q4_0
  }
}

// x[0 .. n) <- H x in pieces of `size` (a power of two dividing n), by the warp that owns x (all
// 32 lanes call it). The butterflies of each stage are the CPU's (hadamard_rotate), in any
// order, then the multiply by `norm` = 1 / sqrt(size) computed on the host as the CPU does, so
// the rotated row is bit for bit the CPU's.
__device__ inline void warp_hadamard(float* x, int n, int size, float norm, int lane) {
  for (int h = 1; h < size; h *= 2) {
    for (int i = lane; i < n / 2; i += 32) {
      const int piece = i / (size / 2), k = i % (size / 2);
      const int j = piece * size + (k / h) * 2 * h + k % h;
      const float a = x[j], b = x[j + h];
      x[j] = a + b;
      x[j + h] = a - b;
    }
    __syncwarp();
  }
  for (int i = lane; i < n; i += 32) x[i] *= norm;
  __syncwarp();
}

// f32 -> E4M3 ("FN": no infinities, 448 at most), round to nearest even, saturating: the CPU's
// f32_to_e4m3 step for step (frexp, then rint of the 3-bit mantissa).
__device__ inline uint8_t f32_to_e4m3_device(float x) {
  const uint8_t sign = __float_as_uint(x) >> 31 ? 0x80 : 0;
  const float a = fminf(fabsf(x), 448.0f);
  if (!(a >= 0.0f)) return static_cast<uint8_t>(0x7E | sign);
  if (a < 0.015625f) return static_cast<uint8_t>(sign | static_cast<int>(rintf(ldexpf(a, 9))));
  int e2 = 0;
  const float f = frexpf(a, &e2);
  int m = static_cast<int>(rintf((f * 2.0f - 1.0f) * 8.0f));
  int e = e2 - 1 + 7;
  if (m == 8) m = 0, ++e;
  const int code = min((e << 3) | m, 0x7E);
  return static_cast<uint8_t>(sign | code);
}

// E4M3 -> f32 (0x7F / 0xFF, never written, read as 448 like the CPU's table).
__device__ inline float e4m3_to_f32_device(uint8_t b) {
  const int e = (b >> 3) & 15, m = b & 7;
  float magnitude = e == 0 ? ldexpf(static_cast<float>(m), -9) : ldexpf(1.0f + static_cast<float>(m) / 8.0f, e - 7);
  if ((b & 0x7F) == 0x7F) magnitude = 448.0f;
  return b & 0x80 ? -magnitude : magnitude;
}

// 1 / d as the CPU's inverse_or_zero: 0 for d = 0 or an f32 subnormal d whose inverse overflows.
__device__ inline float inverse_or_zero_device(float d) {
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  return fabsf(id) <= 3.402823466e+38f ? id : 0.0f;  // not inf
}

// ggml's quantize_row_*_ref of one block of 32 values x into `dst` (the block's uint16 units),
// one thread. Products are __fmul_rn so nvcc cannot fuse them with the following add (the CPU
// rounds the product first); quotients are IEEE divisions as on the CPU.
__device__ inline void quantize_block_ref(int code, const float* x, uint16_t* dst) {
  auto* bytes = reinterpret_cast<uint8_t*>(dst);
  // The f16 fields (d, and m) sit at byte 0 or 2 of the 2-byte aligned block: one 16-bit store
  // each. Not two byte stores: for `st.global.u8` of a `cvt.rn.f16.f32` result ptxas 13.0 emits
  // F2I.U8.F16 (sm_90 SASS), converting the half's value (a scale of ~0.06: 0) instead of
  // storing its low byte; an H100 then wrote every block's scale with its low 8 bits zero.
  auto put_half = [&](int offset, float value) { dst[offset / 2] = __half_as_ushort(__float2half_rn(value)); };
  if (code == kKvQ8_0) {
    float amax = 0.0f;
    for (int j = 0; j < 32; ++j) amax = fmaxf(amax, fabsf(x[j]));
    const float d = amax / 127.0f;
    const float id = inverse_or_zero_device(d);
    put_half(0, d);
    for (int j = 0; j < 32; ++j) bytes[2 + j] = static_cast<uint8_t>(static_cast<int8_t>(roundf(__fmul_rn(x[j], id))));
    return;
  }
  const bool is_symmetric = code == kKvQ5_0 || code == kKvQ4_0;
  const bool is_5bit = code == kKvQ5_0 || code == kKvQ5_1;
  uint8_t levels[32];
  if (is_symmetric) {
    float amax = 0.0f, max = 0.0f;  // the signed value of largest magnitude, the first on ties
    for (int j = 0; j < 32; ++j) {
      if (amax < fabsf(x[j])) {
        amax = fabsf(x[j]);
        max = x[j];
      }
    }
    const float d = max / (is_5bit ? -16.0f : -8.0f);
    const float id = inverse_or_zero_device(d);
    put_half(0, d);
    const float offset = is_5bit ? 16.5f : 8.5f;
    const int top = is_5bit ? 31 : 15;
    for (int j = 0; j < 32; ++j)
      levels[j] = static_cast<uint8_t>(min(top, static_cast<int>(__fmul_rn(x[j], id) + offset)));
  } else {
    float lo = 3.402823466e+38f, hi = -3.402823466e+38f;
    for (int j = 0; j < 32; ++j) {
      if (x[j] < lo) lo = x[j];
      if (x[j] > hi) hi = x[j];
    }
    const float d = (hi - lo) / (is_5bit ? 31.0f : 15.0f);
    const float id = inverse_or_zero_device(d);
    put_half(0, d);
    put_half(2, lo);
    for (int j = 0; j < 32; ++j) {
      const int q = static_cast<int>(__fmul_rn(x[j] - lo, id) + 0.5f);
      levels[j] = static_cast<uint8_t>(is_5bit ? q : min(15, q));  // ggml clamps Q4_1 only
    }
  }
  const int header = is_symmetric ? 2 : 4;  // d, or d and m
  uint8_t* qs = bytes + header + (is_5bit ? 4 : 0);
  uint32_t high_bits = 0;
  for (int j = 0; j < 16; ++j) {
    qs[j] = static_cast<uint8_t>((levels[j] & 0x0F) | ((levels[j + 16] & 0x0F) << 4));
    high_bits |= static_cast<uint32_t>((levels[j] >> 4) & 1) << j;
    high_bits |= static_cast<uint32_t>((levels[j + 16] >> 4) & 1) << (j + 16);
  }
  if (is_5bit) {
    for (int b = 0; b < 4; ++b) bytes[header + b] = static_cast<uint8_t>(high_bits >> (8 * b));
  }
}

// Values 16 * piece .. 16 * piece + 15 of one head row of a `code` cache at `head` (uint16
// units), as f32; FP8 values times fp8_scale. Blocks are 2-byte aligned: 2-byte loads only.
__device__ inline void expand_kv_piece(int code, const uint16_t* head, int piece, float fp8_scale, float* out) {
  if (code == kKvF16) {
    for (int u = 0; u < 16; ++u) out[u] = __half2float(__ushort_as_half(head[piece * 16 + u]));
    return;
  }
  if (code == kKvF8) {
    const uint16_t* pairs = head + piece * 8;
    for (int u = 0; u < 8; ++u) {
      out[2 * u] = e4m3_to_f32_device(static_cast<uint8_t>(pairs[u] & 0xFF)) * fp8_scale;
      out[2 * u + 1] = e4m3_to_f32_device(static_cast<uint8_t>(pairs[u] >> 8)) * fp8_scale;
    }
    return;
  }
  const uint16_t* block = head + (piece / 2) * kv_block_units(code);
  const int half = piece % 2;  // 0: values 0..15 of the block, 1: values 16..31
  const float d = __half2float(__ushort_as_half(block[0]));
  if (code == kKvQ8_0) {
    const uint16_t* qs = block + 1 + half * 8;  // int8 pairs, low byte first
    for (int u = 0; u < 8; ++u) {
      out[2 * u] = d * static_cast<float>(static_cast<int8_t>(qs[u] & 0xFF));
      out[2 * u + 1] = d * static_cast<float>(static_cast<int8_t>(qs[u] >> 8));
    }
    return;
  }
  const bool has_min = code == kKvQ5_1 || code == kKvQ4_1;
  const bool is_5bit = code == kKvQ5_0 || code == kKvQ5_1;
  const float m = has_min ? __half2float(__ushort_as_half(block[1])) : 0.0f;
  const int header_units = has_min ? 2 : 1;
  uint32_t qh = 0;
  if (is_5bit) qh = static_cast<uint32_t>(block[header_units]) | (static_cast<uint32_t>(block[header_units + 1]) << 16);
  const uint16_t* qs = block + header_units + (is_5bit ? 2 : 0);  // 16 bytes: value j low nibble, j + 16 high
  const int zero = has_min ? 0 : (is_5bit ? 16 : 8);
  for (int u = 0; u < 8; ++u) {
    for (int b = 0; b < 2; ++b) {
      const int j = 2 * u + b;  // byte j of qs holds values j and j + 16
      const uint8_t byte = static_cast<uint8_t>(b == 0 ? qs[u] & 0xFF : qs[u] >> 8);
      int level = half == 0 ? byte & 0x0F : byte >> 4;
      if (is_5bit) level |= static_cast<int>((qh >> (j + 16 * half)) & 1) << 4;
      out[j] = d * static_cast<float>(level - zero) + m;
    }
  }
}

}  // namespace iwb::cuda_detail
