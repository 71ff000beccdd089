// Launcher of the matrix-vector kernels for unquantized weights (F16, BF16, F32) of
// matvec_float.cuh: the vectorised kernel for rows of 16-byte multiples, else the scalar one.
#include "cuda_common.cuh"
#include "matvec_float.cuh"
#include "matvec_launch.h"

namespace iwb::cuda_matvec {
namespace {

// One kernel variant, launched through a function pointer (IWB_LAUNCH's arguments may not
// contain the commas of a template argument list).
template <typename Kernel>
cudaError_t launch_float_kernel(Kernel kernel, const MatvecCudaArgs& args, const MatvecPlan& plan, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>(plan.num_blocks));
  const dim3 block(kMatvecThreads);
  IWB_LAUNCH(kernel, grid, block, 0, stream, static_cast<const uint8_t*>(args.weight), plan.row_bytes,
             args.in_features, args.out_features, args.x, static_cast<int>(args.num_tokens), args.y, args.bias);
  return cudaGetLastError();
}

template <typename Elem>
cudaError_t launch_float(const MatvecCudaArgs& args, const MatvecPlan& plan, cudaStream_t stream) {
  constexpr int kMany = static_cast<int>(kCudaMatvecMaxTokens);
  if (plan.is_vector_path) {
    return plan.is_many_tokens ? launch_float_kernel(matvec_float_kernel<Elem, kMany>, args, plan, stream)
                               : launch_float_kernel(matvec_float_kernel<Elem, 1>, args, plan, stream);
  }
  return plan.is_many_tokens ? launch_float_kernel(matvec_float_scalar_kernel<Elem, kMany>, args, plan, stream)
                             : launch_float_kernel(matvec_float_scalar_kernel<Elem, 1>, args, plan, stream);
}

}  // namespace

cudaError_t launch_matvec_float(const MatvecCudaArgs& args, const MatvecPlan& plan, cudaStream_t stream) {
  switch (args.type) {
    case GgmlType::F16: return launch_float<ElemF16>(args, plan, stream);
    case GgmlType::BF16: return launch_float<ElemBF16>(args, plan, stream);
    case GgmlType::F32: return launch_float<ElemF32>(args, plan, stream);
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace iwb::cuda_matvec
