// Products of split-layout Q4_0 / Q8_0 weights with up to 64 tokens of int8 activations on int8
// tensor cores (mma m16n8k32, mma_m16n8k16.cuh): the batched decode path. Before it, 9 to 64
// tokens went through an f16 copy of each weight and cuBLAS, which reads and writes about 4.6
// bytes a weight per step where Q4_0 stores 0.56: llama-3-8b Q4_0 decoded only 12x faster at
// batch 64 than at batch 1 on an H200, F16 37x.
//
// One 32-value block is exactly one k32 step, and the split layout's bytes are the A fragment:
// quad q of a row needs values 4q..4q+3 and 16+4q..16+4q+3, which in Q4_0 are the low and high
// nibbles of bytes 4q..4q+3 (one 4-byte load), in Q8_0 the bytes 4q.. and 16+4q.. (two). Each
// product is one block's integer sum for 16 rows x 8 tokens; it is scaled at once by the row's
// and the token's block scales (and Q4_0's -8 offset through the token's block sum), as the
// CPU's fast path and the one-token kernel do.
//
// NOT USED BY THE ENGINE YET: correct on an H200 (test_cuda_matvec, every type and size), but
// slower than the f16 copy and cuBLAS it was meant to replace (bench_cuda_matvec, 4096 x 14336
// Q4_0: 95 us for 16 tokens, 263 us for 64, where the split matvec reads the weight in 12.5 us):
// each warp's k loop waits on its weight loads one block at a time (no loads in flight ahead of
// the products), and every 16-row block reads all tokens' activations from L2 again. Next:
// activation tiles in shared memory shared by 64 rows, and the weight loads of the next blocks
// issued before the products of this one.
//
// A thread block holds 16 output rows and all tokens (up to 8 column tiles of 8); its 4 warps
// take a quarter of the blocks of the rows each (consecutive blocks, so the neighbours in a
// 32-byte sector come from L1) and add their partial sums through shared memory at the end.
#include "cuda_common.cuh"
#include "iwb/kernels/cuda/split_blocks_cuda.h"
#include "mma_m16n8k16.cuh"

#include <cuda_fp16.h>

namespace iwb {
namespace {

using namespace cuda_detail;

constexpr int kMmaWarps = 4;
constexpr int kMmaThreads = kMmaWarps * 32;
constexpr int kMaxTiles = static_cast<int>(kSplitMmaMaxTokens / 8);

// The A fragment's registers for rows (group, group + 8) of block b: see the header comment.
template <int kQuantBytes>
__device__ __forceinline__ void load_a(const uint8_t* __restrict__ row_lo, const uint8_t* __restrict__ row_hi, int quad,
                                       bool has_lo, bool has_hi, uint32_t (&a)[4]) {
  if constexpr (kQuantBytes == 16) {
    const uint32_t lo = has_lo ? __ldcs(reinterpret_cast<const unsigned*>(row_lo) + quad) : 0u;
    const uint32_t hi = has_hi ? __ldcs(reinterpret_cast<const unsigned*>(row_hi) + quad) : 0u;
    a[0] = lo & 0x0F0F0F0Fu;
    a[1] = hi & 0x0F0F0F0Fu;
    a[2] = (lo >> 4) & 0x0F0F0F0Fu;
    a[3] = (hi >> 4) & 0x0F0F0F0Fu;
  } else {
    a[0] = has_lo ? __ldcs(reinterpret_cast<const unsigned*>(row_lo) + quad) : 0u;
    a[1] = has_hi ? __ldcs(reinterpret_cast<const unsigned*>(row_hi) + quad) : 0u;
    a[2] = has_lo ? __ldcs(reinterpret_cast<const unsigned*>(row_lo) + 4 + quad) : 0u;
    a[3] = has_hi ? __ldcs(reinterpret_cast<const unsigned*>(row_hi) + 4 + quad) : 0u;
  }
}

template <int kQuantBytes>
__global__ void __launch_bounds__(kMmaThreads)
    matmul_split_mma_kernel(const uint8_t* __restrict__ weight, int64_t in_features, int64_t out_features,
                            const int8_t* __restrict__ xq, const float* __restrict__ xd, const int32_t* __restrict__ xs,
                            int num_tokens, float* __restrict__ y, const float* __restrict__ bias) {
  cuda_detail::wait_for_prior_grids();
  __shared__ float partial[kMmaWarps][16][kSplitMmaMaxTokens];
  const int warp = static_cast<int>(threadIdx.x / 32), lane = static_cast<int>(threadIdx.x % 32);
  const int group = lane / 4, quad = lane % 4;
  const int64_t row0 = static_cast<int64_t>(blockIdx.x) * 16;
  const int64_t blocks = in_features / 32;
  const int tiles = (num_tokens + 7) / 8;
  const int64_t row_lo = row0 + group, row_hi = row0 + group + 8;
  const bool has_lo = row_lo < out_features, has_hi = row_hi < out_features;
  const uint8_t* quants = weight;
  const auto* scales = reinterpret_cast<const unsigned short*>(weight + out_features * blocks * kQuantBytes);

  float acc[kMaxTiles][4];
#pragma unroll
  for (int j = 0; j < kMaxTiles; ++j) acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.0f;

  // This warp's quarter of the blocks.
  const int64_t per_warp = (blocks + kMmaWarps - 1) / kMmaWarps;
  const int64_t b_begin = warp * per_warp, b_end = min(blocks, b_begin + per_warp);
  for (int64_t b = b_begin; b < b_end; ++b) {
    uint32_t a[4];
    load_a<kQuantBytes>(quants + (row_lo * blocks + b) * kQuantBytes, quants + (row_hi * blocks + b) * kQuantBytes,
                        quad, has_lo, has_hi, a);
    const float d_lo = has_lo ? __half2float(__ushort_as_half(__ldcs(scales + row_lo * blocks + b))) : 0.0f;
    const float d_hi = has_hi ? __half2float(__ushort_as_half(__ldcs(scales + row_hi * blocks + b))) : 0.0f;
#pragma unroll
    for (int j = 0; j < kMaxTiles; ++j) {
      if (j < tiles) {                      // uniform across the block
        const int token_b = 8 * j + group;  // the B column this lane loads
        uint32_t bq[2] = {0u, 0u};
        if (token_b < num_tokens) {
          const auto* x = reinterpret_cast<const unsigned*>(xq + token_b * in_features + b * 32);
          bq[0] = __ldg(x + quad);
          bq[1] = __ldg(x + 4 + quad);
        }
        int c[4] = {0, 0, 0, 0};
        mma_m16n8k32_s8(c, a, bq);
        // This lane's outputs: tokens 8j + 2 quad (+1), rows group and group + 8.
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int token = 8 * j + 2 * quad + e;
          if (token < num_tokens) {
            const float dx = __ldg(xd + token * blocks + b);
            int lo = c[e], hi = c[2 + e];
            if constexpr (kQuantBytes == 16) {
              const int offset = 8 * __ldg(xs + token * blocks + b);
              lo -= offset;
              hi -= offset;
            }
            acc[j][e] += d_lo * dx * static_cast<float>(lo);
            acc[j][2 + e] += d_hi * dx * static_cast<float>(hi);
          }
        }
      }
    }
  }

  // The warps' partial sums, added through shared memory; then the block writes its rows.
#pragma unroll
  for (int j = 0; j < kMaxTiles; ++j) {
    if (j < tiles) {
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        partial[warp][group][8 * j + 2 * quad + e] = acc[j][e];
        partial[warp][group + 8][8 * j + 2 * quad + e] = acc[j][2 + e];
      }
    }
  }
  __syncthreads();
  for (int idx = static_cast<int>(threadIdx.x); idx < 16 * num_tokens; idx += kMmaThreads) {
    const int r = idx % 16, token = idx / 16;
    const int64_t row = row0 + r;
    if (row >= out_features) continue;
    float sum = partial[0][r][token];
#pragma unroll
    for (int w = 1; w < kMmaWarps; ++w) sum += partial[w][r][token];
    y[token * out_features + row] = bias != nullptr ? sum + bias[row] : sum;
  }
}

}  // namespace

cudaError_t matmul_split_mma_cuda(const SplitMatvecArgs& a, cudaStream_t stream) {
  const bool is_ok = (a.type == GgmlType::Q4_0 || a.type == GgmlType::Q8_0) && a.weight != nullptr &&
                     a.x_q8 != nullptr && a.x_q8_scale != nullptr &&
                     (a.type != GgmlType::Q4_0 || a.x_q8_sum != nullptr) && a.y != nullptr && a.in_features > 0 &&
                     a.in_features % 32 == 0 && a.out_features > 0 && a.num_tokens >= 1 &&
                     a.num_tokens <= kSplitMmaMaxTokens && is_aligned(a.weight, 16) && is_aligned(a.x_q8, 16) &&
                     is_aligned(a.x_q8_scale, 4) && is_aligned(a.x_q8_sum, 4) && is_aligned(a.y, 4) &&
                     (a.bias == nullptr || is_aligned(a.bias, 4)) && (a.out_features + 15) / 16 <= kMaxGridX;
  if (!is_ok) return cudaErrorInvalidValue;
  const auto grid = static_cast<unsigned>((a.out_features + 15) / 16);
  auto* kernel = a.type == GgmlType::Q4_0 ? matmul_split_mma_kernel<16> : matmul_split_mma_kernel<32>;
  IWB_LAUNCH(kernel, grid, kMmaThreads, 0, stream, static_cast<const uint8_t*>(a.weight), a.in_features, a.out_features,
             a.x_q8, a.x_q8_scale, a.x_q8_sum, static_cast<int>(a.num_tokens), a.y, a.bias);
  return cudaGetLastError();
}

}  // namespace iwb
