// Owning handles for device memory, page-locked host memory, a stream and events: freed in
// their destructors, moved not copied. Allocation errors come back as OutOfMemory naming the
// purpose and the size ("the KV pool (12.3 GiB) on cuda:0: ..."), plus the device's free memory.
#pragma once

#include "iwb/engine/status.h"

#include <cuda_runtime.h>

#include <cstdint>
#include <string>
#include <utility>

namespace iwb::cuda {

// Memory that `Free` (cudaFree or cudaFreeHost) returns when the handle dies; moved, not copied.
template <cudaError_t (*Free)(void*)>
class CudaMemory {
 public:
  CudaMemory() = default;
  CudaMemory(CudaMemory&& o) noexcept : m_data(std::exchange(o.m_data, nullptr)), m_bytes(std::exchange(o.m_bytes, 0)) {}
  CudaMemory& operator=(CudaMemory&& o) noexcept {
    if (this != &o) {
      release();
      m_data = std::exchange(o.m_data, nullptr);
      m_bytes = std::exchange(o.m_bytes, 0);
    }
    return *this;
  }
  CudaMemory(const CudaMemory&) = delete;
  CudaMemory& operator=(const CudaMemory&) = delete;
  ~CudaMemory() { release(); }

  void* data() const { return m_data; }
  template <typename T>
  T* as() const { return static_cast<T*>(m_data); }
  uint64_t bytes() const { return m_bytes; }

 protected:
  CudaMemory(void* data, uint64_t bytes) : m_data(data), m_bytes(bytes) {}

 private:
  void release() {
    if (m_data != nullptr) Free(m_data);  // an error here has nobody to go to: the context is gone
    m_data = nullptr;
    m_bytes = 0;
  }
  void* m_data = nullptr;
  uint64_t m_bytes = 0;
};

class DeviceBuffer : public CudaMemory<cudaFree> {
 public:
  DeviceBuffer() = default;
  // cudaMalloc of `bytes` (0: nothing); `purpose` names it in the error.
  static Result<DeviceBuffer> allocate(uint64_t bytes, const std::string& purpose, int device);

 private:
  using CudaMemory::CudaMemory;
};

// Page-locked host memory (cudaMallocHost), for asynchronous copies.
class PinnedBuffer : public CudaMemory<cudaFreeHost> {
 public:
  PinnedBuffer() = default;
  static Result<PinnedBuffer> allocate(uint64_t bytes, const std::string& purpose);

 private:
  using CudaMemory::CudaMemory;
};

// A non-blocking stream (no implicit synchronisation with the legacy default stream).
class Stream {
 public:
  Stream() = default;
  Stream(Stream&& o) noexcept : m_stream(std::exchange(o.m_stream, nullptr)) {}
  Stream& operator=(Stream&& o) noexcept {
    if (this != &o) {
      release();
      m_stream = std::exchange(o.m_stream, nullptr);
    }
    return *this;
  }
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  ~Stream() { release(); }

  static Result<Stream> create();
  cudaStream_t get() const { return m_stream; }

 private:
  void release();
  cudaStream_t m_stream = nullptr;
};

// Free and total memory of the current device (0, 0 when the query fails).
std::pair<uint64_t, uint64_t> device_memory_info();

}  // namespace iwb::cuda
