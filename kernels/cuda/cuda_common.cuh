// Small device helpers shared by the cudaops kernels: warp/block reductions, alignment checks
// and grid sizing. Reductions use full-warp masks, so every lane of a warp must call them.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>

// Kernel launches and dynamic shared memory go through these macros so the device code also
// builds as host C++ against tests/kernels/cuda_emulation_warps/ (which defines
// IWB_CUDA_EMULATION) and runs on CPU fibers in tests on machines without a GPU.
#if defined(IWB_CUDA_EMULATION)
#define IWB_LAUNCH(kernel, grid, block, shared, stream, ...) \
  ::iwb_emulation::launch((grid), (block), (shared), (kernel), __VA_ARGS__)
#define IWB_DYNAMIC_SHARED(type, name) type* name = reinterpret_cast<type*>(::iwb_emulation::dynamic_shared())
#else
#define IWB_LAUNCH(kernel, grid, block, shared, stream, ...) kernel<<<(grid), (block), (shared), (stream)>>>(__VA_ARGS__)
#define IWB_DYNAMIC_SHARED(type, name) extern __shared__ __align__(128) type name[]
#endif

namespace iwb::cuda_detail {

inline constexpr unsigned kFullMask = 0xFFFFFFFFu;
inline constexpr int64_t kMaxGridX = 2147483647;  // 2^31 - 1
inline constexpr int64_t kMaxGridYZ = 65535;

__device__ inline float warp_sum(float v) {
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(kFullMask, v, offset);
  return v;
}

__device__ inline float warp_max(float v) {
  for (int offset = 16; offset > 0; offset >>= 1) v = fmaxf(v, __shfl_xor_sync(kFullMask, v, offset));
  return v;
}

// Sum (or, with kIsMax, maximum) over the whole thread block (blockDim.x a multiple of 32, at
// most 1024), returned to every thread. Contains __syncthreads: call from all threads, not
// under divergent control flow.
template <bool kIsMax>
__device__ inline float block_reduce(float v) {
  __shared__ float partial[32];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  v = kIsMax ? warp_max(v) : warp_sum(v);
  __syncthreads();  // a previous call's readers are done with `partial`
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  const int num_warps = static_cast<int>(blockDim.x / 32);
  const float all = lane < num_warps ? partial[lane] : (kIsMax ? -INFINITY : 0.0f);
  return kIsMax ? warp_max(all) : warp_sum(all);
}

__device__ inline float block_sum(float v) { return block_reduce<false>(v); }
__device__ inline float block_max(float v) { return block_reduce<true>(v); }

// Inclusive scan (sum, or max with kIsMax) over the whole thread block (blockDim.x a multiple of
// 32, at most 1024); warp_totals is 32 ints of shared memory. Call from all threads.
template <bool kIsMax>
__device__ inline int block_inclusive_scan(int v, int* warp_totals) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int num_warps = static_cast<int>(blockDim.x / 32);
  for (int offset = 1; offset < 32; offset <<= 1) {
    const int other = __shfl_up_sync(kFullMask, v, offset);
    if (lane >= offset) v = kIsMax ? max(v, other) : v + other;
  }
  if (lane == 31) warp_totals[warp] = v;
  __syncthreads();
  if (warp == 0) {
    int total = lane < num_warps ? warp_totals[lane] : (kIsMax ? INT_MIN : 0);
    for (int offset = 1; offset < 32; offset <<= 1) {
      const int other = __shfl_up_sync(kFullMask, total, offset);
      if (lane >= offset) total = kIsMax ? max(total, other) : total + other;
    }
    if (lane < num_warps) warp_totals[lane] = total;
  }
  __syncthreads();
  if (warp > 0) {
    const int before = warp_totals[warp - 1];
    v = kIsMax ? max(v, before) : v + before;
  }
  __syncthreads();  // warp_totals may be reused by the next scan
  return v;
}

inline bool is_aligned(const void* p, uintptr_t bytes) { return reinterpret_cast<uintptr_t>(p) % bytes == 0; }

// Blocks of `threads` covering n items, capped (kernels loop with a grid stride past the cap).
inline unsigned grid_for(int64_t n, int threads, int64_t cap = 65536) {
  return static_cast<unsigned>(std::max<int64_t>(1, std::min<int64_t>((n + threads - 1) / threads, cap)));
}

}  // namespace iwb::cuda_detail
