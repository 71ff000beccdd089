// The quantized matrix-vector kernel shared by matvec_q4_0.cu, matvec_q8_0.cu and
// matvec_kquants.cu: weight rows staged through shared memory with wide coalesced loads, then
// decoded 8 values at a time in registers and dotted with up to 8 tokens of f32 activations.
#pragma once

#include "cuda_common.cuh"
#include "iwb/kernels/cuda/matvec_plan.h"
#include "iwb/kernels/quant_blocks.h"

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace iwb::cuda_matvec {

// Why stage through shared memory: GGUF blocks are 18, 20, 22, 24, 34, 144, 176 or 210 bytes,
// so a lane reading "its" block directly could use at best 2-byte loads, and a warp's load
// instruction would then cover ~600 bytes for 64 useful ones: the L1 would need ~9 passes per
// byte delivered and throughput would stall well below DRAM bandwidth. Instead the thread block
// copies a tile of whole blocks (the same bytes) with 16-byte loads, lane i taking bytes
// 16i..16i+15 of the tile (fully coalesced, 4 wavefronts per 512 bytes), into shared memory,
// where the decoders read 2- and 4-byte pieces at no DRAM cost. 16-byte loads need a 16-byte
// aligned base and a row length in bytes divisible by 16 (true of every real model shape, e.g.
// Q4_0 rows of 4096 are 2304 bytes); other shapes use 4- or 2-byte loads into the same layout.
// Weights are read with ld.global.cs (evict-first): each byte is used once, x should stay cached.

__device__ __forceinline__ uint32_t smem_u16(const uint8_t* p) { return *reinterpret_cast<const uint16_t*>(p); }
// Four bytes at a 2-byte aligned shared-memory address, little-endian.
__device__ __forceinline__ uint32_t smem_u32_a2(const uint8_t* p) { return smem_u16(p) | (smem_u16(p + 2) << 16); }
__device__ __forceinline__ uint32_t smem_u32(const uint8_t* p) { return *reinterpret_cast<const uint32_t*>(p); }
__device__ __forceinline__ float fp16_bits_to_float(uint32_t bits) {
  return __half2float(__ushort_as_half(static_cast<unsigned short>(bits)));
}

// Byte b (0..3) of `word` as the float 2^23 + byte: the byte becomes the low mantissa bits of
// 0x4B000000. One PRMT instead of an integer-to-float conversion (a quarter-rate instruction
// that would otherwise bound the kernel); subtracting 2^23 (+ an offset) afterwards is exact.
__device__ __forceinline__ float byte_plus_2p23(uint32_t word, int b) {
  return __int_as_float(static_cast<int>(__byte_perm(word, 0x4B00u, 0x5440u | static_cast<unsigned>(b))));
}
inline constexpr float k2p23 = 8388608.0f;

// Bit k (0..3) of `bits` moved to bit 8k + 4: the fifth bits of four Q5 quants, one per byte.
// The multiply places copies of `bits` at shifts 0, 7, 14 and 21, which never overlap (no carries).
__device__ __forceinline__ uint32_t spread_4_bits(uint32_t bits) { return ((bits * 0x00204081u) & 0x01010101u) << 4; }

// Each Unit decodes piece p (8 values) of a block in shared memory into w[0..7], exactly as
// dequantize_row_ref computes them (up to FMA contraction). Consecutive lanes take consecutive
// pieces, so a warp's shared-memory reads cover a contiguous stretch of blocks (few bank
// conflicts) and its reads of x cover contiguous floats (coalesced). kPiecesPerBlock pieces
// make a block. With kSplitHalves, w[0..3] are values 4p..4p+3 of the 32-value block and w[4..7]
// values 16+4p..16+4p+3 (the low and high nibbles of the same 4 bytes); otherwise w[0..7] are
// values 8p..8p+7.
struct UnitQ4_0 {
  static constexpr int kBlockBytes = sizeof(BlockQ4_0), kBlockValues = kQK4_0, kPiecesPerBlock = 4;
  static constexpr bool kSplitHalves = true;
  __device__ static void decode(const uint8_t* block, int p, float w[8]) {
    const float d = fp16_bits_to_float(smem_u16(block));
    const uint32_t q = smem_u32_a2(block + 2 + 4 * p);
    const uint32_t lo = q & 0x0F0F0F0Fu, hi = (q >> 4) & 0x0F0F0F0Fu;
#pragma unroll
    for (int b = 0; b < 4; ++b) {
      w[b] = (byte_plus_2p23(lo, b) - (k2p23 + 8.0f)) * d;
      w[4 + b] = (byte_plus_2p23(hi, b) - (k2p23 + 8.0f)) * d;
    }
  }
};

struct UnitQ4_1 {
  static constexpr int kBlockBytes = sizeof(BlockQ4_1), kBlockValues = kQK4_1, kPiecesPerBlock = 4;
  static constexpr bool kSplitHalves = true;
  __device__ static void decode(const uint8_t* block, int p, float w[8]) {
    const float d = fp16_bits_to_float(smem_u16(block));
    const float m = fp16_bits_to_float(smem_u16(block + 2));
    const uint32_t q = smem_u32_a2(block + 4 + 4 * p);
    const uint32_t lo = q & 0x0F0F0F0Fu, hi = (q >> 4) & 0x0F0F0F0Fu;
#pragma unroll
    for (int b = 0; b < 4; ++b) {
      w[b] = (byte_plus_2p23(lo, b) - k2p23) * d + m;
      w[4 + b] = (byte_plus_2p23(hi, b) - k2p23) * d + m;
    }
  }
};

// Q5_0/Q5_1: bit j of qh is the fifth bit of value j (j < 16: low nibbles, else high nibbles).
template <bool kHasMin>
struct UnitQ5 {
  static constexpr int kBlockBytes = kHasMin ? sizeof(BlockQ5_1) : sizeof(BlockQ5_0);
  static constexpr int kBlockValues = 32, kPiecesPerBlock = 4;
  static constexpr bool kSplitHalves = true;
  static constexpr int kQhOffset = kHasMin ? 4 : 2;
  __device__ static void decode(const uint8_t* block, int p, float w[8]) {
    const float d = fp16_bits_to_float(smem_u16(block));
    const float m = kHasMin ? fp16_bits_to_float(smem_u16(block + 2)) : 0.0f;
    const uint32_t qh = smem_u32_a2(block + kQhOffset);
    const uint32_t q = smem_u32_a2(block + kQhOffset + 4 + 4 * p);
    const uint32_t lo = (q & 0x0F0F0F0Fu) | spread_4_bits((qh >> (4 * p)) & 0xFu);
    const uint32_t hi = ((q >> 4) & 0x0F0F0F0Fu) | spread_4_bits((qh >> (16 + 4 * p)) & 0xFu);
    const float offset = kHasMin ? k2p23 : k2p23 + 16.0f;
#pragma unroll
    for (int b = 0; b < 4; ++b) {
      if constexpr (kHasMin) {
        w[b] = (byte_plus_2p23(lo, b) - offset) * d + m;
        w[4 + b] = (byte_plus_2p23(hi, b) - offset) * d + m;
      } else {
        w[b] = (byte_plus_2p23(lo, b) - offset) * d;
        w[4 + b] = (byte_plus_2p23(hi, b) - offset) * d;
      }
    }
  }
};

struct UnitQ8_0 {
  static constexpr int kBlockBytes = sizeof(BlockQ8_0), kBlockValues = kQK8_0, kPiecesPerBlock = 4;
  static constexpr bool kSplitHalves = false;
  __device__ static void decode(const uint8_t* block, int p, float w[8]) {
    const float d = fp16_bits_to_float(smem_u16(block));
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      // Flipping the sign bit maps int8 q to the byte q + 128.
      const uint32_t q = smem_u32_a2(block + 2 + 8 * p + 4 * i) ^ 0x80808080u;
#pragma unroll
      for (int b = 0; b < 4; ++b) w[4 * i + b] = (byte_plus_2p23(q, b) - (k2p23 + 128.0f)) * d;
    }
  }
};

// Q4_K/Q5_K piece p: sub-block j = p / 4 (32 values with their own 6-bit scale and min), bytes
// l = 8(p % 4) .. +7 of it, whose 4-bit quants are the low (even j) or high (odd j) nibbles of
// qs[32(j / 2) + l]; Q5_K's fifth bit is bit j of qh[l]. These blocks are multiples of 16 bytes,
// so the pieces' qs and qh bytes sit 8-byte aligned in the tile.
template <bool kHasHighBit>
struct UnitK45 {
  static constexpr int kBlockBytes = kHasHighBit ? sizeof(BlockQ5_K) : sizeof(BlockQ4_K);
  static constexpr int kBlockValues = kQK_K, kPiecesPerBlock = 32;
  static constexpr bool kSplitHalves = false;
  static constexpr int kQsOffset = kHasHighBit ? 48 : 16;
  __device__ static void decode(const uint8_t* block, int p, float w[8]) {
    const int j = p >> 2, l = 8 * (p & 3);
    uint8_t sc, mn;
    unpack_scale_min_k4(j, block + 4, &sc, &mn);
    const float scale = fp16_bits_to_float(smem_u16(block)) * static_cast<float>(sc);
    const float min = fp16_bits_to_float(smem_u16(block + 2)) * static_cast<float>(mn);
    const int shift = (j & 1) * 4;
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      uint32_t q = (smem_u32(block + kQsOffset + 32 * (j >> 1) + l + 4 * i) >> shift) & 0x0F0F0F0Fu;
      if constexpr (kHasHighBit) q |= ((smem_u32(block + 16 + l + 4 * i) >> j) & 0x01010101u) << 4;
#pragma unroll
      for (int b = 0; b < 4; ++b) w[4 * i + b] = scale * (byte_plus_2p23(q, b) - k2p23) - min;
    }
  }
};

// Q6_K piece p: 32-value unit u = p / 4 (half h = u / 4, quarter k = u % 4 of it), values
// l = 8(p % 4) .. +7 of the unit. Value l takes the low (k < 2) or high nibble of
// ql[64h + 32(k & 1) + l] and bit pair k of qh[32h + l]; its scale is scales[8h + 2k + l / 16].
// Blocks are 210 bytes, so fields are only 2-byte aligned in the tile. Returns d times the
// piece's scale and its 8 quants (stored + 32) as the bytes of q[0] and q[1].
__device__ __forceinline__ float q6_k_piece(const uint8_t* block, int p, uint32_t (&q)[2]) {
  const int u = p >> 2, l = 8 * (p & 3);
  const int h = u >> 2, k = u & 3;
  const float d = fp16_bits_to_float(smem_u16(block + offsetof(BlockQ6_K, d)));
  const int8_t* scales = reinterpret_cast<const int8_t*>(block + offsetof(BlockQ6_K, scales));
  const uint8_t* ql = block + 64 * h + 32 * (k & 1) + l;
  const uint8_t* qh = block + offsetof(BlockQ6_K, qh) + 32 * h + l;
  const int low_shift = k < 2 ? 0 : 4;
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    q[i] = ((smem_u32_a2(ql + 4 * i) >> low_shift) & 0x0F0F0F0Fu) |
           (((smem_u32_a2(qh + 4 * i) >> (2 * k)) & 0x03030303u) << 4);
  }
  return d * static_cast<float>(scales[8 * h + 2 * k + l / 16]);
}

struct UnitQ6_K {
  static constexpr int kBlockBytes = sizeof(BlockQ6_K), kBlockValues = kQK_K, kPiecesPerBlock = 32;
  static constexpr bool kSplitHalves = false;
  __device__ static void decode(const uint8_t* block, int p, float w[8]) {
    uint32_t q[2];
    const float scale = q6_k_piece(block, p, q);
#pragma unroll
    for (int i = 0; i < 2; ++i) {
#pragma unroll
      for (int b = 0; b < 4; ++b) w[4 * i + b] = scale * (byte_plus_2p23(q[i], b) - (k2p23 + 32.0f));
    }
  }
};

// Each thread decodes kPiecesPerThread pieces per tile, so a tile is 512 pieces (4096 values):
// 128 blocks of 32 values or 16 K-quant super-blocks. Tiles are multiples of 16 bytes (8 blocks
// of any even size are), so every row's tile starts 16-byte aligned in shared memory.
inline constexpr int kPiecesPerThread = 4;
template <typename Unit>
inline constexpr int kTileBlocks = kPiecesPerThread* kMatvecThreads / Unit::kPiecesPerBlock;
template <typename Unit>
inline constexpr int kTileBytes = kTileBlocks<Unit>* Unit::kBlockBytes;

template <int kLoadBytes>
struct LoadWord;
template <>
struct LoadWord<16> {
  using Type = uint4;
};
template <>
struct LoadWord<4> {
  using Type = unsigned int;
};
template <>
struct LoadWord<2> {
  using Type = unsigned short;
};
template <>
struct LoadWord<1> {  // MXFP4 rows of an odd number of 17-byte blocks (the expert products only)
  using Type = unsigned char;
};

// Copies `tile_len` bytes (a multiple of kLoadBytes) of each of `num_rows` rows, starting at
// `src` (row r at src + r * row_bytes, kLoadBytes-aligned), into tile + r * tile_stride. All
// loads of a batch are issued before their stores so each thread has several in flight.
template <int kLoadBytes>
__device__ __forceinline__ void stage_rows(const uint8_t* __restrict__ src, int64_t row_bytes, int num_rows,
                                           int tile_len, uint8_t* tile, int tile_stride) {
  using Word = typename LoadWord<kLoadBytes>::Type;
  constexpr int kBatch = 4;
  const int words_per_row = tile_len / kLoadBytes;
  const int num_words = num_rows * words_per_row;
  for (int base = 0; base < num_words; base += kBatch * kMatvecThreads) {
    Word words[kBatch];
#pragma unroll
    for (int j = 0; j < kBatch; ++j) {
      const int i = base + j * kMatvecThreads + static_cast<int>(threadIdx.x);
      if (i < num_words) {
        const int r = i / words_per_row, o = i - r * words_per_row;
        words[j] = __ldcs(reinterpret_cast<const Word*>(src + r * row_bytes) + o);
      }
    }
#pragma unroll
    for (int j = 0; j < kBatch; ++j) {
      const int i = base + j * kMatvecThreads + static_cast<int>(threadIdx.x);
      if (i < num_words) {
        const int r = i / words_per_row, o = i - r * words_per_row;
        reinterpret_cast<Word*>(tile + r * tile_stride)[o] = words[j];
      }
    }
  }
}

// Sum of v over the warp, in every lane.
__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xFFFFFFFFu, v, offset);
  return v;
}

// Ends a thread block's work: sums acc[r][t] over the block's threads (warp shuffles, then one
// value per warp through shared memory), adds the bias and writes y[t][row0 + r].
template <int kMaxTokens, int kRows = kMatvecRowsPerBlock>
__device__ __forceinline__ void reduce_and_store(const float (&acc)[kRows][kMaxTokens], int64_t row0, int num_rows,
                                                 int num_tokens, int64_t out_features, const float* __restrict__ bias,
                                                 float* __restrict__ y) {
  constexpr int kWarps = kMatvecThreads / 32;
  __shared__ float partial[kWarps][kRows][kMaxTokens];
  const int tid = static_cast<int>(threadIdx.x);
  const int warp = tid / 32, lane = tid % 32;
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
#pragma unroll
    for (int t = 0; t < kMaxTokens; ++t) {
      const float sum = warp_sum(acc[r][t]);
      if (lane == 0) partial[warp][r][t] = sum;
    }
  }
  __syncthreads();
  if (tid < kRows * kMaxTokens) {
    const int r = tid / kMaxTokens, t = tid % kMaxTokens;
    if (r < num_rows && t < num_tokens) {
      float sum = 0.0f;
#pragma unroll
      for (int w = 0; w < kWarps; ++w) sum += partial[w][r][t];
      if (bias != nullptr) sum += bias[row0 + r];
      y[t * out_features + row0 + r] = sum;
    }
  }
}

// The tile loop of both quantized kernels: the block's num_rows rows staged a tile of whole
// blocks at a time into `tile`, then piece(first_block, block, p) for each of this thread's
// kPiecesPerThread 8-value pieces of it (block: within the tile; p: the piece within the block).
template <typename Unit, int kLoadBytes, typename Piece>
__device__ __forceinline__ void for_each_staged_piece(const uint8_t* __restrict__ rows, int64_t row_bytes, int num_rows,
                                                      uint8_t* tile, Piece&& piece) {
  const int tid = static_cast<int>(threadIdx.x);
  const int64_t blocks_per_row = row_bytes / Unit::kBlockBytes;
  for (int64_t first_block = 0; first_block < blocks_per_row; first_block += kTileBlocks<Unit>) {
    const int64_t remaining = blocks_per_row - first_block;
    const int tile_blocks = static_cast<int>(remaining < kTileBlocks<Unit> ? remaining : kTileBlocks<Unit>);
    stage_rows<kLoadBytes>(rows + first_block * Unit::kBlockBytes, row_bytes, num_rows, tile_blocks * Unit::kBlockBytes,
                           tile, kTileBytes<Unit>);
    __syncthreads();
    const int num_pieces = tile_blocks * Unit::kPiecesPerBlock;
#pragma unroll
    for (int k = 0; k < kPiecesPerThread; ++k) {
      const int index = tid + k * kMatvecThreads;
      if (index < num_pieces) piece(first_block, index / Unit::kPiecesPerBlock, index % Unit::kPiecesPerBlock);
    }
    __syncthreads();  // the next tile overwrites shared memory
  }
}

// One thread block computes kRows output rows (from row0) for all tokens: per tile, each
// thread decodes kPiecesPerThread 8-value pieces of every row into registers and dots each with
// the matching 8 values of x for every token (two float4 reads through the read-only cache,
// shared by the rows), accumulating per (row, token); a warp-shuffle then shared-memory
// reduction ends it. The body of matvec_quant_kernel and of the expert products
// (expert_matvec_kernel), which give it one expert's matrix per thread block.
template <typename Unit, int kLoadBytes, int kMaxTokens, int kRows>
__device__ __forceinline__ void matvec_quant_rows(uint8_t* tile, const uint8_t* __restrict__ weight, int64_t row_bytes,
                                                  int64_t in_features, int64_t out_features, int64_t row0,
                                                  const float* __restrict__ x, int num_tokens, float* __restrict__ y,
                                                  const float* __restrict__ bias) {
  const int num_rows = static_cast<int>(out_features - row0 < kRows ? out_features - row0 : kRows);

  float acc[kRows][kMaxTokens];
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
#pragma unroll
    for (int t = 0; t < kMaxTokens; ++t) acc[r][t] = 0.0f;
  }

  for_each_staged_piece<Unit, kLoadBytes>(
      weight + row0 * row_bytes, row_bytes, num_rows, tile, [&](int64_t first_block, int block, int p) {
        float w[kRows][8];
#pragma unroll
        for (int r = 0; r < kRows; ++r) {
          if (r < num_rows) {
            Unit::decode(tile + r * kTileBytes<Unit> + block * Unit::kBlockBytes, p, w[r]);
          } else {
#pragma unroll
            for (int i = 0; i < 8; ++i) w[r][i] = 0.0f;
          }
        }
        // x offsets of w[0..3] and w[4..7] in the row.
        const int64_t block_value = (first_block + block) * Unit::kBlockValues;
        const int64_t offset0 = block_value + (Unit::kSplitHalves ? 4 * p : 8 * p);
        const int64_t offset1 = offset0 + (Unit::kSplitHalves ? 16 : 4);
#pragma unroll
        for (int t = 0; t < kMaxTokens; ++t) {
          if (t < num_tokens) {
            const float* xt = x + t * in_features;
            const float4 a = __ldg(reinterpret_cast<const float4*>(xt + offset0));
            const float4 b = __ldg(reinterpret_cast<const float4*>(xt + offset1));
#pragma unroll
            for (int r = 0; r < kRows; ++r) {
              float dot = w[r][0] * a.x;
              dot = fmaf(w[r][1], a.y, dot);
              dot = fmaf(w[r][2], a.z, dot);
              dot = fmaf(w[r][3], a.w, dot);
              dot = fmaf(w[r][4], b.x, dot);
              dot = fmaf(w[r][5], b.y, dot);
              dot = fmaf(w[r][6], b.z, dot);
              dot = fmaf(w[r][7], b.w, dot);
              acc[r][t] += dot;
            }
          }
        }
      });

  reduce_and_store<kMaxTokens, kRows>(acc, row0, num_rows, num_tokens, out_features, bias, y);
}

// kMaxTokens is 1 (decode of one sequence) or kCudaMatvecMaxTokens (num_tokens at run time).
template <typename Unit, int kLoadBytes, int kMaxTokens, int kRows>
__global__ void __launch_bounds__(kMatvecThreads)
    matvec_quant_kernel(const uint8_t* __restrict__ weight, int64_t row_bytes, int64_t in_features,
                        int64_t out_features, const float* __restrict__ x, int num_tokens, float* __restrict__ y,
                        const float* __restrict__ bias) {
  __shared__ __align__(16) uint8_t tile[kRows * kTileBytes<Unit>];

  const int64_t row0 = static_cast<int64_t>(blockIdx.x) * kRows;
  cuda_detail::prefetch_rows_l2(weight, row_bytes, row0, kRows, out_features);
  cuda_detail::wait_for_prior_grids();
  matvec_quant_rows<Unit, kLoadBytes, kMaxTokens, kRows>(tile, weight, row_bytes, in_features, out_features, row0, x,
                                                         num_tokens, y, bias);
}

// ---- One token against int8 activations (MatvecCudaArgs::x_q8): integer dot products.

// Piece p (8 weights) of a Q4_0 block in shared memory against its 8 quantized x values (xq: the
// x block's 32 values as 8 ints): d_w * d_x * sum (q - 8) * x_q, the sum in int32 through dp4a.
// The nibbles of 4 bytes are values 4p..4p+3 (low) and 16+4p.. (high), so x ints p and 4 + p.
// Each Dot takes the weight block's activations: xq its values as ints (8 per 32-value x
// block), xd their scales (one per 32 values).
struct DotQ4_0 {
  __device__ static float dot(const uint8_t* block, int p, const int* __restrict__ xq,
                              const float* __restrict__ xd_block) {
    const float xd = __ldg(xd_block);
    const float d = fp16_bits_to_float(smem_u16(block));
    const uint32_t q = smem_u32_a2(block + 2 + 4 * p);
    const int lo = static_cast<int>(q & 0x0F0F0F0Fu), hi = static_cast<int>((q >> 4) & 0x0F0F0F0Fu);
    const int xl = __ldg(xq + p), xh = __ldg(xq + 4 + p);
    const int sum = __dp4a(lo, xl, __dp4a(hi, xh, 0));
    const int sum_x = __dp4a(0x01010101, xl, __dp4a(0x01010101, xh, 0));  // the -8 offset's share
    return d * xd * static_cast<float>(sum - 8 * sum_x);
  }
};

// Piece p of a Q8_0 block: values 8p..8p+7, x ints 2p and 2p + 1.
struct DotQ8_0 {
  __device__ static float dot(const uint8_t* block, int p, const int* __restrict__ xq,
                              const float* __restrict__ xd_block) {
    const float xd = __ldg(xd_block);
    const float d = fp16_bits_to_float(smem_u16(block));
    const int q0 = static_cast<int>(smem_u32_a2(block + 2 + 8 * p));
    const int q1 = static_cast<int>(smem_u32_a2(block + 2 + 8 * p + 4));
    const int sum = __dp4a(q0, __ldg(xq + 2 * p), __dp4a(q1, __ldg(xq + 2 * p + 1), 0));
    return d * xd * static_cast<float>(sum);
  }
};

// Piece p of a Q6_K block (q6_k_piece): values 128h + 32k + l .. +7, all in x block u = 4h + k
// at ints l / 4 and l / 4 + 1, with one 16-value scale. The 6-bit q is stored + 32:
// d sc d_x (sum q x_q - 32 sum x_q).
struct DotQ6_K {
  __device__ static float dot(const uint8_t* block, int p, const int* __restrict__ xq,
                              const float* __restrict__ xd_block) {
    const int u = p >> 2, l = 8 * (p & 3);
    uint32_t q[2];
    const float scale = q6_k_piece(block, p, q);
    int sum = 0, sum_x = 0;
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      const int x = __ldg(xq + 8 * u + l / 4 + i);
      sum = __dp4a(static_cast<int>(q[i]), x, sum);
      sum_x = __dp4a(0x01010101, x, sum_x);
    }
    return scale * __ldg(xd_block + u) * static_cast<float>(sum - 32 * sum_x);
  }
};

// matvec_quant_kernel's staging and reduction (two rows per block, one token) with Dot's integer
// products in place of the f32 decode. Unit gives the block layout: 32-value blocks, or 256-value
// K-quant blocks whose Dot finds its piece's x block among the block's 8.
template <typename Unit, typename Dot, int kLoadBytes>
__global__ void __launch_bounds__(kMatvecThreads)
    matvec_q8_input_kernel(const uint8_t* __restrict__ weight, int64_t row_bytes, int64_t out_features,
                           const int8_t* __restrict__ xq, const float* __restrict__ xd, float* __restrict__ y,
                           const float* __restrict__ bias) {
  static_assert(Unit::kBlockValues % 32 == 0, "whole x blocks per weight block");
  constexpr int kXBlocks = Unit::kBlockValues / 32;
  constexpr int kRows = kMatvecRowsPerBlock;
  __shared__ __align__(16) uint8_t tile[kRows * kTileBytes<Unit>];

  const int64_t row0 = static_cast<int64_t>(blockIdx.x) * kRows;
  cuda_detail::prefetch_rows_l2(weight, row_bytes, row0, kRows, out_features);
  cuda_detail::wait_for_prior_grids();
  const int num_rows = static_cast<int>(out_features - row0 < kRows ? out_features - row0 : kRows);
  const int* xq_ints = reinterpret_cast<const int*>(xq);

  float acc[kRows][1];
#pragma unroll
  for (int r = 0; r < kRows; ++r) acc[r][0] = 0.0f;

  for_each_staged_piece<Unit, kLoadBytes>(
      weight + row0 * row_bytes, row_bytes, num_rows, tile, [&](int64_t first_block, int block, int p) {
        const int64_t x_block = (first_block + block) * kXBlocks;
        const int* xqb = xq_ints + x_block * 8;
        const float* xdb = xd + x_block;
#pragma unroll
        for (int r = 0; r < kRows; ++r) {
          if (r < num_rows) acc[r][0] += Dot::dot(tile + r * kTileBytes<Unit> + block * Unit::kBlockBytes, p, xqb, xdb);
        }
      });

  reduce_and_store<1, kRows>(acc, row0, num_rows, 1, out_features, bias, y);
}

}  // namespace iwb::cuda_matvec
