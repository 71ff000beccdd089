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

static_assert(kMatvecMaxParts <= cuda_detail::kMaxMatvecParts);

// The vectorised kernel over `count` matrices sharing x, its width and the token count.
template <typename Kernel>
cudaError_t launch_group_kernel(Kernel kernel, const MatvecCudaArgs* args, const MatvecPlan* plans, int count,
                                cudaStream_t stream) {
  cuda_detail::MatvecParts parts{};
  unsigned blocks = 0;
  for (int p = 0; p < count; ++p) {
    blocks = parts.add(args[p].weight, args[p].out_features, args[p].y, args[p].bias,
                       static_cast<unsigned>(plans[p].num_blocks), blocks);
  }
  IWB_LAUNCH(kernel, dim3(blocks), dim3(kMatvecThreads), 0, stream, parts, plans[0].row_bytes, args[0].in_features,
             args[0].x, static_cast<int>(args[0].num_tokens));
  return cudaGetLastError();
}

template <typename Elem>
cudaError_t launch_float(const MatvecCudaArgs* args, const MatvecPlan* plans, int count, cudaStream_t stream) {
  constexpr int kMany = static_cast<int>(kCudaMatvecMaxTokens);
  const MatvecPlan& plan = plans[0];
  if (count > 1) {  // matvec_group_cuda_check admits vectorised plans only
    if (!plan.is_vector_path) return cudaErrorInvalidValue;
    return plan.is_many_tokens ? launch_group_kernel(matvec_float_group_kernel<Elem, kMany>, args, plans, count, stream)
                               : launch_group_kernel(matvec_float_group_kernel<Elem, 1>, args, plans, count, stream);
  }
  if (plan.is_vector_path) {
    return plan.is_many_tokens ? launch_float_kernel(matvec_float_kernel<Elem, kMany>, *args, plan, stream)
                               : launch_float_kernel(matvec_float_kernel<Elem, 1>, *args, plan, stream);
  }
  return plan.is_many_tokens ? launch_float_kernel(matvec_float_scalar_kernel<Elem, kMany>, *args, plan, stream)
                             : launch_float_kernel(matvec_float_scalar_kernel<Elem, 1>, *args, plan, stream);
}

}  // namespace

cudaError_t launch_matvec_float(const MatvecCudaArgs* args, const MatvecPlan* plans, int count, cudaStream_t stream) {
  switch (args[0].type) {
    case GgmlType::F16: return launch_float<ElemF16>(args, plans, count, stream);
    case GgmlType::BF16: return launch_float<ElemBF16>(args, plans, count, stream);
    case GgmlType::F32: return launch_float<ElemF32>(args, plans, count, stream);
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace iwb::cuda_matvec
