// GPU ceilings: device-to-device copy bandwidth and cuBLAS GEMM throughput (f16 and bf16 inputs,
// f32 accumulation), timed with CUDA events. Every call is checked; failures are values.
#include "iwb/engine/backend/device_info.h"
#include "iwb/engine/profile/machine_probe.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <string>

namespace iwb {
namespace {

Status cuda_error(const char* what, cudaError_t e) {
  return make_error(ErrorCode::DeviceError, std::string(what) + ": " + cudaGetErrorString(e));
}

// Frees device buffers and events however the probe ends.
struct DeviceScratch {
  void* a = nullptr;
  void* b = nullptr;
  void* c = nullptr;
  cudaEvent_t start = nullptr;
  cudaEvent_t stop = nullptr;
  cublasHandle_t blas = nullptr;
  ~DeviceScratch() {
    cudaFree(a);
    cudaFree(b);
    cudaFree(c);
    if (start) cudaEventDestroy(start);
    if (stop) cudaEventDestroy(stop);
    if (blas) cublasDestroy(blas);
  }
};

Result<double> time_events(DeviceScratch& s) {
  if (cudaError_t e = cudaEventSynchronize(s.stop); e != cudaSuccess) return cuda_error("cudaEventSynchronize", e);
  float ms = 0;
  if (cudaError_t e = cudaEventElapsedTime(&ms, s.start, s.stop); e != cudaSuccess) return cuda_error("cudaEventElapsedTime", e);
  return static_cast<double>(ms) / 1000.0;
}

Result<double> measure_copy(DeviceScratch& s, size_t bytes) {
  double best = 0;
  for (int rep = 0; rep < 6; ++rep) {
    cudaEventRecord(s.start);
    if (cudaError_t e = cudaMemcpyAsync(s.b, s.a, bytes, cudaMemcpyDeviceToDevice); e != cudaSuccess) {
      return cuda_error("cudaMemcpyAsync", e);
    }
    cudaEventRecord(s.stop);
    auto t = time_events(s);
    if (!t) return t.status();
    if (rep > 0) best = std::max(best, 2.0 * static_cast<double>(bytes) / *t);  // first run warms up
  }
  return best;
}

Result<double> measure_gemm(DeviceScratch& s, cudaDataType_t type, int n) {
  const float alpha = 1.0f;
  const float beta = 0.0f;
  double best = 0;
  for (int rep = 0; rep < 6; ++rep) {
    cudaEventRecord(s.start);
    const cublasStatus_t st = cublasGemmEx(s.blas, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &alpha, s.a, type, n, s.b, type,
                                           n, &beta, s.c, type, n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    if (st != CUBLAS_STATUS_SUCCESS) {
      return make_error(ErrorCode::DeviceError, std::string("cublasGemmEx: ") + cublasGetStatusString(st));
    }
    cudaEventRecord(s.stop);
    auto t = time_events(s);
    if (!t) return t.status();
    if (rep > 0) best = std::max(best, 2.0 * n * static_cast<double>(n) * n / *t);
  }
  return best;
}

Result<ProbeResult> probe_device(const ComputeDeviceInfo& info, int device) {
  if (cudaError_t e = cudaSetDevice(device); e != cudaSuccess) return cuda_error("cudaSetDevice", e);
  ProbeResult r;
  r.device_id = info.id;
  r.device_name = info.name;
  r.date = current_utc_iso8601();
  DeviceScratch s;
  // 1 GiB copies: far beyond the L2 cache (50 MB on Hopper). GEMM of 8192^3 reuses the buffers.
  const size_t bytes = size_t{1} << 30;
  for (void** p : {&s.a, &s.b, &s.c}) {
    if (cudaError_t e = cudaMalloc(p, bytes); e != cudaSuccess) return cuda_error("cudaMalloc (probe buffers)", e);
  }
  if (cudaError_t e = cudaMemset(s.a, 0, bytes); e != cudaSuccess) return cuda_error("cudaMemset", e);
  if (cudaError_t e = cudaMemset(s.b, 0, bytes); e != cudaSuccess) return cuda_error("cudaMemset", e);
  if (cudaEventCreate(&s.start) != cudaSuccess || cudaEventCreate(&s.stop) != cudaSuccess) {
    return make_error(ErrorCode::DeviceError, "cudaEventCreate failed");
  }
  auto copy = measure_copy(s, bytes);
  if (!copy) return copy.status();
  r.copy_bytes_per_s = *copy;
  r.buffer_bytes = static_cast<double>(bytes);
  if (cublasCreate(&s.blas) != CUBLAS_STATUS_SUCCESS) return make_error(ErrorCode::DeviceError, "cublasCreate failed");
  for (auto [type, name] : {std::pair{CUDA_R_16BF, "bf16 GEMM 8192^3, cuBLAS"}, std::pair{CUDA_R_16F, "f16 GEMM 8192^3, cuBLAS"}}) {
    auto flops = measure_gemm(s, type, 8192);
    if (!flops) return flops.status();
    if (*flops > r.peak_flops) {
      r.peak_flops = *flops;
      r.peak_flops_kind = name;
    }
  }
  return r;
}

}  // namespace

Result<std::vector<ProbeResult>> probe_cuda_devices() {
  auto devices = list_cuda_devices();
  if (!devices) return devices.status();
  std::vector<ProbeResult> out;
  for (size_t i = 0; i < devices->size(); ++i) {
    auto r = probe_device((*devices)[i], static_cast<int>(i));
    if (!r) return make_error(r.status().code(), (*devices)[i].id + ": " + r.status().message());
    out.push_back(std::move(r.value()));
  }
  return out;
}

}  // namespace iwb
