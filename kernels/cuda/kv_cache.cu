// KV cache writes and copy-on-write block copies on the GPU (kv_cache_cuda.h). F16 writes are
// one thread per value (__float2half_rn rounds to nearest even, as f32_to_fp16); quantized
// sides give each (token, KV head) row to a warp, which rotates it and writes the CPU writer's
// blocks bit for bit (FP8: its bytes); FP8 scales can be calibrated on the device first.
#include "iwb/kernels/cuda/kv_cache_cuda.h"

#include "cuda_common.cuh"
#include "iwb/kernels/paged_attention.h"
#include "kv_quant.cuh"

#include <cuda_fp16.h>

#include <cmath>

namespace iwb {
namespace {

using namespace cuda_detail;

constexpr int kThreads = 256;

// The f16 sides of one write: keys (grid z 0) and, in the same launch when both are f16, values
// (grid z 1), so a decode step spends one launch a layer on its KV write, not two.
struct F16Sides {
  const float* src[2];
  uint16_t* cache[2];
  int64_t row[2];
};

__global__ void write_kv_f16_kernel(F16Sides sides, const int64_t* __restrict__ slot_mapping, int64_t num_tokens,
                                    int64_t num_slots) {
  cuda_detail::wait_for_prior_grids();
  // Constant indices only (a parameter indexed at run time goes through local memory).
  const bool is_value = blockIdx.z == 1;
  const float* __restrict__ src = is_value ? sides.src[1] : sides.src[0];
  uint16_t* __restrict__ cache = is_value ? sides.cache[1] : sides.cache[0];
  const int64_t row = is_value ? sides.row[1] : sides.row[0];
  for (int64_t t = blockIdx.y; t < num_tokens; t += gridDim.y) {
    const int64_t slot = slot_mapping[t];
    if (slot < 0 || slot >= num_slots) continue;  // padding, or a slot the pool does not have
    for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < row;
         i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
      cache[slot * row + i] = __half_as_ushort(__float2half_rn(src[t * row + i]));
    }
  }
}

// One warp per (token, KV head) row: the row goes to the warp's shared memory, is rotated there
// (block types), then each lane quantizes whole 32-value blocks one after the other exactly as
// ggml's quantize_row_*_ref (kv_quant.cuh), or converts FP8 values. The loop bounds are uniform
// across each warp, so its __syncwarp calls are too.
constexpr int kWriteWarps = 4;

__global__ void __launch_bounds__(kWriteWarps * 32)
    write_kv_quant_kernel(const float* __restrict__ src, const int64_t* __restrict__ slot_mapping, int64_t num_tokens,
                          uint16_t* __restrict__ cache, int64_t num_slots, int64_t row, int head_dim, int64_t num_heads,
                          int code, int rot, float norm, const float* __restrict__ scale) {
  cuda_detail::wait_for_prior_grids();
  IWB_DYNAMIC_SHARED(float, rows_s);  // [kWriteWarps x head_dim]
  const int warp = static_cast<int>(threadIdx.x / 32), lane = static_cast<int>(threadIdx.x % 32);
  float* x = rows_s + warp * head_dim;
  const int64_t head_units = code == kKvF8 ? head_dim / 2 : head_dim / 32 * kv_block_units(code);
  const float fp8_scale = scale != nullptr ? *scale : 1.0f;
  const int64_t items = num_tokens * num_heads;
  for (int64_t item = static_cast<int64_t>(blockIdx.x) * kWriteWarps + warp; item < items;
       item += static_cast<int64_t>(gridDim.x) * kWriteWarps) {
    const int64_t t = item / num_heads, g = item % num_heads;
    const int64_t slot = slot_mapping[t];
    if (slot < 0 || slot >= num_slots) continue;  // padding, or a slot the pool does not have
    for (int i = lane; i < head_dim; i += 32) x[i] = src[t * row + g * head_dim + i];
    __syncwarp();
    if (rot > 0) warp_hadamard(x, head_dim, rot, norm, lane);
    uint16_t* dst = cache + slot * head_units * num_heads + g * head_units;
    if (code == kKvF8) {
      auto* bytes = reinterpret_cast<uint8_t*>(dst);
      for (int i = lane; i < head_dim; i += 32) bytes[i] = f32_to_e4m3_device(x[i] / fp8_scale);
    } else {
      for (int b = lane; b < head_dim / 32; b += 32)
        quantize_block_ref(code, x + 32 * b, dst + b * kv_block_units(code));
    }
    __syncwarp();  // x is rewritten by the next row
  }
}

// vLLM's calc_kv_scales on the device: *scale = max |x| / constant over the tokens written (1
// when that is 0 or not finite), one thread block.
constexpr int kScaleThreads = 1024;

__global__ void __launch_bounds__(kScaleThreads)
    kv_scale_kernel(const float* __restrict__ src, const int64_t* __restrict__ slot_mapping, int64_t num_tokens,
                    int64_t num_slots, int64_t row, float constant, float* __restrict__ scale) {
  cuda_detail::wait_for_prior_grids();
  __shared__ float partial[kScaleThreads / 32];
  float amax = 0.0f;
  for (int64_t t = 0; t < num_tokens; ++t) {
    const int64_t slot = slot_mapping[t];
    if (slot < 0 || slot >= num_slots) continue;
    for (int64_t i = threadIdx.x; i < row; i += blockDim.x) amax = fmaxf(amax, fabsf(src[t * row + i]));
  }
  amax = warp_max(amax);
  if (threadIdx.x % 32 == 0) partial[threadIdx.x / 32] = amax;
  __syncthreads();
  if (threadIdx.x < 32) {
    float m = threadIdx.x < blockDim.x / 32 ? partial[threadIdx.x] : 0.0f;
    m = warp_max(m);
    if (threadIdx.x == 0) {
      const float s = m / constant;
      *scale = s > 0.0f && s <= 3.402823466e+38f ? s : 1.0f;
    }
  }
}

struct WriteSide {
  const float* src;
  uint16_t* cache;
  int64_t row;
  GgmlType type;
  bool is_key;
  float* scale;
};

cudaError_t launch_write(const WriteKvCudaArgs& a, const WriteSide& side, cudaStream_t stream) {
  const unsigned rows = static_cast<unsigned>(std::min(a.num_tokens, kMaxGridYZ));
  if (side.type == GgmlType::F16) {
    const F16Sides sides{{side.src, side.src}, {side.cache, side.cache}, {side.row, side.row}};
    IWB_LAUNCH(write_kv_f16_kernel, dim3(grid_for(side.row, kThreads, 64), rows), kThreads, 0, stream, sides,
               a.slot_mapping, a.num_tokens, a.num_slots);
    return cudaGetLastError();
  }
  const int64_t head_dim = side.row / a.num_kv_heads;
  const bool is_fp8 = side.type == GgmlType::F8_E4M3;
  if (is_fp8 && a.calculate_scales && side.scale != nullptr) {
    IWB_LAUNCH(kv_scale_kernel, 1, kScaleThreads, 0, stream, side.src, a.slot_mapping, a.num_tokens, a.num_slots,
               side.row, side.is_key ? kKScaleConstant : kVScaleConstant, side.scale);
    if (const cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
  }
  const int64_t rot = a.is_rotated ? kv_rotation_size(side.type, head_dim, side.is_key) : 0;
  // The CPU's 1 / sqrt(size), in f32 as hadamard_rotate computes it.
  const float norm = rot > 0 ? 1.0f / std::sqrt(static_cast<float>(rot)) : 1.0f;
  const size_t shared = static_cast<size_t>(kWriteWarps * head_dim) * sizeof(float);
  IWB_LAUNCH(write_kv_quant_kernel, grid_for(a.num_tokens * a.num_kv_heads, kWriteWarps, 4096), kWriteWarps * 32,
             shared, stream, side.src, a.slot_mapping, a.num_tokens, side.cache, a.num_slots, side.row,
             static_cast<int>(head_dim), a.num_kv_heads, static_cast<int>(kv_code(side.type)), static_cast<int>(rot),
             norm, is_fp8 ? side.scale : nullptr);
  return cudaGetLastError();
}

// Copies block src -> dst of every pool; T is uint4 (16-byte) when sizes and addresses allow.
template <typename T>
__global__ void copy_blocks_kernel(T* pool, int64_t num_pools, int64_t pool_stride, int64_t block_elems,
                                   int64_t num_blocks, const int32_t* __restrict__ copies, int64_t num_copies) {
  cuda_detail::wait_for_prior_grids();
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
  if (a.num_kv_heads <= 0 || a.k_row % a.num_kv_heads != 0 || a.v_row % a.num_kv_heads != 0)
    return cudaErrorInvalidValue;
  // Per head: a quantized side's rows, rotation pieces and blocks stay within one head (and
  // one head's row fits the write kernel's shared memory).
  const int64_t k_head = a.k_row / a.num_kv_heads, v_head = a.v_row / a.num_kv_heads;
  if (kv_row_units(a.k_type, k_head) == 0 || kv_row_units(a.v_type, v_head) == 0) return cudaErrorInvalidValue;
  if ((a.k_type != GgmlType::F16 && k_head > 2048) || (a.v_type != GgmlType::F16 && v_head > 2048)) {
    return cudaErrorInvalidValue;
  }
  if (!is_aligned(a.k, 4) || !is_aligned(a.v, 4) || !is_aligned(a.slot_mapping, 8) || !is_aligned(a.k_cache, 2) ||
      !is_aligned(a.v_cache, 2) || !is_aligned(a.k_scale, 4) || !is_aligned(a.v_scale, 4)) {
    return cudaErrorInvalidValue;
  }
  return cudaSuccess;
}

cudaError_t write_kv_paged_cuda(const WriteKvCudaArgs& a, cudaStream_t stream) {
  if (const cudaError_t e = write_kv_paged_cuda_check(a); e != cudaSuccess) return e;
  if (a.num_tokens == 0) return cudaSuccess;
  if (a.k_type == GgmlType::F16 && a.v_type == GgmlType::F16) {  // both sides in one launch
    const F16Sides sides{{a.k, a.v}, {a.k_cache, a.v_cache}, {a.k_row, a.v_row}};
    const auto rows = static_cast<unsigned>(std::min(a.num_tokens, kMaxGridYZ));
    IWB_LAUNCH(write_kv_f16_kernel, dim3(grid_for(std::max(a.k_row, a.v_row), kThreads, 64), rows, 2), kThreads, 0,
               stream, sides, a.slot_mapping, a.num_tokens, a.num_slots);
    return cudaGetLastError();
  }
  if (const cudaError_t e = launch_write(a, {a.k, a.k_cache, a.k_row, a.k_type, true, a.k_scale}, stream);
      e != cudaSuccess) {
    return e;
  }
  return launch_write(a, {a.v, a.v_cache, a.v_row, a.v_type, false, a.v_scale}, stream);
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
