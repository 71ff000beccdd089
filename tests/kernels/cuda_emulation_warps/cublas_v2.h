// Host stand-in for <cublas_v2.h> (see cuda_runtime.h here): the handle calls and cublasGemmEx
// as the CUDA backend uses them, column-major as cuBLAS, f32/f16/bf16 operands with f32
// accumulation, run on the handle's stream (kept for a graph while that stream captures).
#pragma once

#include "cuda_runtime.h"
#include "iwb/kernels/dequantize.h"

#include <cstdint>
#include <vector>

typedef enum {
  CUBLAS_STATUS_SUCCESS = 0,
  CUBLAS_STATUS_NOT_INITIALIZED = 1,
  CUBLAS_STATUS_ALLOC_FAILED = 3,
  CUBLAS_STATUS_INVALID_VALUE = 7,
  CUBLAS_STATUS_NOT_SUPPORTED = 15
} cublasStatus_t;
typedef enum { CUBLAS_OP_N = 0, CUBLAS_OP_T = 1 } cublasOperation_t;
typedef enum { CUDA_R_32F = 0, CUDA_R_16F = 2, CUDA_R_16BF = 14 } cudaDataType_t;
typedef enum { CUBLAS_COMPUTE_32F = 68 } cublasComputeType_t;
typedef enum { CUBLAS_GEMM_DEFAULT = -1 } cublasGemmAlgo_t;

struct cublasContext {
  cudaStream_t stream = nullptr;
};
typedef cublasContext* cublasHandle_t;

inline cublasStatus_t cublasCreate(cublasHandle_t* handle) {
  *handle = new cublasContext;
  return CUBLAS_STATUS_SUCCESS;
}
inline cublasStatus_t cublasDestroy(cublasHandle_t handle) {
  delete handle;
  return CUBLAS_STATUS_SUCCESS;
}
inline cublasStatus_t cublasSetStream(cublasHandle_t handle, cudaStream_t stream) {
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  handle->stream = stream;
  return CUBLAS_STATUS_SUCCESS;
}
inline cublasStatus_t cublasSetWorkspace(cublasHandle_t handle, void*, size_t) {
  return handle != nullptr ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_NOT_INITIALIZED;
}
inline const char* cublasGetStatusName(cublasStatus_t status) {
  switch (status) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    default: return "CUBLAS_STATUS_NOT_SUPPORTED";
  }
}
inline const char* cublasGetStatusString(cublasStatus_t status) {
  switch (status) {
    case CUBLAS_STATUS_SUCCESS: return "success";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "the library was not initialized";
    case CUBLAS_STATUS_ALLOC_FAILED: return "the resource allocation failed";
    case CUBLAS_STATUS_INVALID_VALUE: return "an invalid numeric value was used as an argument";
    default: return "the functionality requested is not supported";
  }
}

namespace iwb_emulation {

inline float blas_load(const void* base, cudaDataType_t type, int64_t index) {
  switch (type) {
    case CUDA_R_16F: return iwb::fp16_to_f32(static_cast<const uint16_t*>(base)[index]);
    case CUDA_R_16BF: return iwb::bf16_to_f32(static_cast<const uint16_t*>(base)[index]);
    default: return static_cast<const float*>(base)[index];
  }
}
inline void blas_store(void* base, cudaDataType_t type, int64_t index, float value) {
  switch (type) {
    case CUDA_R_16F: static_cast<uint16_t*>(base)[index] = iwb::f32_to_fp16(value); break;
    case CUDA_R_16BF: static_cast<uint16_t*>(base)[index] = iwb::f32_to_bf16(value); break;
    default: static_cast<float*>(base)[index] = value; break;
  }
}

}  // namespace iwb_emulation

// C (m x n) = alpha op(A) op(B) + beta C, every matrix column-major with its leading dimension.
inline cublasStatus_t cublasGemmEx(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m,
                                   int n, int k, const void* alpha, const void* a, cudaDataType_t a_type, int lda,
                                   const void* b, cudaDataType_t b_type, int ldb, const void* beta, void* c,
                                   cudaDataType_t c_type, int ldc, cublasComputeType_t compute, cublasGemmAlgo_t) {
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (m < 0 || n < 0 || k < 0 || compute != CUBLAS_COMPUTE_32F) return CUBLAS_STATUS_INVALID_VALUE;
  if (lda < std::max(1, transa == CUBLAS_OP_N ? m : k) || ldb < std::max(1, transb == CUBLAS_OP_N ? k : n) ||
      ldc < std::max(1, m)) {
    return CUBLAS_STATUS_INVALID_VALUE;
  }
  const float al = *static_cast<const float*>(alpha), be = *static_cast<const float*>(beta);
  iwb_emulation::on_stream(handle->stream, [=] {
    using iwb_emulation::blas_load;
    std::vector<float> column(static_cast<size_t>(k));
    for (int j = 0; j < n; ++j) {
      for (int l = 0; l < k; ++l) {
        column[static_cast<size_t>(l)] =
            blas_load(b, b_type, transb == CUBLAS_OP_N ? l + int64_t{j} * ldb : j + int64_t{l} * ldb);
      }
      for (int i = 0; i < m; ++i) {
        float sum = 0;
        for (int l = 0; l < k; ++l) {
          sum += blas_load(a, a_type, transa == CUBLAS_OP_N ? i + int64_t{l} * lda : l + int64_t{i} * lda) *
                 column[static_cast<size_t>(l)];
        }
        const int64_t at = i + int64_t{j} * ldc;
        // beta 0 ignores C's old contents (NaN included), as cuBLAS does.
        const float old = be != 0.0f ? be * blas_load(c, c_type, at) : 0.0f;
        iwb_emulation::blas_store(c, c_type, at, al * sum + old);
      }
    }
  });
  return CUBLAS_STATUS_SUCCESS;
}
