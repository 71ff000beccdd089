// On-disk block layouts of ggml's quantized types, shared by the reference (de)quantizers,
// the SIMD paths and the CUDA kernels. Half-precision fields are raw IEEE fp16 bit patterns.
#pragma once

#include <cstddef>
#include <cstdint>

// Helpers below are shared with the CUDA kernels, which compile this header with nvcc.
#if defined(__CUDACC__)
#define IWB_HOST_DEVICE __host__ __device__
#else
#define IWB_HOST_DEVICE
#endif

namespace iwb {

inline constexpr int kQK4_0 = 32;   // elements per Q4_0 block
inline constexpr int kQK4_1 = 32;
inline constexpr int kQK5_0 = 32;
inline constexpr int kQK5_1 = 32;
inline constexpr int kQK8_0 = 32;
inline constexpr int kQKMxfp4 = 32;
inline constexpr int kQK_K = 256;   // elements per K-quant super-block
inline constexpr int kKScaleSize = 12;  // bytes of packed 6-bit scales/mins in Q4_K/Q5_K

// x = d * (q - 8), q in 0..15. Element j in the low nibble of qs[j], element j+16 in the high.
struct BlockQ4_0 {
  uint16_t d;                // fp16 scale
  uint8_t qs[kQK4_0 / 2];    // 4-bit quants
};

// x = d * q + m, q in 0..15; nibble order as Q4_0.
struct BlockQ4_1 {
  uint16_t d;                // fp16 scale
  uint16_t m;                // fp16 minimum
  uint8_t qs[kQK4_1 / 2];
};

// x = d * (q - 16), q in 0..31; bit j of the little-endian u32 qh is bit 4 of element j.
struct BlockQ5_0 {
  uint16_t d;
  uint8_t qh[4];             // 5th bits (not a uint32_t: the block is only 2-byte aligned)
  uint8_t qs[kQK5_0 / 2];    // low 4 bits, nibble order as Q4_0
};

// x = d * q + m, q in 0..31; qh as Q5_0.
struct BlockQ5_1 {
  uint16_t d;
  uint16_t m;
  uint8_t qh[4];
  uint8_t qs[kQK5_1 / 2];
};

// x = d * q, q in -128..127 (the quantizer uses -127..127).
struct BlockQ8_0 {
  uint16_t d;
  int8_t qs[kQK8_0];
};

// MXFP4 (OCP microscaling, as gpt-oss ships its experts): x = 2^(e - 127) * fp4(q), q an E2M1
// code (sign, 2 exponent bits, 1 mantissa bit). ggml stores the E2M1 values doubled as int8
// (kMxfp4Values) and halves the scale instead (e8m0_to_f32_half), so x = kMxfp4Values[q] *
// e8m0_to_f32_half(e). Nibble order as Q4_0. One byte fields only: the block (17 bytes) and
// rows of an odd number of blocks have no alignment at all.
struct BlockMxfp4 {
  uint8_t e;                 // E8M0 shared exponent (255, NaN in the OCP format, is invalid)
  uint8_t qs[kQKMxfp4 / 2];  // 4-bit E2M1 codes
};

// 16 sub-blocks of 16. x = d * (scales[i] & 0xF) * q - dmin * (scales[i] >> 4), q in 0..3.
// qs packs 4 quants per byte: per 128-element half, byte l (0..31) holds elements l, l+32,
// l+64, l+96 of that half in bit pairs 0-1, 2-3, 4-5, 6-7.
struct BlockQ2_K {
  uint8_t scales[kQK_K / 16];  // 4-bit scale | 4-bit min << 4
  uint8_t qs[kQK_K / 4];
  uint16_t d;                  // fp16 scale of the scales
  uint16_t dmin;               // fp16 scale of the mins
};

// 16 sub-blocks of 16. x = d * (s_i - 32) * (q - 4 * !hbit), q low 2 bits as in Q2_K.
// The 16 6-bit scales: low nibbles in scales[0..7] (two per byte), high 2-bit pairs in
// scales[8..11]. hmask bit k of byte l is the high bit of element 32k + l.
struct BlockQ3_K {
  uint8_t hmask[kQK_K / 8];
  uint8_t qs[kQK_K / 4];
  uint8_t scales[12];
  uint16_t d;
};

// 8 sub-blocks of 32. x = d * sc_i * q - dmin * m_i, q in 0..15; sc/m are 6-bit, packed
// into 12 bytes (see unpack_scale_min_k4). Per 64 elements, 32 bytes of qs: low nibbles are
// the first 32 elements, high nibbles the next 32.
struct BlockQ4_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[kKScaleSize];
  uint8_t qs[kQK_K / 2];
};

// As Q4_K with a 5th bit: qh byte l bit 2c (resp. 2c+1) is the high bit of element
// 64c + l (resp. 64c + 32 + l).
struct BlockQ5_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[kKScaleSize];
  uint8_t qh[kQK_K / 8];
  uint8_t qs[kQK_K / 2];
};

// 16 sub-blocks of 16. x = d * scales[i] * (q - 32), q in 0..63 = 4 low bits (ql) | 2 high
// bits (qh) << 4. Per 128-element half: ql[l] low/high nibble -> elements l / l+64,
// ql[l+32] -> l+32 / l+96; qh[l] bit pairs 0,2,4,6 -> elements l, l+32, l+64, l+96.
struct BlockQ6_K {
  uint8_t ql[kQK_K / 2];
  uint8_t qh[kQK_K / 4];
  int8_t scales[kQK_K / 16];
  uint16_t d;
};

// Activation blocks for integer dot products (never stored in model files).
// Q8_1: as Q8_0 plus s = d * sum(qs), which folds the "+ m" term of Q4_1/Q5_1 weights into one
// multiply per block.
struct BlockQ8_1 {
  uint16_t d;                // fp16 scale
  uint16_t s;                // fp16 d * sum(qs)
  int8_t qs[kQK8_0];
};

// Q8_K: the partner of every K-quant weight block. x = d * q, q in -127..127; bsums[i] is the
// sum of qs[16i .. 16i+15], which the K-quant dot products use to apply their sub-block mins.
struct BlockQ8_K {
  float d;                   // f32 scale (activations need the range)
  int8_t qs[kQK_K];
  int16_t bsums[kQK_K / 16];
};

// Sizes and offsets must match the GGUF type table (ggml_type.cpp) byte for byte.
static_assert(sizeof(BlockQ8_1) == 36);
static_assert(sizeof(BlockQ8_K) == 292 && offsetof(BlockQ8_K, bsums) == 260);
static_assert(sizeof(BlockQ4_0) == 18 && alignof(BlockQ4_0) == 2);
static_assert(sizeof(BlockQ4_1) == 20);
static_assert(sizeof(BlockQ5_0) == 22 && offsetof(BlockQ5_0, qs) == 6);
static_assert(sizeof(BlockQ5_1) == 24 && offsetof(BlockQ5_1, qs) == 8);
static_assert(sizeof(BlockQ8_0) == 34);
static_assert(sizeof(BlockMxfp4) == 17 && alignof(BlockMxfp4) == 1);
static_assert(sizeof(BlockQ2_K) == 84 && offsetof(BlockQ2_K, d) == 80);
static_assert(sizeof(BlockQ3_K) == 110 && offsetof(BlockQ3_K, d) == 108);
static_assert(sizeof(BlockQ4_K) == 144 && offsetof(BlockQ4_K, qs) == 16);
static_assert(sizeof(BlockQ5_K) == 176 && offsetof(BlockQ5_K, qs) == 48);
static_assert(sizeof(BlockQ6_K) == 210 && offsetof(BlockQ6_K, d) == 208);

// The 6-bit scale and min of sub-block j (0..7) of a Q4_K/Q5_K block. Bytes 0-3 hold scales
// 0-3 in their low 6 bits, bytes 4-7 mins 0-3; bytes 8-11 hold the low nibbles of scale
// (low) and min (high) 4-7, whose top 2 bits ride in the spare top bits of bytes 0-7.
IWB_HOST_DEVICE inline void unpack_scale_min_k4(int j, const uint8_t* scales, uint8_t* scale, uint8_t* min) {
  if (j < 4) {
    *scale = scales[j] & 63;
    *min = scales[j + 4] & 63;
  } else {
    *scale = static_cast<uint8_t>((scales[j + 4] & 0x0F) | ((scales[j - 4] >> 6) << 4));
    *min = static_cast<uint8_t>((scales[j + 4] >> 4) | ((scales[j] >> 6) << 4));
  }
}

// The E2M1 values of the 16 MXFP4 codes, doubled (ggml's kvalues_mxfp4): 0, 0.5, 1, 1.5, 2, 3,
// 4, 6 and their negatives (code 8 is -0).
inline constexpr int8_t kMxfp4Values[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

// Half the E8M0 scale, 2^(e - 128), bit for bit as ggml's GGML_E8M0_TO_FP32_HALF: e = 0 and 1
// are the f32 subnormals 2^-128 and 2^-127; e = 255 gives 2^127 (ggml does not treat it as NaN).
IWB_HOST_DEVICE inline float e8m0_to_f32_half(uint8_t e) {
  const uint32_t bits = e < 2 ? 0x00200000u << e : static_cast<uint32_t>(e - 1) << 23;
#if defined(__CUDA_ARCH__)
  return __uint_as_float(bits);
#else
  float f;
  __builtin_memcpy(&f, &bits, sizeof f);
  return f;
#endif
}

}  // namespace iwb
