// status_from: CUDA runtime and cuBLAS error codes turned into Status values with a message.
#include "backend/cuda/cuda_status.h"

#include <cstdio>

namespace iwb::cuda {

std::string format_device_bytes(uint64_t bytes) {
  char text[32];
  if (bytes >= (uint64_t{1} << 30)) {
    std::snprintf(text, sizeof text, "%.2f GiB", static_cast<double>(bytes) / static_cast<double>(uint64_t{1} << 30));
  } else {
    std::snprintf(text, sizeof text, "%.1f MiB", static_cast<double>(bytes) / static_cast<double>(1u << 20));
  }
  return text;
}

Status status_from(cudaError_t error, const std::string& what) {
  if (error == cudaSuccess) return {};
  const std::string detail = std::string(cudaGetErrorName(error)) + ": " + cudaGetErrorString(error);
  const ErrorCode code = error == cudaErrorMemoryAllocation ? ErrorCode::OutOfMemory : ErrorCode::DeviceError;
  return make_error(code, what + " failed (" + detail + ")");
}

Status status_from(cublasStatus_t status, const std::string& what) {
  if (status == CUBLAS_STATUS_SUCCESS) return {};
  const ErrorCode code = status == CUBLAS_STATUS_ALLOC_FAILED ? ErrorCode::OutOfMemory : ErrorCode::DeviceError;
  return make_error(code, what + " failed (cuBLAS " + cublasGetStatusName(status) + ": " + cublasGetStatusString(status) +
                              ")");
}

}  // namespace iwb::cuda
