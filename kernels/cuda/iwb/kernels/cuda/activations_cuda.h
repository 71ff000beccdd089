// GPU gated feed-forward activations out = act(gate) * up, act = SiLU (SwiGLU) or GELU-tanh
// (GeGLU), or gpt-oss's clamped SwiGLU (swiglu_oai); gated_activation_ref is the CPU twin. Rows with strides so a fused
// gate|up product
// ([num_rows x 2*row_length]) works without a copy.
#pragma once

#include "iwb/kernels/activations.h"  // GatedActivation

#include <cuda_runtime.h>

#include <cstdint>

namespace iwb {

struct GatedActivationCudaArgs {
  const float* gate = nullptr;  // device, row r at gate + r * gate_stride
  const float* up = nullptr;    // device, row r at up + r * up_stride
  float* output = nullptr;      // device, row r at output + r * output_stride; may be gate or up
  int64_t num_rows = 0;
  int64_t row_length = 0;
  int64_t gate_stride = 0;  // floats between rows; 0 means row_length
  int64_t up_stride = 0;
  int64_t output_stride = 0;
  GatedActivation kind = GatedActivation::SiLU;
  // Optional: the output also as int8 activations, bit for bit what quantize_x_q8_cuda of the
  // rows gives (row r's at q8 + r * row_length, q8_scale + r * row_length / 32), so the next
  // product on int8 activations skips its quantize launch. row_length a multiple of 32, q8
  // 16-byte and q8_scale 4-byte aligned.
  int8_t* q8 = nullptr;
  float* q8_scale = nullptr;
};

// cudaErrorInvalidValue for null pointers, negative sizes, strides shorter than a row,
// misaligned (4-byte) pointers or q8 outputs it cannot write; num_rows or row_length 0 is fine
// (nothing to do).
cudaError_t gated_activation_cuda_check(const GatedActivationCudaArgs& args);
cudaError_t gated_activation_cuda(const GatedActivationCudaArgs& args, cudaStream_t stream);

}  // namespace iwb
