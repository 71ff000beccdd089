// Q4_0 in the split layout (q4_0_split_cuda.h): the one-to-eight-token product on int8
// activations and the f16 dequantization for cuBLAS.
//
// The product gives each output row to one warp. Lane l takes blocks l, l + 32, ...: one 16-byte
// load of its 32 nibbles (a warp reads 512 contiguous bytes), one 2-byte load of the scale
// (64 contiguous bytes), and per token the block's 32 int8 activations as two 16-byte loads
// that the rows share through L1. The dot product is 8 dp4a on the masked nibbles and 8 on
// ones for the activations' sum (the -8 offset): about one instruction per weight, where the
// GGUF-layout kernels (matvec_quant.cuh) spend two to five and stage through shared memory
// behind block-wide barriers. No shared memory, no barrier: a warp's loads of its next blocks
// are independent of the products of the last ones, and #pragma unroll keeps four in flight.
#include "cuda_common.cuh"
#include "iwb/kernels/cuda/q4_0_split_cuda.h"

#include <cuda_fp16.h>

namespace iwb {
namespace {

using namespace cuda_detail;

constexpr int kRowsPerBlock = 4;  // one row per warp
constexpr int kSplitThreads = kRowsPerBlock * 32;

// q4_0_split_scales_offset on the device: the scales follow the rows' nibbles.
__device__ __forceinline__ int64_t scales_offset(int64_t rows, int64_t in_features) { return rows * (in_features / 2); }

__device__ __forceinline__ float split_scale(const uint8_t* __restrict__ weight, int64_t offset) {
  return __half2float(__ushort_as_half(__ldcs(reinterpret_cast<const unsigned short*>(weight + offset))));
}

// kMaxTokens: 1 (one sequence decoding) or kQ4_0SplitMaxTokens (num_tokens at run time).
template <int kMaxTokens>
__global__ void __launch_bounds__(kSplitThreads)
    matvec_q4_0_split_kernel(const uint8_t* __restrict__ weight, int64_t in_features, int64_t out_features,
                             const int8_t* __restrict__ xq, const float* __restrict__ xd, int num_tokens,
                             float* __restrict__ y, const float* __restrict__ bias) {
  const int warp = static_cast<int>(threadIdx.x / 32), lane = static_cast<int>(threadIdx.x % 32);
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + warp;
  if (row >= out_features) return;  // the whole warp: nothing below synchronises the block
  const int64_t blocks = in_features / 32;
  const uint4* __restrict__ nibbles = reinterpret_cast<const uint4*>(weight) + row * blocks;
  const int64_t scales = scales_offset(out_features, in_features) + row * blocks * 2;

  float acc[kMaxTokens];
#pragma unroll
  for (int t = 0; t < kMaxTokens; ++t) acc[t] = 0.0f;

#pragma unroll 4
  for (int64_t b = lane; b < blocks; b += 32) {
    const uint4 q = __ldcs(nibbles + b);
    const float dw = split_scale(weight, scales + b * 2);
    // Byte j of the 16 holds values j (low nibble) and j + 16 (high nibble).
    const int lo[4] = {static_cast<int>(q.x & 0x0F0F0F0Fu), static_cast<int>(q.y & 0x0F0F0F0Fu),
                       static_cast<int>(q.z & 0x0F0F0F0Fu), static_cast<int>(q.w & 0x0F0F0F0Fu)};
    const int hi[4] = {static_cast<int>((q.x >> 4) & 0x0F0F0F0Fu), static_cast<int>((q.y >> 4) & 0x0F0F0F0Fu),
                       static_cast<int>((q.z >> 4) & 0x0F0F0F0Fu), static_cast<int>((q.w >> 4) & 0x0F0F0F0Fu)};
#pragma unroll
    for (int t = 0; t < kMaxTokens; ++t) {
      if (t < num_tokens) {
        const int4* x = reinterpret_cast<const int4*>(xq + t * in_features + b * 32);
        const int4 xa = __ldg(x), xb = __ldg(x + 1);  // values 0..15 and 16..31
        int sum = __dp4a(lo[0], xa.x, 0);
        sum = __dp4a(lo[1], xa.y, sum);
        sum = __dp4a(lo[2], xa.z, sum);
        sum = __dp4a(lo[3], xa.w, sum);
        sum = __dp4a(hi[0], xb.x, sum);
        sum = __dp4a(hi[1], xb.y, sum);
        sum = __dp4a(hi[2], xb.z, sum);
        sum = __dp4a(hi[3], xb.w, sum);
        int sum_x = __dp4a(0x01010101, xa.x, 0);
        sum_x = __dp4a(0x01010101, xa.y, sum_x);
        sum_x = __dp4a(0x01010101, xa.z, sum_x);
        sum_x = __dp4a(0x01010101, xa.w, sum_x);
        sum_x = __dp4a(0x01010101, xb.x, sum_x);
        sum_x = __dp4a(0x01010101, xb.y, sum_x);
        sum_x = __dp4a(0x01010101, xb.z, sum_x);
        sum_x = __dp4a(0x01010101, xb.w, sum_x);
        acc[t] += dw * __ldg(xd + t * blocks + b) * static_cast<float>(sum - 8 * sum_x);
      }
    }
  }
#pragma unroll
  for (int t = 0; t < kMaxTokens; ++t) {
    if (t < num_tokens) {
      const float total = warp_sum(acc[t]);
      if (lane == 0) y[t * out_features + row] = bias != nullptr ? total + bias[row] : total;
    }
  }
}

// One thread per 32-value block: its 16 nibble bytes and scale to 32 f16 values (4 stores of 16 bytes).
__global__ void dequantize_q4_0_split_kernel(const uint8_t* __restrict__ weight, __half* __restrict__ out, int64_t rows,
                                             int64_t in_features) {
  const int64_t num_blocks = rows * (in_features / 32);
  const int64_t scales = scales_offset(rows, in_features);
  const int64_t stride = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t b = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; b < num_blocks; b += stride) {
    const uint4 q4 = __ldg(reinterpret_cast<const uint4*>(weight) + b);
    const float d = __half2float(__ushort_as_half(__ldg(reinterpret_cast<const unsigned short*>(weight + scales) + b)));
    const uint32_t words[4] = {q4.x, q4.y, q4.z, q4.w};
    uint32_t packed[16];
#pragma unroll
    for (int j = 0; j < 16; j += 2) {
      const uint32_t byte0 = (words[j / 4] >> (8 * (j % 4))) & 0xFFu;
      const uint32_t byte1 = (words[(j + 1) / 4] >> (8 * ((j + 1) % 4))) & 0xFFu;
      auto half_bits = [d](uint32_t q) {
        return static_cast<uint32_t>(
            __half_as_ushort(__float2half_rn(static_cast<float>(static_cast<int>(q) - 8) * d)));
      };
      packed[j / 2] = half_bits(byte0 & 0x0Fu) | (half_bits(byte1 & 0x0Fu) << 16);  // values j, j + 1
      packed[8 + j / 2] = half_bits(byte0 >> 4) | (half_bits(byte1 >> 4) << 16);    // values 16 + j, 17 + j
    }
    uint4* dst = reinterpret_cast<uint4*>(out + b * 32);
#pragma unroll
    for (int k = 0; k < 4; ++k)
      dst[k] = make_uint4(packed[4 * k], packed[4 * k + 1], packed[4 * k + 2], packed[4 * k + 3]);
  }
}

}  // namespace

cudaError_t matvec_q4_0_split_check(const Q4_0SplitMatvecArgs& a) {
  const bool is_ok = a.weight != nullptr && a.x_q8 != nullptr && a.x_q8_scale != nullptr && a.y != nullptr &&
                     a.in_features > 0 && a.in_features % 32 == 0 && a.out_features > 0 && a.num_tokens >= 1 &&
                     a.num_tokens <= kQ4_0SplitMaxTokens && is_aligned(a.weight, 16) && is_aligned(a.x_q8, 16) &&
                     is_aligned(a.x_q8_scale, 4) && is_aligned(a.y, 4) &&
                     (a.bias == nullptr || is_aligned(a.bias, 4)) && a.out_features <= kMaxGridX * kRowsPerBlock;
  return is_ok ? cudaSuccess : cudaErrorInvalidValue;
}

cudaError_t matvec_q4_0_split_cuda(const Q4_0SplitMatvecArgs& a, cudaStream_t stream) {
  if (const cudaError_t e = matvec_q4_0_split_check(a); e != cudaSuccess) return e;
  const auto grid = static_cast<unsigned>((a.out_features + kRowsPerBlock - 1) / kRowsPerBlock);
  const auto* w = static_cast<const uint8_t*>(a.weight);
  const int n = static_cast<int>(a.num_tokens);
  if (n == 1) {
    IWB_LAUNCH(matvec_q4_0_split_kernel<1>, grid, kSplitThreads, 0, stream, w, a.in_features, a.out_features, a.x_q8,
               a.x_q8_scale, n, a.y, a.bias);
  } else {
    IWB_LAUNCH(matvec_q4_0_split_kernel<static_cast<int>(kQ4_0SplitMaxTokens)>, grid, kSplitThreads, 0, stream, w,
               a.in_features, a.out_features, a.x_q8, a.x_q8_scale, n, a.y, a.bias);
  }
  return cudaGetLastError();
}

cudaError_t dequantize_q4_0_split_f16_cuda(const void* weight, uint16_t* out, int64_t rows, int64_t in_features,
                                           cudaStream_t stream) {
  if (weight == nullptr || out == nullptr || rows <= 0 || in_features <= 0 || in_features % 32 != 0 ||
      !is_aligned(weight, 16) || !is_aligned(out, 16)) {
    return cudaErrorInvalidValue;
  }
  const int64_t num_blocks = rows * (in_features / 32);
  IWB_LAUNCH(dequantize_q4_0_split_kernel, grid_for(num_blocks, 256), 256, 0, stream,
             static_cast<const uint8_t*>(weight), reinterpret_cast<__half*>(out), rows, in_features);
  return cudaGetLastError();
}

}  // namespace iwb
