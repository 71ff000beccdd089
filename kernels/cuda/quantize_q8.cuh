// One 32-value block of activations quantized to int8 across a warp (lane j holds value j):
// quantize_x_q8_block_ref on the device, bit for bit. Shared by quantize_x_q8_cuda and the
// kernels that write int8 activations beside their f32 output (add_rmsnorm_q8_cuda,
// gated_activation_cuda with q8 outputs), so a fused product reads the same bytes.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace iwb::cuda_detail {

// Every lane of the warp must call it (the max is a warp shuffle). Returns the lane's int8;
// *scale gets the block's d = max|x| / 127 in every lane.
__device__ __forceinline__ int8_t quantize_lane_q8(float v, float* scale) {
  float amax = fabsf(v);
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xFFFFFFFFu, amax, offset));
  const float d = amax / 127.0f;
  const float inverse = d != 0.0f ? 1.0f / d : 0.0f;
  *scale = d;
  return static_cast<int8_t>(roundf(__fmul_rn(v, inverse)));
}

}  // namespace iwb::cuda_detail
