// Q4_K weights against int8 activations (MatvecCudaArgs::x_q8; 1-8 tokens, one matrix or an op's
// products in one launch), read straight from the GGUF layout with 16-byte loads: the default
// chat model's type. Its f32-decode kernel
// (matvec_quant.cuh's UnitK45) reached 612-830 GB/s on an H200 (session 31, llama-3-8b
// Q4_K_M: 17.6% of the bandwidth), bound by the decode's instructions like Q4_0's was before
// its int8 path.
//
// Why no shared-memory staging here: a Q4_K super-block is 144 bytes, a multiple of 16, so its
// 16-byte header (d, dmin, 12 bytes of scales) and its 128 quant bytes sit 16-byte aligned in
// every row (the rows are whole blocks). A thread takes one 16-byte piece of the quants; the 8
// pieces of a block are consecutive lanes, so a warp reads 4 blocks' quants as contiguous
// 128-byte runs (the header rides in the first piece's 32-byte sector).
//
// The arithmetic: sub-block j (32 values) has w = d sc_j q - dmin m_j, and the activations'
// 32-value blocks line up with the sub-blocks, x = dx_j xq. So the sub-block's share is
// dx_j (d sc_j sum(q xq) - dmin m_j sum(xq)), both sums in int32 through dp4a.
#pragma once

#include "iwb/kernels/cuda/matvec_plan.h"
#include "iwb/kernels/quant_blocks.h"
#include "matvec_parts.cuh"
#include "matvec_quant.cuh"

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace iwb::cuda_matvec {

// Quant bytes of a Q4_K block per thread, and the pieces a block splits into.
inline constexpr int kQ4KPieceBytes = 16;
inline constexpr int kQ4KPiecesPerBlock = static_cast<int>(sizeof(BlockQ4_K) - 16) / kQ4KPieceBytes;
static_assert(kMatvecQ4KWarpRows == kMatvecThreads / 32, "a warp a row");
static_assert(sizeof(BlockQ4_K) % 16 == 0, "16-byte loads need 16-byte aligned blocks");

// Byte k (0..3) of `word`.
__device__ __forceinline__ uint32_t byte_at(uint32_t word, int k) { return (word >> (8 * k)) & 0xFFu; }

// The 6-bit scales and mins of sub-blocks 2c and 2c + 1 (c = 0..3) from the header's scale words
// s0 = bytes 0-3, s1 = 4-7, s2 = 8-11, as unpack_scale_min_k4 computes them. Shifts and selects
// only: indexing a local byte array at run time would put it in local memory (the stack frame
// kernel_stack_frames guards against).
__device__ __forceinline__ void q4_k_scales(uint32_t s0, uint32_t s1, uint32_t s2, int c, float sc[2], float mn[2]) {
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int k = (2 * c + i) & 3;  // j for j < 4, j - 4 otherwise
    uint32_t scale, min;
    if (c < 2) {
      scale = byte_at(s0, k) & 63u;
      min = byte_at(s1, k) & 63u;
    } else {
      scale = (byte_at(s2, k) & 0x0Fu) | ((byte_at(s0, k) >> 6) << 4);
      min = (byte_at(s2, k) >> 4) | ((byte_at(s1, k) >> 6) << 4);
    }
    sc[i] = static_cast<float>(scale);
    mn[i] = static_cast<float>(min);
  }
}

// sum_i q[i] * x[i] over 16 int8 pairs (q: 16 values 0..15 as bytes), and sum_i x[i].
__device__ __forceinline__ void dot16(uint4 q, int4 x, int* dot, int* sum_x) {
  *dot = __dp4a(
      static_cast<int>(q.x), x.x,
      __dp4a(static_cast<int>(q.y), x.y, __dp4a(static_cast<int>(q.z), x.z, __dp4a(static_cast<int>(q.w), x.w, 0))));
  constexpr int kOnes = 0x01010101;
  *sum_x = __dp4a(kOnes, x.x, __dp4a(kOnes, x.y, __dp4a(kOnes, x.z, __dp4a(kOnes, x.w, 0))));
}

// kRows output rows per thread block (kMatvecThreads threads), kMatvecThreads / kRows threads a
// row: thread i of a row takes pieces i, i + that, ... (piece = 16 quant bytes = 16 values of
// sub-block 2c and the 16 at the same places of sub-block 2c + 1). kRows = 1 (a row's 128
// threads: rows of 4096 values are exactly 128 pieces, and even the 1,024-row k and v products
// keep 8 blocks an SM loading), summed through shared memory; kRows = 4 (a warp a row) for rows
// of at most kQ4KWarpRowMaxInputs values, whose 48-64 pieces (the default model's 1536, llama-3.2-1b's
// 2048) would leave half of 128 threads idle, summed by warp shuffles.
// kMaxTokens: 1, or up to 8 tokens (num_tokens at run time) sharing each weight load; token t's
// activations start at xq + t in_features and xd + t in_features / 32. A token's sums run in the
// same order whatever the other tokens, so its result does not depend on the batch.
// q4_k_q8_rows computes the rows of thread block `block_index` of this matrix's own grid.
template <int kMaxTokens, int kRows>
__device__ __forceinline__ void q4_k_q8_rows(const uint8_t* __restrict__ weight, int64_t row_bytes, int64_t in_features,
                                             int64_t out_features, int64_t block_index, const int8_t* __restrict__ xq,
                                             const float* __restrict__ xd, int num_tokens, float* __restrict__ y,
                                             const float* __restrict__ bias) {
  static_assert(kRows == 1 || kRows == kMatvecThreads / 32, "a row's threads: the whole block, or one warp");
  constexpr int kThreadsPerRow = kMatvecThreads / kRows;
  const int row_in_block = static_cast<int>(threadIdx.x) / kThreadsPerRow;
  const int first_piece = static_cast<int>(threadIdx.x) % kThreadsPerRow;
  const int64_t row = block_index * kRows + row_in_block;
  const bool has_row = row < out_features;  // the last block's spare warps (kRows = 4)
  const uint8_t* w = weight + (has_row ? row : 0) * row_bytes;
  const int num_pieces =
      has_row ? static_cast<int>(row_bytes / static_cast<int64_t>(sizeof(BlockQ4_K))) * kQ4KPiecesPerBlock : 0;
  float acc[1][kMaxTokens];
#pragma unroll
  for (int t = 0; t < kMaxTokens; ++t) acc[0][t] = 0.0f;
  for (int piece = first_piece; piece < num_pieces; piece += kThreadsPerRow) {
    const int block = piece / kQ4KPiecesPerBlock, p = piece % kQ4KPiecesPerBlock;
    const int c = p >> 1, half = p & 1;  // 64-value chunk c: quant bytes 32c + 16 half .. + 15
    const uint8_t* b = w + static_cast<int64_t>(block) * static_cast<int64_t>(sizeof(BlockQ4_K));
    const uint4 header = __ldcs(reinterpret_cast<const uint4*>(b));
    const uint4 q = __ldcs(reinterpret_cast<const uint4*>(b + 16) + p);

    float sc[2], mn[2];
    q4_k_scales(header.y, header.z, header.w, c, sc, mn);
    const float d = fp16_bits_to_float(header.x & 0xFFFFu), dmin = fp16_bits_to_float(header.x >> 16);
    const float scale_low = d * sc[0], min_low = dmin * mn[0], scale_high = d * sc[1], min_high = dmin * mn[1];
    constexpr uint32_t kLow = 0x0F0F0F0Fu;
    const uint4 q_low = make_uint4(q.x & kLow, q.y & kLow, q.z & kLow, q.w & kLow);
    const uint4 q_high = make_uint4((q.x >> 4) & kLow, (q.y >> 4) & kLow, (q.z >> 4) & kLow, (q.w >> 4) & kLow);
    // The activations of sub-blocks 2c (low nibbles) and 2c + 1 (high), at the piece's 16 places.
    const int64_t x_block = static_cast<int64_t>(block) * 8 + 2 * c;
#pragma unroll
    for (int t = 0; t < kMaxTokens; ++t) {
      if (t < num_tokens) {
        const int8_t* xt = xq + t * in_features;
        const float* dt = xd + t * (in_features / 32);
        const int4 x_low = __ldg(reinterpret_cast<const int4*>(xt + x_block * 32 + 16 * half));
        const int4 x_high = __ldg(reinterpret_cast<const int4*>(xt + (x_block + 1) * 32 + 16 * half));
        int dot_low, sum_low, dot_high, sum_high;
        dot16(q_low, x_low, &dot_low, &sum_low);
        dot16(q_high, x_high, &dot_high, &sum_high);
        acc[0][t] +=
            __ldg(dt + x_block) * (scale_low * static_cast<float>(dot_low) - min_low * static_cast<float>(sum_low));
        acc[0][t] += __ldg(dt + x_block + 1) *
                     (scale_high * static_cast<float>(dot_high) - min_high * static_cast<float>(sum_high));
      }
    }
  }
  if constexpr (kRows == 1) {
    reduce_and_store<kMaxTokens, 1>(acc, row, 1, num_tokens, out_features, bias, y);
  } else {
#pragma unroll
    for (int t = 0; t < kMaxTokens; ++t) {
      const float total = warp_sum(acc[0][t]);  // every lane of the warp takes part
      if (has_row && first_piece == 0 && t < num_tokens) {
        y[t * out_features + row] = bias != nullptr ? total + bias[row] : total;
      }
    }
  }
}

template <int kMaxTokens, int kRows>
__global__ void __launch_bounds__(kMatvecThreads)
    matvec_q4_k_q8_kernel(const uint8_t* __restrict__ weight, int64_t row_bytes, int64_t in_features,
                          int64_t out_features, const int8_t* __restrict__ xq, const float* __restrict__ xd,
                          int num_tokens, float* __restrict__ y, const float* __restrict__ bias) {
  cuda_detail::prefetch_rows_l2(weight, row_bytes, static_cast<int64_t>(blockIdx.x) * kRows, kRows, out_features);
  cuda_detail::wait_for_prior_grids();
  q4_k_q8_rows<kMaxTokens, kRows>(weight, row_bytes, in_features, out_features, blockIdx.x, xq, xd, num_tokens, y,
                                  bias);
}

// Up to three matrices on the same input in one launch (an op's q, k and v, or gate and up):
// part p owns the thread blocks from parts.first_block[p] and computes its rows exactly as its
// own launch would (select_matvec_part: constant indices, no stack frame).
template <int kMaxTokens, int kRows>
__global__ void __launch_bounds__(kMatvecThreads)
    matvec_q4_k_q8_group_kernel(cuda_detail::MatvecParts parts, int64_t row_bytes, int64_t in_features,
                                const int8_t* __restrict__ xq, const float* __restrict__ xd, int num_tokens) {
  const cuda_detail::MatvecPart part = cuda_detail::select_matvec_part(parts, blockIdx.x);
  cuda_detail::prefetch_rows_l2(part.weight, row_bytes, static_cast<int64_t>(blockIdx.x - part.first_block) * kRows,
                                kRows, part.out_features);
  cuda_detail::wait_for_prior_grids();
  q4_k_q8_rows<kMaxTokens, kRows>(part.weight, row_bytes, in_features, part.out_features, blockIdx.x - part.first_block,
                                  xq, xd, num_tokens, part.y, part.bias);
}

}  // namespace iwb::cuda_matvec
