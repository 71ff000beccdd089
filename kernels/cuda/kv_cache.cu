// KV cache writes and copy-on-write block copies on the GPU (kv_cache_cuda.h). F16 writes are
// one thread per value (__float2half_rn rounds to nearest even, as f32_to_fp16); Q8_0 writes
// give each 32-value block to one warp, which finds the block's absolute maximum with shuffles
// and rounds exactly as ggml's quantize_row_q8_0 (d = amax / 127, q = round(x / d) via 1 / d).
#include "iwb/kernels/cuda/kv_cache_cuda.h"

#include "cuda_common.cuh"
#include "iwb/kernels/quant_blocks.h"

#include <cuda_fp16.h>

namespace iwb {
namespace {

using namespace cuda_detail;

constexpr int kThreads = 256;

__global__ void write_kv_f16_kernel(const float* __restrict__ src, const int64_t* __restrict__ slot_mapping,
                                    int64_t num_tokens, uint16_t* __restrict__ cache, int64_t num_slots, int64_t row) {
  for (int64_t t = blockIdx.y; t < num_tokens; t += gridDim.y) {
    const int64_t slot = slot_mapping[t];
    if (slot < 0 || slot >= num_slots) continue;  // padding, or a slot the pool does not have
    for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < row;
         i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
      cache[slot * row + i] = __half_as_ushort(__float2half_rn(src[t * row + i]));
    }
  }
}

// One warp per Q8_0 block of 32 values; blockDim.x is a multiple of 32 and the loop bounds are
// uniform across each warp (whole blocks), so the full-mask shuffles are safe.
__global__ void write_kv_q8_kernel(const float* __restrict__ src, const int64_t* __restrict__ slot_mapping,
                                   int64_t num_tokens, uint16_t* __restrict__ cache, int64_t num_slots, int64_t row) {
  const int64_t blocks_per_row = row / kQK8_0;
  const int lane = threadIdx.x % 32;
  const int64_t warps_per_grid = static_cast<int64_t>(gridDim.x) * (blockDim.x / 32);
  for (int64_t t = blockIdx.y; t < num_tokens; t += gridDim.y) {
    const int64_t slot = slot_mapping[t];
    if (slot < 0 || slot >= num_slots) continue;
    auto* blocks = reinterpret_cast<BlockQ8_0*>(cache) + slot * blocks_per_row;
    for (int64_t b = static_cast<int64_t>(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32; b < blocks_per_row;
         b += warps_per_grid) {
      const float x = src[t * row + b * kQK8_0 + lane];
      const float amax = warp_max(fabsf(x));
      const float d = amax / 127.0f;
      const float id = d != 0.0f ? 1.0f / d : 0.0f;
      blocks[b].qs[lane] = static_cast<int8_t>(roundf(x * id));  // half away from zero, as std::round
      if (lane == 0) blocks[b].d = __half_as_ushort(__float2half_rn(d));
    }
  }
}

cudaError_t launch_write(const float* src, const int64_t* slots, int64_t num_tokens, uint16_t* cache, int64_t num_slots,
                         int64_t row, GgmlType type, cudaStream_t stream) {
  const unsigned rows = static_cast<unsigned>(std::min(num_tokens, kMaxGridYZ));
  if (type == GgmlType::F16) {
    IWB_LAUNCH(write_kv_f16_kernel, dim3(grid_for(row, kThreads, 64), rows), kThreads, 0, stream, src, slots, num_tokens,
               cache, num_slots, row);
  } else {
    const int64_t warps = row / kQK8_0;
    IWB_LAUNCH(write_kv_q8_kernel, dim3(grid_for(warps, kThreads / 32, 64), rows), kThreads, 0, stream, src, slots,
               num_tokens, cache, num_slots, row);
  }
  return cudaGetLastError();
}

// Copies block src -> dst of every pool; T is uint4 (16-byte) when sizes and addresses allow.
template <typename T>
__global__ void copy_blocks_kernel(T* pool, int64_t num_pools, int64_t pool_stride, int64_t block_elems,
                                   int64_t num_blocks, const int32_t* __restrict__ copies, int64_t num_copies) {
  for (int64_t p = blockIdx.z; p < num_pools; p += gridDim.z) {
    T* base = pool + p * pool_stride;
    for (int64_t c = blockIdx.y; c < num_copies; c += gridDim.y) {
      const int64_t src = copies[2 * c], dst = copies[2 * c + 1];
      if (src < 0 || src >= num_blocks || dst < 0 || dst >= num_blocks || src == dst) continue;
      for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < block_elems;
           i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
        base[dst * block_elems + i] = base[src * block_elems + i];
      }
    }
  }
}

}  // namespace

cudaError_t write_kv_paged_cuda_check(const WriteKvCudaArgs& a) {
  if (a.k == nullptr || a.v == nullptr || a.slot_mapping == nullptr || a.k_cache == nullptr || a.v_cache == nullptr) {
    return cudaErrorInvalidValue;
  }
  if (a.num_tokens < 0 || a.num_slots <= 0 || a.k_row <= 0 || a.v_row <= 0) return cudaErrorInvalidValue;
  if (a.kv_type != GgmlType::F16 && a.kv_type != GgmlType::Q8_0) return cudaErrorInvalidValue;
  if (a.kv_type == GgmlType::Q8_0 && (a.k_row % kQK8_0 != 0 || a.v_row % kQK8_0 != 0)) return cudaErrorInvalidValue;
  if (!is_aligned(a.k, 4) || !is_aligned(a.v, 4) || !is_aligned(a.slot_mapping, 8) || !is_aligned(a.k_cache, 2) ||
      !is_aligned(a.v_cache, 2)) {
    return cudaErrorInvalidValue;
  }
  return cudaSuccess;
}

cudaError_t write_kv_paged_cuda(const WriteKvCudaArgs& a, cudaStream_t stream) {
  if (const cudaError_t e = write_kv_paged_cuda_check(a); e != cudaSuccess) return e;
  if (a.num_tokens == 0) return cudaSuccess;
  if (const cudaError_t e = launch_write(a.k, a.slot_mapping, a.num_tokens, a.k_cache, a.num_slots, a.k_row, a.kv_type,
                                         stream);
      e != cudaSuccess) {
    return e;
  }
  return launch_write(a.v, a.slot_mapping, a.num_tokens, a.v_cache, a.num_slots, a.v_row, a.kv_type, stream);
}

cudaError_t copy_kv_blocks_cuda_check(const CopyKvBlocksCudaArgs& a) {
  if (a.pool == nullptr || a.copies == nullptr || a.num_pools <= 0 || a.block_units <= 0 || a.num_blocks <= 0 ||
      a.num_copies < 0) {
    return cudaErrorInvalidValue;
  }
  if (a.num_pools > 1 && a.pool_stride_units < a.num_blocks * a.block_units) return cudaErrorInvalidValue;
  if (!is_aligned(a.pool, 2) || !is_aligned(a.copies, 4)) return cudaErrorInvalidValue;
  return cudaSuccess;
}

cudaError_t copy_kv_blocks_cuda(const CopyKvBlocksCudaArgs& a, cudaStream_t stream) {
  if (const cudaError_t e = copy_kv_blocks_cuda_check(a); e != cudaSuccess) return e;
  if (a.num_copies == 0) return cudaSuccess;
  const int64_t stride = a.num_pools > 1 ? a.pool_stride_units : 0;
  const unsigned copies = static_cast<unsigned>(std::min(a.num_copies, kMaxGridYZ));
  const unsigned pools = static_cast<unsigned>(std::min(a.num_pools, kMaxGridYZ));
  // 8 uint16 units = 16 bytes per thread when every block (and pool) starts 16-byte aligned.
  if (a.block_units % 8 == 0 && stride % 8 == 0 && is_aligned(a.pool, 16)) {
    const int64_t elems = a.block_units / 8;
    IWB_LAUNCH(copy_blocks_kernel<uint4>, dim3(grid_for(elems, kThreads, 256), copies, pools), kThreads, 0, stream,
               reinterpret_cast<uint4*>(a.pool), a.num_pools, stride / 8, elems, a.num_blocks, a.copies, a.num_copies);
  } else {
    IWB_LAUNCH(copy_blocks_kernel<uint16_t>, dim3(grid_for(a.block_units, kThreads, 256), copies, pools), kThreads, 0,
               stream, a.pool, a.num_pools, stride, a.block_units, a.num_blocks, a.copies, a.num_copies);
  }
  return cudaGetLastError();
}

}  // namespace iwb
