// Asynchronous 16-byte copies from global to shared memory (cp.async, sm_80 and later): a thread
// issues a tile's loads and goes on computing while they land, so a kernel can fetch its next
// tile during the products of the current one without holding it in registers. Under
// IWB_CUDA_EMULATION the copy happens at once and the waits are no-ops (the host fibers run the
// same ordering the waits enforce on the GPU).
#pragma once

#include <cuda_runtime.h>

#include <cstring>

namespace iwb::cuda_detail {

#if defined(IWB_CUDA_EMULATION)
// 16 bytes from src to dst, or 16 zero bytes when !is_valid (src is not read then).
inline void cp_async_16(void* dst, const void* src, bool is_valid) {
  if (is_valid) {
    std::memcpy(dst, src, 16);
  } else {
    std::memset(dst, 0, 16);
  }
}
inline void cp_async_commit() {}
template <int kPending>
inline void cp_async_wait() {}
#else
__device__ __forceinline__ void cp_async_16(void* dst, const void* src, bool is_valid) {
  const auto address = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  const int src_bytes = is_valid ? 16 : 0;  // 0: the hardware writes zeros and reads nothing
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(address), "l"(src), "r"(src_bytes));
}
// Closes the group of copies issued since the last commit.
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
// Waits until at most kPending committed groups are still in flight.
template <int kPending>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending));
}
#endif

}  // namespace iwb::cuda_detail
