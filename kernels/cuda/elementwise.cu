// Element-wise GPU kernels of the forward pass (elementwise_cuda.h): residual add, bias rows,
// f32 <-> f16, row gather and soft-capping. Grid-stride loops, one element per thread per step.
#include "iwb/kernels/cuda/elementwise_cuda.h"

#include "cuda_common.cuh"

#include <cuda_fp16.h>

namespace iwb {
namespace {

using namespace cuda_detail;

constexpr int kThreads = 256;

__device__ inline int64_t first_index() { return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; }
__device__ inline int64_t grid_stride() { return static_cast<int64_t>(gridDim.x) * blockDim.x; }

// x += y_scale * y (y_scale 1 gives x + y exactly: the product is exact, fused or not).
__global__ void add_kernel(float* x, const float* y, int64_t n, float y_scale) {
  cuda_detail::wait_for_prior_grids();
  for (int64_t i = first_index(); i < n; i += grid_stride()) x[i] += y_scale * y[i];
}

__global__ void add_bias_rows_kernel(float* x, const float* __restrict__ bias, int64_t num_rows, int64_t row_length) {
  cuda_detail::wait_for_prior_grids();
  for (int64_t r = blockIdx.y; r < num_rows; r += gridDim.y) {
    for (int64_t c = first_index(); c < row_length; c += grid_stride()) x[r * row_length + c] += bias[c];
  }
}

__global__ void f32_to_f16_kernel(const float* __restrict__ src, uint16_t* __restrict__ dst, int64_t n) {
  cuda_detail::wait_for_prior_grids();
  for (int64_t i = first_index(); i < n; i += grid_stride()) dst[i] = __half_as_ushort(__float2half_rn(src[i]));
}

__global__ void f16_to_f32_kernel(const uint16_t* __restrict__ src, float* __restrict__ dst, int64_t n) {
  cuda_detail::wait_for_prior_grids();
  for (int64_t i = first_index(); i < n; i += grid_stride()) dst[i] = __half2float(__ushort_as_half(src[i]));
}

__global__ void gather_rows_kernel(const float* __restrict__ src, int64_t row_length, const int32_t* __restrict__ rows,
                                   int64_t num_rows, float* __restrict__ dst) {
  cuda_detail::wait_for_prior_grids();
  for (int64_t r = blockIdx.y; r < num_rows; r += gridDim.y) {
    const float* from = src + static_cast<int64_t>(rows[r]) * row_length;
    for (int64_t c = first_index(); c < row_length; c += grid_stride()) dst[r * row_length + c] = from[c];
  }
}

__global__ void softcap_kernel(float* x, int64_t n, float cap) {
  cuda_detail::wait_for_prior_grids();
  for (int64_t i = first_index(); i < n; i += grid_stride()) x[i] = cap * tanhf(x[i] / cap);
}

bool bad(const void* p, int64_t n) { return p == nullptr || n < 0; }

}  // namespace

cudaError_t add_cuda(float* x, const float* y, int64_t n, cudaStream_t stream, float y_scale) {
  if (bad(x, n) || bad(y, n) || !is_aligned(x, 4) || !is_aligned(y, 4)) return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;
  IWB_LAUNCH(add_kernel, grid_for(n, kThreads), kThreads, 0, stream, x, y, n, y_scale);
  return cudaGetLastError();
}

cudaError_t add_bias_rows_cuda(float* x, const float* bias, int64_t num_rows, int64_t row_length, cudaStream_t stream) {
  if (bad(x, num_rows) || bad(bias, row_length) || !is_aligned(x, 4) || !is_aligned(bias, 4))
    return cudaErrorInvalidValue;
  if (num_rows == 0 || row_length == 0) return cudaSuccess;
  const dim3 grid(grid_for(row_length, kThreads, 4096), static_cast<unsigned>(std::min(num_rows, kMaxGridYZ)));
  IWB_LAUNCH(add_bias_rows_kernel, grid, kThreads, 0, stream, x, bias, num_rows, row_length);
  return cudaGetLastError();
}

cudaError_t f32_to_f16_cuda(const float* src, uint16_t* dst, int64_t n, cudaStream_t stream) {
  if (bad(src, n) || bad(dst, n) || !is_aligned(src, 4) || !is_aligned(dst, 2)) return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;
  IWB_LAUNCH(f32_to_f16_kernel, grid_for(n, kThreads), kThreads, 0, stream, src, dst, n);
  return cudaGetLastError();
}

cudaError_t f16_to_f32_cuda(const uint16_t* src, float* dst, int64_t n, cudaStream_t stream) {
  if (bad(src, n) || bad(dst, n) || !is_aligned(src, 2) || !is_aligned(dst, 4)) return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;
  IWB_LAUNCH(f16_to_f32_kernel, grid_for(n, kThreads), kThreads, 0, stream, src, dst, n);
  return cudaGetLastError();
}

cudaError_t gather_rows_cuda(const float* src, int64_t row_length, const int32_t* rows, int64_t num_rows, float* dst,
                             cudaStream_t stream) {
  if (bad(src, row_length) || bad(rows, num_rows) || bad(dst, num_rows) || !is_aligned(src, 4) ||
      !is_aligned(rows, 4) || !is_aligned(dst, 4)) {
    return cudaErrorInvalidValue;
  }
  if (num_rows == 0 || row_length == 0) return cudaSuccess;
  const dim3 grid(grid_for(row_length, kThreads, 4096), static_cast<unsigned>(std::min(num_rows, kMaxGridYZ)));
  IWB_LAUNCH(gather_rows_kernel, grid, kThreads, 0, stream, src, row_length, rows, num_rows, dst);
  return cudaGetLastError();
}

cudaError_t softcap_cuda(float* x, int64_t n, float cap, cudaStream_t stream) {
  if (bad(x, n) || !is_aligned(x, 4) || !(cap > 0.0f)) return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;
  IWB_LAUNCH(softcap_kernel, grid_for(n, kThreads), kThreads, 0, stream, x, n, cap);
  return cudaGetLastError();
}

}  // namespace iwb
