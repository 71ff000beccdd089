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
  ::iwb_emulation::launch_on((stream), (grid), (block), (shared), (kernel), __VA_ARGS__)
#define IWB_DYNAMIC_SHARED(type, name) type* name = reinterpret_cast<type*>(::iwb_emulation::dynamic_shared())
#else
#include "iwb/kernels/cuda/launch_cuda.h"

#include <utility>
#define IWB_LAUNCH(kernel, grid, block, shared, stream, ...) \
  ::iwb::cuda_detail::launch_kernel((kernel), (grid), (block), (shared), (stream), __VA_ARGS__)
#define IWB_DYNAMIC_SHARED(type, name) extern __shared__ __align__(128) type name[]
#endif

namespace iwb::cuda_detail {

#if !defined(IWB_CUDA_EMULATION)
// Every kernel goes through here: with programmatic dependent launch on (launch_cuda.h), the
// launch carries the attribute that lets it start while the kernel before it in the stream is
// still running (what the kernels' wait_for_prior_grids below makes safe). Errors reach
// cudaGetLastError as a <<<>>> launch's do.
template <typename... Params, typename... Args>
inline void launch_kernel(void (*kernel)(Params...), dim3 grid, dim3 block, size_t shared, cudaStream_t stream,
                          Args&&... args) {
  cudaLaunchAttribute attribute{};
  attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute.val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = shared;
  config.stream = stream;
  config.attrs = &attribute;
  config.numAttrs = cuda_programmatic_launch() ? 1 : 0;
  (void)cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...);
}
#endif

// Programmatic dependent launch (Hopper and later). A kernel launched with it may start while
// the kernel before it is still running, so every kernel calls this before it reads anything an
// earlier kernel wrote or writes anything an earlier kernel may still read: first thing, in
// every thread, before any early return (the CPU emulation fails a launch in which a thread
// ended without it). It returns once the grids before have finished and their writes are
// visible, and then lets the next kernel launch: that one's threads wait here in turn, and
// meanwhile its products prefetch their weights (prefetch_weights_l2). Without the attribute
// both instructions do nothing.
__device__ __forceinline__ void wait_for_prior_grids() {
#if defined(IWB_CUDA_EMULATION)
  ::iwb_emulation::note_grid_dependency_wait();
#elif defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// The most a thread block asks L2 for ahead of its product: a first wave of about 2,000 blocks
// on an H100 then prefetches some 16 MB, about what the device reads in the few microseconds a
// kernel's tail lasts, and well inside its 50 MB L2.
inline constexpr int64_t kPrefetchBytesPerBlock = 8192;

// The block's threads ask L2 for the first kPrefetchBytesPerBlock of [bytes, bytes + n): weights
// only, which no kernel writes, so it may run before wait_for_prior_grids. (The emulation reads
// the range's first and last byte instead, so ASan checks the range.)
__device__ __forceinline__ void prefetch_weights_l2(const void* bytes, int64_t n) {
  n = n < kPrefetchBytesPerBlock ? n : kPrefetchBytesPerBlock;
  if (n <= 0) return;
#if defined(IWB_CUDA_EMULATION)
  ::iwb_emulation::touch(bytes, n);
#elif defined(__CUDA_ARCH__)
  const char* p = static_cast<const char*>(bytes);
  for (int64_t at = static_cast<int64_t>(threadIdx.x) * 128; at < n; at += static_cast<int64_t>(blockDim.x) * 128) {
    asm volatile("prefetch.global.L2 [%0];" ::"l"(p + at));
  }
#endif
}

// prefetch_weights_l2 of a thread block's rows [row0, row0 + rows) of a row-major matrix of
// out_features rows of row_bytes each (the rows past the end left out).
__device__ __forceinline__ void prefetch_rows_l2(const uint8_t* weight, int64_t row_bytes, int64_t row0, int64_t rows,
                                                 int64_t out_features) {
  const int64_t n = out_features - row0 < rows ? out_features - row0 : rows;
  if (n > 0) prefetch_weights_l2(weight + row0 * row_bytes, n * row_bytes);
}

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
