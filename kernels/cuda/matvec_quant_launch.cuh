// The host launcher of the shared quantized matvec kernel (matvec_quant.cuh). Launches go through
// IWB_LAUNCH so tests can run them on CPU fibers (tests/kernels/cuda_emulation_warps).
#pragma once

#include "cuda_common.cuh"
#include "matvec_quant.cuh"

namespace iwb::cuda_matvec {

// Launches one variant of the kernel (through a function pointer: IWB_LAUNCH's arguments may
// not contain the commas of a template argument list).
template <typename Unit, int kLoadBytes, int kMaxTokens, int kRows = kMatvecRowsPerBlock>
cudaError_t launch_quant_variant(const MatvecCudaArgs& args, const MatvecPlan& plan, cudaStream_t stream) {
  const auto kernel = matvec_quant_kernel<Unit, kLoadBytes, kMaxTokens, kRows>;
  const dim3 grid(static_cast<unsigned>(plan.num_blocks));
  const dim3 block(kMatvecThreads);
  IWB_LAUNCH(kernel, grid, block, 0, stream, static_cast<const uint8_t*>(args.weight), plan.row_bytes,
             args.in_features, args.out_features, args.x, static_cast<int>(args.num_tokens), args.y, args.bias);
  return cudaGetLastError();
}

// Launches the kernel variant `plan` names for Unit (the plan's load width and token count).
template <typename Unit>
cudaError_t launch_matvec_quant(const MatvecCudaArgs& args, const MatvecPlan& plan, cudaStream_t stream) {
  constexpr int kMany = static_cast<int>(kCudaMatvecMaxTokens);
  const bool many = plan.is_many_tokens;
  // Wide blocks only with several tokens on 16-byte loads (plan_matvec_cuda): real model shapes.
  if (plan.rows_per_block != kMatvecRowsPerBlock) {
    if (plan.load_bytes != 16 || !many) return cudaErrorInvalidValue;
    return launch_quant_variant<Unit, 16, kMany, kMatvecQuantWideRowsManyTokens>(args, plan, stream);
  }
  switch (plan.load_bytes) {
    case 16: return many ? launch_quant_variant<Unit, 16, kMany>(args, plan, stream)
                         : launch_quant_variant<Unit, 16, 1>(args, plan, stream);
    case 4: return many ? launch_quant_variant<Unit, 4, kMany>(args, plan, stream)
                        : launch_quant_variant<Unit, 4, 1>(args, plan, stream);
    case 2: return many ? launch_quant_variant<Unit, 2, kMany>(args, plan, stream)
                        : launch_quant_variant<Unit, 2, 1>(args, plan, stream);
    default: return cudaErrorInvalidValue;
  }
}

// The int8-activation kernel for Unit / Dot at the plan's load width.
template <typename Unit, typename Dot, int kLoadBytes>
cudaError_t launch_q8_input_variant(const MatvecCudaArgs& args, const MatvecPlan& plan, cudaStream_t stream) {
  const auto kernel = matvec_q8_input_kernel<Unit, Dot, kLoadBytes>;
  IWB_LAUNCH(kernel, dim3(static_cast<unsigned>(plan.num_blocks)), dim3(kMatvecThreads), 0, stream,
             static_cast<const uint8_t*>(args.weight), plan.row_bytes, args.out_features, args.x_q8, args.x_q8_scale,
             args.y, args.bias);
  return cudaGetLastError();
}

template <typename Unit, typename Dot>
cudaError_t launch_matvec_q8_input(const MatvecCudaArgs& args, const MatvecPlan& plan, cudaStream_t stream) {
  switch (plan.load_bytes) {
    case 16: return launch_q8_input_variant<Unit, Dot, 16>(args, plan, stream);
    case 4: return launch_q8_input_variant<Unit, Dot, 4>(args, plan, stream);
    case 2: return launch_q8_input_variant<Unit, Dot, 2>(args, plan, stream);
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace iwb::cuda_matvec
