// CUDA runtime and cuBLAS results as Status values: every call the backend makes goes through
// these, so a failing call or launch becomes an error naming what was being done, never an abort.
#pragma once

#include "iwb/engine/status.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <string>

namespace iwb::cuda {

// DeviceError "cuda:N: <what> failed (cudaErrorX: text)", or OutOfMemory for allocation errors.
Status status_from(cudaError_t error, const std::string& what);
Status status_from(cublasStatus_t status, const std::string& what);

// "12.5 MiB", "3.20 GiB".
std::string format_device_bytes(uint64_t bytes);

}  // namespace iwb::cuda

// Returns the Status of a failing CUDA/cuBLAS call from the enclosing function.
#define IWB_CUDA_TRY(call, what)                                            \
  do {                                                                      \
    if (::iwb::Status iwb_cuda_status_ = ::iwb::cuda::status_from((call), (what)); \
        !iwb_cuda_status_.is_ok()) {                                        \
      return iwb_cuda_status_;                                              \
    }                                                                       \
  } while (0)
