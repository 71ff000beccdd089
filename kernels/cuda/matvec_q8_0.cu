// Matrix-vector kernel for Q8_0 weights: the shared kernel of matvec_quant.cuh with its decoder.
#include "matvec_launch.h"
#include "matvec_quant_launch.cuh"
#include "quantize_q8.cuh"

#include <algorithm>

namespace iwb::cuda_matvec {

cudaError_t launch_matvec_q8_0(const MatvecCudaArgs& args, const MatvecPlan& plan, cudaStream_t stream) {
  if (args.type != GgmlType::Q8_0) return cudaErrorInvalidValue;
  return launch_matvec_quant<UnitQ8_0>(args, plan, stream);
}

cudaError_t launch_matvec_q8_0_q8_input(const MatvecCudaArgs& args, const MatvecPlan& plan, cudaStream_t stream) {
  if (args.type != GgmlType::Q8_0) return cudaErrorInvalidValue;
  return launch_matvec_q8_input<UnitQ8_0, DotQ8_0>(args, plan, stream);
}

// One warp per 32-value block of x: quantize_x_q8_block_ref on the device.
__global__ void __launch_bounds__(kMatvecThreads)
    quantize_x_q8_kernel(const float* __restrict__ x, int64_t num_blocks, int8_t* __restrict__ q, float* __restrict__ d,
                         int32_t* __restrict__ sums) {
  cuda_detail::wait_for_prior_grids();
  const int lane = static_cast<int>(threadIdx.x % 32);
  for (int64_t b = static_cast<int64_t>(blockIdx.x) * (kMatvecThreads / 32) + threadIdx.x / 32; b < num_blocks;
       b += static_cast<int64_t>(gridDim.x) * (kMatvecThreads / 32)) {
    float scale;
    const int8_t quant = cuda_detail::quantize_lane_q8(x[b * 32 + lane], &scale);
    q[b * 32 + lane] = quant;
    if (lane == 0) d[b] = scale;
    if (sums != nullptr) {  // warp-uniform
      int sum = quant;
#pragma unroll
      for (int offset = 16; offset > 0; offset >>= 1) sum += __shfl_xor_sync(0xFFFFFFFFu, sum, offset);
      if (lane == 0) sums[b] = sum;
    }
  }
}

cudaError_t launch_quantize_x_q8(const float* x, int64_t n, int8_t* q, float* d, int32_t* sums, cudaStream_t stream) {
  const int64_t num_blocks = n / 32;
  const int64_t warps = kMatvecThreads / 32;
  const auto grid = static_cast<unsigned>(std::min<int64_t>((num_blocks + warps - 1) / warps, 65535));
  IWB_LAUNCH(quantize_x_q8_kernel, dim3(grid), dim3(kMatvecThreads), 0, stream, x, num_blocks, q, d, sums);
  return cudaGetLastError();
}

}  // namespace iwb::cuda_matvec
