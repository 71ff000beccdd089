// RMS normalisation on the GPU (norm_cuda.h): one thread block per row, f32 sum of squares
// reduced across the block, then each thread scales the elements it read.
#include "iwb/kernels/cuda/norm_cuda.h"

#include "cuda_common.cuh"
#include "quantize_q8.cuh"

namespace iwb {
namespace {

using namespace cuda_detail;

// y = x / rms * weight (or without a weight) for the elements this thread owns, after the
// block's sum of squares: both kernels end here, so the fused one gives the plain one's bits.
// With q (add_rmsnorm_q8_cuda), each warp's 32 consecutive outputs (blockDim and dim are
// multiples of 32) are also quantized to int8 as quantize_x_q8_cuda would quantize y.
__device__ void write_normalized(const float* x, const float* __restrict__ weight, float* y, int64_t dim, float sum,
                                 float eps, int8_t* __restrict__ q = nullptr, float* __restrict__ d = nullptr) {
  const float inv = rsqrtf(sum / static_cast<float>(dim) + eps);
  for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) {
    const float v = weight != nullptr ? x[i] * inv * weight[i] : x[i] * inv;
    y[i] = v;
    if (q != nullptr) {  // uniform: every lane of the warp is in the loop (dim % 32 == 0)
      float scale;
      q[i] = quantize_lane_q8(v, &scale);
      if (threadIdx.x % 32 == 0) d[i / 32] = scale;
    }
  }
}

__global__ void rmsnorm_kernel(const float* input, const float* __restrict__ weight, float* output, int64_t num_rows,
                               int64_t dim, float eps) {
  cuda_detail::wait_for_prior_grids();
  // In place is safe: every element is read and written by the same thread, and all reads of
  // the row finish before block_sum's barrier.
  for (int64_t row = blockIdx.x; row < num_rows; row += gridDim.x) {
    const float* x = input + row * dim;
    float* y = output + row * dim;
    float sum = 0.0f;
    for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) sum += x[i] * x[i];
    write_normalized(x, weight, y, dim, block_sum(sum), eps);
  }
}

// rmsnorm_kernel with the residual add first: the same thread owns the same elements. q and d
// (or null): the output also as int8 activations, row r's at q + r dim and d + r dim / 32.
__global__ void add_rmsnorm_kernel(float* residual, const float* __restrict__ addend, const float* __restrict__ weight,
                                   float* output, int64_t num_rows, int64_t dim, float eps, int8_t* __restrict__ q,
                                   float* __restrict__ d, float addend_scale) {
  cuda_detail::wait_for_prior_grids();
  for (int64_t row = blockIdx.x; row < num_rows; row += gridDim.x) {
    float* x = residual + row * dim;
    const float* a = addend + row * dim;
    float* y = output + row * dim;
    float sum = 0.0f;
    for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) {
      const float v = x[i] + addend_scale * a[i];  // add_kernel's sum
      x[i] = v;
      sum += v * v;
    }
    write_normalized(x, weight, y, dim, block_sum(sum), eps, q != nullptr ? q + row * dim : nullptr,
                     q != nullptr ? d + row * (dim / 32) : nullptr);
  }
}

int norm_threads(int64_t dim) { return dim <= 128 ? 128 : dim <= 1024 ? 256 : 512; }

}  // namespace

cudaError_t rmsnorm_cuda_check(const RmsNormCudaArgs& a) {
  if (a.num_rows < 0 || a.dim <= 0 || a.input == nullptr || a.output == nullptr) return cudaErrorInvalidValue;
  if (!is_aligned(a.input, 4) || !is_aligned(a.output, 4) || (a.weight != nullptr && !is_aligned(a.weight, 4))) {
    return cudaErrorInvalidValue;
  }
  if (!(a.eps >= 0.0f)) return cudaErrorInvalidValue;
  return cudaSuccess;
}

cudaError_t rmsnorm_cuda(const RmsNormCudaArgs& a, cudaStream_t stream) {
  if (const cudaError_t e = rmsnorm_cuda_check(a); e != cudaSuccess) return e;
  if (a.num_rows == 0) return cudaSuccess;
  // Per-head norms have rows of 64-256 values; token norms 1-8k. Enough threads for a few
  // elements each, in whole warps.
  const int threads = norm_threads(a.dim);
  const unsigned blocks = static_cast<unsigned>(std::min<int64_t>(a.num_rows, kMaxGridX));
  IWB_LAUNCH(rmsnorm_kernel, blocks, threads, 0, stream, a.input, a.weight, a.output, a.num_rows, a.dim, a.eps);
  return cudaGetLastError();
}

cudaError_t add_rmsnorm_cuda(float* residual, const float* addend, const RmsNormCudaArgs& a, cudaStream_t stream,
                             float addend_scale) {
  if (const cudaError_t e = rmsnorm_cuda_check(a); e != cudaSuccess) return e;
  if (residual == nullptr || a.input != residual || addend == nullptr || !is_aligned(addend, 4)) {
    return cudaErrorInvalidValue;
  }
  if (a.num_rows == 0) return cudaSuccess;
  const unsigned blocks = static_cast<unsigned>(std::min<int64_t>(a.num_rows, kMaxGridX));
  IWB_LAUNCH(add_rmsnorm_kernel, blocks, norm_threads(a.dim), 0, stream, residual, addend, a.weight, a.output,
             a.num_rows, a.dim, a.eps, static_cast<int8_t*>(nullptr), static_cast<float*>(nullptr), addend_scale);
  return cudaGetLastError();
}

cudaError_t add_rmsnorm_q8_cuda(float* residual, const float* addend, const RmsNormCudaArgs& a, int8_t* q, float* d,
                                cudaStream_t stream, float addend_scale) {
  if (const cudaError_t e = rmsnorm_cuda_check(a); e != cudaSuccess) return e;
  if (residual == nullptr || a.input != residual || addend == nullptr || !is_aligned(addend, 4)) {
    return cudaErrorInvalidValue;
  }
  if (q == nullptr || d == nullptr || a.dim % 32 != 0 || !is_aligned(q, 16) || !is_aligned(d, 4)) {
    return cudaErrorInvalidValue;
  }
  if (a.num_rows == 0) return cudaSuccess;
  const unsigned blocks = static_cast<unsigned>(std::min<int64_t>(a.num_rows, kMaxGridX));
  IWB_LAUNCH(add_rmsnorm_kernel, blocks, norm_threads(a.dim), 0, stream, residual, addend, a.weight, a.output,
             a.num_rows, a.dim, a.eps, q, d, addend_scale);
  return cudaGetLastError();
}

}  // namespace iwb
