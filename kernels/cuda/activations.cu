// Gated activations on the GPU (activations_cuda.h): SwiGLU, GeGLU and gpt-oss's clamped SwiGLU
// element by element over strided rows, in the same float formulas as the CPU's silu(),
// gelu_tanh() and swiglu_oai().
#include "iwb/kernels/cuda/activations_cuda.h"

#include "cuda_common.cuh"
#include "quantize_q8.cuh"

namespace iwb {
namespace {

using namespace cuda_detail;

// Each Op's gated(gate, up) is one output value.
struct SiluOp {
  __device__ static float gated(float g, float u) { return g / (1.0f + expf(-g)) * u; }
};

struct GeluTanhOp {
  __device__ static float gated(float g, float u) {
    constexpr float kSqrt2OverPi = 0.79788456080286535587989211986876f;
    constexpr float kCoef = 0.044715f;
    return 0.5f * g * (1.0f + tanhf(kSqrt2OverPi * g * (1.0f + kCoef * g * g))) * u;
  }
};

// gpt-oss: the gate clamped from above, up clamped both ways, sigmoid(alpha g) g (u + 1).
struct SwigluOaiOp {
  __device__ static float gated(float g, float u) {
    g = fminf(g, kSwigluOaiLimit);
    u = fminf(fmaxf(u, -kSwigluOaiLimit), kSwigluOaiLimit);
    return g / (1.0f + expf(-kSwigluOaiAlpha * g)) * (u + 1.0f);
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
      const float v = Op::gated(gate[r * gate_stride + c], up[r * up_stride + c]);
      out[r * out_stride + c] = v;
      if (q != nullptr) {  // uniform: whole warps are in the loop (row_length % 32 == 0)
        float scale;
        q[r * row_length + c] = quantize_lane_q8(v, &scale);
        if (threadIdx.x % 32 == 0) d[(r * row_length + c) / 32] = scale;
      }
    }
  }
}

// Without q8 outputs, with rows, strides and pointers in whole 16-byte words (a prefill's gate
// and up): four values a thread through float4 loads, a grid-stride loop over (row, word). The
// one-value-a-thread form above ran an H200's 1,761-token llama-3-8b prefill activations at 1.3
// TB/s (7.4 ms of the step, 2026-12-04), its ~100,000 blocks of 256 values each; each value here
// is the same expression, so the same bits.
template <typename Op>
__global__ void gated_vec4_kernel(const float4* gate, const float4* up, float4* out, int64_t num_rows,
                                  int64_t row_words, int64_t gate_stride, int64_t up_stride, int64_t out_stride) {
  cuda_detail::wait_for_prior_grids();
  const int64_t total = num_rows * row_words;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = i / row_words, c = i % row_words;
    const float4 g = gate[r * gate_stride + c], u = up[r * up_stride + c];
    out[r * out_stride + c] =
        make_float4(Op::gated(g.x, u.x), Op::gated(g.y, u.y), Op::gated(g.z, u.z), Op::gated(g.w, u.w));
  }
}

template <typename Op>
cudaError_t launch_gated(const GatedActivationCudaArgs& a, int64_t gs, int64_t us, int64_t os, cudaStream_t stream) {
  constexpr int kThreads = 256;
  const bool is_vec4 = a.q8 == nullptr && a.row_length % 4 == 0 && gs % 4 == 0 && us % 4 == 0 && os % 4 == 0 &&
                       is_aligned(a.gate, 16) && is_aligned(a.up, 16) && is_aligned(a.output, 16);
  if (is_vec4) {
    const int64_t words = a.row_length / 4;
    IWB_LAUNCH(gated_vec4_kernel<Op>, grid_for(a.num_rows * words, kThreads, 8192), kThreads, 0, stream,
               reinterpret_cast<const float4*>(a.gate), reinterpret_cast<const float4*>(a.up),
               reinterpret_cast<float4*>(a.output), a.num_rows, words, gs / 4, us / 4, os / 4);
  } else {
    const dim3 grid(grid_for(a.row_length, kThreads, 4096), static_cast<unsigned>(std::min(a.num_rows, kMaxGridYZ)));
    IWB_LAUNCH(gated_kernel<Op>, grid, kThreads, 0, stream, a.gate, a.up, a.output, a.num_rows, a.row_length, gs, us,
               os, a.q8, a.q8_scale);
  }
  return cudaGetLastError();
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
  if (a.kind != GatedActivation::SiLU && a.kind != GatedActivation::GeluTanh && a.kind != GatedActivation::SwigluOai) {
    return cudaErrorInvalidValue;
  }
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
  switch (a.kind) {
    case GatedActivation::SiLU: return launch_gated<SiluOp>(a, gs, us, os, stream);
    case GatedActivation::GeluTanh: return launch_gated<GeluTanhOp>(a, gs, us, os, stream);
    case GatedActivation::SwigluOai: return launch_gated<SwigluOaiOp>(a, gs, us, os, stream);
  }
  return cudaErrorInvalidValue;
}

}  // namespace iwb
