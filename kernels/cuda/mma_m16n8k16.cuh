// Warp-level tensor-core products with documented register layouts: D = A B + C with A 16x16
// f16 (row-major), B 16x8 f16 and C, D 16x8 f32 (PTX's mma.sync.aligned.m16n8k16.row.col.f32.
// f16.f16.f32, sm_80 and later), and its int8 sibling m16n8k32 (s8 in, s32 out).
// Unlike WMMA's opaque fragments, this instruction's register layout is documented, so a kernel
// can run a softmax on the accumulators in registers and feed them back as the next A operand
// without a round trip through shared memory (paged_attention_mma.cu).
//
// Layout (lane = 4 * group + quad, group 0..7, quad 0..3; "pair" = two f16 in one 32-bit
// register, the lower-indexed element in the low half):
//   a[0]: row group,     columns 2 quad, 2 quad + 1      a[1]: row group + 8, the same columns
//   a[2]: row group,     columns 2 quad + 8, + 9         a[3]: row group + 8, columns 2 quad + 8, + 9
//   b[0]: rows (k) 2 quad, 2 quad + 1 of column group    b[1]: rows 2 quad + 8, + 9 of column group
//   c[0], c[1]: row group, columns 2 quad, 2 quad + 1    c[2], c[3]: row group + 8, the same columns
// Under IWB_CUDA_EMULATION the lanes gather the fragments and each computes its four outputs, so
// the host tests check a kernel's use of this layout.
#pragma once

#include "cuda_common.cuh"

#include <cuda_fp16.h>

#include <cstdint>

namespace iwb::cuda_detail {

// Two floats rounded to f16 as one register pair (lo in the low half).
__device__ __forceinline__ uint32_t pack_half2(float lo, float hi) {
  return static_cast<uint32_t>(__half_as_ushort(__float2half_rn(lo))) |
         (static_cast<uint32_t>(__half_as_ushort(__float2half_rn(hi))) << 16);
}

// Two f16 values given as bits, as one register pair.
__device__ __forceinline__ uint32_t pair_of_bits(uint16_t lo, uint16_t hi) {
  return static_cast<uint32_t>(lo) | (static_cast<uint32_t>(hi) << 16);
}

#if defined(IWB_CUDA_EMULATION)
namespace mma_emulation {
inline float pair_element(uint64_t word, int index) {  // index 0..3 over two packed registers
  const auto bits = static_cast<unsigned short>(word >> (16 * index));
  return __half2float(__ushort_as_half(bits));
}
}  // namespace mma_emulation

inline void mma_m16n8k16(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
  uint64_t a01[32], a23[32], b01[32];
  iwb_emulation::warp_gather(a[0] | (static_cast<uint64_t>(a[1]) << 32), a01);
  iwb_emulation::warp_gather(a[2] | (static_cast<uint64_t>(a[3]) << 32), a23);
  iwb_emulation::warp_gather(b[0] | (static_cast<uint64_t>(b[1]) << 32), b01);
  float A[16][16], B[16][8];
  for (int lane = 0; lane < 32; ++lane) {
    const int group = lane / 4, quad = lane % 4;
    for (int e = 0; e < 2; ++e) {
      A[group][2 * quad + e] = mma_emulation::pair_element(a01[lane], e);
      A[group + 8][2 * quad + e] = mma_emulation::pair_element(a01[lane], 2 + e);
      A[group][2 * quad + 8 + e] = mma_emulation::pair_element(a23[lane], e);
      A[group + 8][2 * quad + 8 + e] = mma_emulation::pair_element(a23[lane], 2 + e);
      B[2 * quad + e][group] = mma_emulation::pair_element(b01[lane], e);
      B[2 * quad + 8 + e][group] = mma_emulation::pair_element(b01[lane], 2 + e);
    }
  }
  const int lane = static_cast<int>(threadIdx.x % 32), group = lane / 4, quad = lane % 4;
  for (int i = 0; i < 4; ++i) {
    const int row = group + (i >= 2 ? 8 : 0), col = 2 * quad + (i & 1);
    float sum = d[i];
    for (int k = 0; k < 16; ++k) sum += A[row][k] * B[k][col];
    d[i] = sum;
  }
}

// D = A B + C for A 16x32 s8 (row-major), B 32x8 s8, C and D 16x8 s32: mma.sync...m16n8k32.s32.s8.s8.s32.
//   a[0]: row group, k 4 quad .. 4 quad + 3 (one byte each, the lowest first)   a[1]: row group + 8, the same k
//   a[2]: row group, k 16 + 4 quad .. + 3                                      a[3]: row group + 8, the same k
//   b[0]: k 4 quad .. 4 quad + 3 of column group                               b[1]: k 16 + 4 quad .. + 3
//   c as for m16n8k16 (int32).
inline void mma_m16n8k32_s8(int (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
  uint64_t a01[32], a23[32], b01[32];
  iwb_emulation::warp_gather(a[0] | (static_cast<uint64_t>(a[1]) << 32), a01);
  iwb_emulation::warp_gather(a[2] | (static_cast<uint64_t>(a[3]) << 32), a23);
  iwb_emulation::warp_gather(b[0] | (static_cast<uint64_t>(b[1]) << 32), b01);
  int A[16][32], B[32][8];
  auto byte_of = [](uint64_t word, int index) { return static_cast<int>(static_cast<int8_t>(word >> (8 * index))); };
  for (int lane = 0; lane < 32; ++lane) {
    const int group = lane / 4, quad = lane % 4;
    for (int e = 0; e < 4; ++e) {
      A[group][4 * quad + e] = byte_of(a01[lane], e);
      A[group + 8][4 * quad + e] = byte_of(a01[lane], 4 + e);
      A[group][16 + 4 * quad + e] = byte_of(a23[lane], e);
      A[group + 8][16 + 4 * quad + e] = byte_of(a23[lane], 4 + e);
      B[4 * quad + e][group] = byte_of(b01[lane], e);
      B[16 + 4 * quad + e][group] = byte_of(b01[lane], 4 + e);
    }
  }
  const int lane = static_cast<int>(threadIdx.x % 32), group = lane / 4, quad = lane % 4;
  for (int i = 0; i < 4; ++i) {
    const int row = group + (i >= 2 ? 8 : 0), col = 2 * quad + (i & 1);
    int sum = d[i];
    for (int k = 0; k < 32; ++k) sum += A[row][k] * B[k][col];
    d[i] = sum;
  }
}
#else
__device__ __forceinline__ void mma_m16n8k32_s8(int (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
  asm("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

__device__ __forceinline__ void mma_m16n8k16(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
#endif

}  // namespace iwb::cuda_detail
