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

class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(DeviceBuffer&& o) noexcept : m_data(std::exchange(o.m_data, nullptr)), m_bytes(std::exchange(o.m_bytes, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    if (this != &o) {
      release();
      m_data = std::exchange(o.m_data, nullptr);
      m_bytes = std::exchange(o.m_bytes, 0);
    }
    return *this;
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() { release(); }

  // cudaMalloc of `bytes` (0: nothing); `purpose` names it in the error.
  static Result<DeviceBuffer> allocate(uint64_t bytes, const std::string& purpose, int device);

  void* data() const { return m_data; }
  template <typename T>
  T* as() const { return static_cast<T*>(m_data); }
  uint64_t bytes() const { return m_bytes; }

 private:
  void release();
  void* m_data = nullptr;
  uint64_t m_bytes = 0;
};

class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  PinnedBuffer(PinnedBuffer&& o) noexcept : m_data(std::exchange(o.m_data, nullptr)), m_bytes(std::exchange(o.m_bytes, 0)) {}
  PinnedBuffer& operator=(PinnedBuffer&& o) noexcept {
    if (this != &o) {
      release();
      m_data = std::exchange(o.m_data, nullptr);
      m_bytes = std::exchange(o.m_bytes, 0);
    }
    return *this;
  }
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;
  ~PinnedBuffer() { release(); }

  static Result<PinnedBuffer> allocate(uint64_t bytes, const std::string& purpose);

  void* data() const { return m_data; }
  template <typename T>
  T* as() const { return static_cast<T*>(m_data); }
  uint64_t bytes() const { return m_bytes; }

 private:
  void release();
  void* m_data = nullptr;
  uint64_t m_bytes = 0;
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
