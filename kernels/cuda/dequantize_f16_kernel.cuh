// Device code of dequantize_rows_f16_cuda (launched from dequantize_f16.cu): each thread decodes
// 8 consecutive values with the per-element decoders of dequantize_blocks.cuh and writes them as
// one 16-byte store where the destination allows. Kept apart from the launcher so tests can run
// it on the CPU (tests/kernels/cuda_emulation_warps).
#pragma once

#include "dequantize_blocks.cuh"

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace iwb::cuda_detail {

inline constexpr int kF16ValuesPerThread = 8;  // every block size here is 1 or a multiple of 8

template <typename Decoder>
__global__ void dequantize_f16_kernel(const typename Decoder::Block* __restrict__ src, __half* __restrict__ dst,
                                      int64_t num_values, bool is_dst_aligned) {
  cuda_detail::wait_for_prior_grids();
  const int64_t num_groups = (num_values + kF16ValuesPerThread - 1) / kF16ValuesPerThread;
  const int64_t stride = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t g = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; g < num_groups; g += stride) {
    const int64_t first = g * kF16ValuesPerThread;
    if (is_dst_aligned && first + kF16ValuesPerThread <= num_values) {
      uint32_t packed[kF16ValuesPerThread / 2];
#pragma unroll
      for (int k = 0; k < kF16ValuesPerThread; k += 2) {
        const int64_t i = first + k;
        const float lo = Decoder::decode(src[i / Decoder::kBlockSize], static_cast<int>(i % Decoder::kBlockSize));
        const float hi =
            Decoder::decode(src[(i + 1) / Decoder::kBlockSize], static_cast<int>((i + 1) % Decoder::kBlockSize));
        packed[k / 2] = static_cast<uint32_t>(__half_as_ushort(__float2half_rn(lo))) |
                        (static_cast<uint32_t>(__half_as_ushort(__float2half_rn(hi))) << 16);
      }
      *reinterpret_cast<uint4*>(dst + first) = make_uint4(packed[0], packed[1], packed[2], packed[3]);
    } else {
      for (int64_t i = first; i < num_values && i < first + kF16ValuesPerThread; ++i) {
        dst[i] =
            __float2half_rn(Decoder::decode(src[i / Decoder::kBlockSize], static_cast<int>(i % Decoder::kBlockSize)));
      }
    }
  }
}

}  // namespace iwb::cuda_detail
