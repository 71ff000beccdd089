// DeviceBuffer, PinnedBuffer and Stream: allocation with errors that say what and how much.
#include "backend/cuda/cuda_buffers.h"

#include "backend/cuda/cuda_status.h"

namespace iwb::cuda {

std::pair<uint64_t, uint64_t> device_memory_info() {
  size_t free_bytes = 0, total_bytes = 0;
  if (cudaMemGetInfo(&free_bytes, &total_bytes) != cudaSuccess) {
    cudaGetLastError();
    return {0, 0};
  }
  return {free_bytes, total_bytes};
}

Result<DeviceBuffer> DeviceBuffer::allocate(uint64_t bytes, const std::string& purpose, int device) {
  if (bytes == 0) return DeviceBuffer();
  void* data = nullptr;
  if (cudaError_t e = cudaMalloc(&data, bytes); e != cudaSuccess) {
    cudaGetLastError();  // an allocation failure is not sticky; clear it for the next call
    const auto [free_bytes, total_bytes] = device_memory_info();
    Status s = status_from(e, "allocating " + purpose + " (" + format_device_bytes(bytes) + ") on cuda:" +
                                  std::to_string(device));
    return make_error(s.code(), s.message() + "; " + format_device_bytes(free_bytes) + " of " +
                                    format_device_bytes(total_bytes) + " free");
  }
  return DeviceBuffer(data, bytes);
}

Result<PinnedBuffer> PinnedBuffer::allocate(uint64_t bytes, const std::string& purpose) {
  if (bytes == 0) return PinnedBuffer();
  void* data = nullptr;
  if (cudaError_t e = cudaMallocHost(&data, bytes); e != cudaSuccess) {
    cudaGetLastError();
    return status_from(e, "allocating page-locked host memory for " + purpose + " (" + format_device_bytes(bytes) + ")");
  }
  return PinnedBuffer(data, bytes);
}

Result<Stream> Stream::create() {
  Stream s;
  IWB_CUDA_TRY(cudaStreamCreateWithFlags(&s.m_stream, cudaStreamNonBlocking), "creating a CUDA stream");
  return s;
}

void Stream::release() {
  if (m_stream != nullptr) cudaStreamDestroy(m_stream);
  m_stream = nullptr;
}

}  // namespace iwb::cuda
