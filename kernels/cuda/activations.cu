// Gated activations on the GPU (activations_cuda.h): SwiGLU and GeGLU element by element over
// strided rows, in the same float formulas as the CPU's silu() and gelu_tanh().
#include "iwb/kernels/cuda/activations_cuda.h"

#include "cuda_common.cuh"
#include "quantize_q8.cuh"

namespace iwb {
namespace {

using namespace cuda_detail;

struct SiluOp {
  __device__ static float apply(float x) { return x / (1.0f + expf(-x)); }
};

struct GeluTanhOp {
  __device__ static float apply(float x) {
    constexpr float kSqrt2OverPi = 0.79788456080286535587989211986876f;
    constexpr float kCoef = 0.044715f;
    return 0.5f * x * (1.0f + tanhf(kSqrt2OverPi * x * (1.0f + kCoef * x * x)));
  }
};

// Grid x covers a row, grid y strides over rows (output may alias gate or up: each element is
// read and written by one thread).
// With q (gated_activation_cuda's q8 outputs; rows of a multiple of 32 values, blocks of whole
// warps), each warp's 32 consecutive outputs are also quantized as quantize_x_q8_cuda would.
template <typename Op>
__global__ void gated_kernel(const float* gate, const float* up, float* out, int64_t num_rows, int64_t row_length,
                             int64_t gate_stride, int64_t up_stride, int64_t out_stride, int8_t* __restrict__ q,
                             float* __restrict__ d) {
  cuda_detail::wait_for_prior_grids();
  for (int64_t r = blockIdx.y; r < num_rows; r += gridDim.y) {
    for (int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; c < row_length;
         c += static_cast<int64_t>(gridDim.x) * blockDim.x) {
      const float v = Op::apply(gate[r * gate_stride + c]) * up[r * up_stride + c];
      out[r * out_stride + c] = v;
      if (q != nullptr) {  // uniform: whole warps are in the loop (row_length % 32 == 0)
        float scale;
        q[r * row_length + c] = quantize_lane_q8(v, &scale);
        if (threadIdx.x % 32 == 0) d[(r * row_length + c) / 32] = scale;
      }
    }
  }
}

}  // namespace

cudaError_t gated_activation_cuda_check(const GatedActivationCudaArgs& a) {
  if (a.gate == nullptr || a.up == nullptr || a.output == nullptr || a.num_rows < 0 || a.row_length < 0) {
    return cudaErrorInvalidValue;
  }
  for (const int64_t stride : {a.gate_stride, a.up_stride, a.output_stride}) {
    if (stride != 0 && stride < a.row_length) return cudaErrorInvalidValue;
  }
  if (!is_aligned(a.gate, 4) || !is_aligned(a.up, 4) || !is_aligned(a.output, 4)) return cudaErrorInvalidValue;
  if (a.kind != GatedActivation::SiLU && a.kind != GatedActivation::GeluTanh) return cudaErrorInvalidValue;
  if (a.q8 != nullptr || a.q8_scale != nullptr) {
    if (a.q8 == nullptr || a.q8_scale == nullptr || a.row_length % 32 != 0 || !is_aligned(a.q8, 16) ||
        !is_aligned(a.q8_scale, 4)) {
      return cudaErrorInvalidValue;
    }
  }
  return cudaSuccess;
}

cudaError_t gated_activation_cuda(const GatedActivationCudaArgs& a, cudaStream_t stream) {
  if (const cudaError_t e = gated_activation_cuda_check(a); e != cudaSuccess) return e;
  if (a.num_rows == 0 || a.row_length == 0) return cudaSuccess;
  const int64_t gs = a.gate_stride != 0 ? a.gate_stride : a.row_length;
  const int64_t us = a.up_stride != 0 ? a.up_stride : a.row_length;
  const int64_t os = a.output_stride != 0 ? a.output_stride : a.row_length;
  constexpr int kThreads = 256;
  const dim3 grid(grid_for(a.row_length, kThreads, 4096), static_cast<unsigned>(std::min(a.num_rows, kMaxGridYZ)));
  if (a.kind == GatedActivation::SiLU) {
    IWB_LAUNCH(gated_kernel<SiluOp>, grid, kThreads, 0, stream, a.gate, a.up, a.output, a.num_rows, a.row_length, gs,
               us, os, a.q8, a.q8_scale);
  } else {
    IWB_LAUNCH(gated_kernel<GeluTanhOp>, grid, kThreads, 0, stream, a.gate, a.up, a.output, a.num_rows, a.row_length,
               gs, us, os, a.q8, a.q8_scale);
  }
  return cudaGetLastError();
}

}  // namespace iwb
