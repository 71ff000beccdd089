// Per-thread working buffers of the kernels (private to kernels/src): grown to the largest
// request once, then reused by every call on that thread, so the token path allocates nothing.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

namespace iwb::detail {

// At least `bytes` bytes, 64-byte aligned, owned by the calling thread. One buffer per Tag:
// buffers a kernel uses at the same time (a GEMM's packed panel and its accumulator) need
// distinct tags. The contents do not survive a larger request.
template <typename Tag>
uint8_t* thread_buffer(size_t bytes) {
  struct Buffer {
    std::unique_ptr<uint8_t[]> data;
    size_t size = 0;
  };
  thread_local Buffer buffer;
  if (buffer.size < bytes) {
    buffer.data.reset(new uint8_t[bytes + 64]);
    buffer.size = bytes;
  }
  const auto p = reinterpret_cast<uintptr_t>(buffer.data.get());
  return reinterpret_cast<uint8_t*>((p + 63) / 64 * 64);
}

}  // namespace iwb::detail
