// Matrix-vector kernels for the K-quant super-block formats (Q4_K, Q5_K, Q6_K): eight threads
// per 256-value block, each decoding one 32-value sub-block (see matvec_quant.cuh); on int8
// activations, Q4_K (1-8 tokens, matvec_q4_k_q8.cuh) and Q6_K (one token, the staged kernel).
#include "matvec_launch.h"
#include "matvec_q4_k_q8.cuh"
#include "matvec_quant_launch.cuh"

#include <type_traits>

namespace iwb::cuda_matvec {

cudaError_t launch_matvec_kquants(const MatvecCudaArgs& args, const MatvecPlan& plan, cudaStream_t stream) {
  switch (args.type) {
    case GgmlType::Q4_K: return launch_matvec_quant<UnitK45<false>>(args, plan, stream);
    case GgmlType::Q5_K: return launch_matvec_quant<UnitK45<true>>(args, plan, stream);
    case GgmlType::Q6_K: return launch_matvec_quant<UnitQ6_K>(args, plan, stream);
    default: return cudaErrorInvalidValue;
  }
}

cudaError_t launch_matvec_q6_k_q8_input(const MatvecCudaArgs& args, const MatvecPlan& plan, cudaStream_t stream) {
  if (args.type != GgmlType::Q6_K) return cudaErrorInvalidValue;
  return launch_matvec_q8_input<UnitQ6_K, DotQ6_K>(args, plan, stream);
}

namespace {

// The <kMaxTokens, kRows> instantiation the plan names (one or several tokens; a block or a warp
// a row), or null: pick(tokens, rows) returns the kernel for two std::integral_constant.
template <typename Pick>
auto q4_k_variant(const MatvecPlan& plan, Pick pick) {
  using One = std::integral_constant<int, 1>;
  using Many = std::integral_constant<int, static_cast<int>(kCudaMatvecMaxTokens)>;
  using Warp = std::integral_constant<int, kMatvecQ4KWarpRows>;
  decltype(pick(One{}, One{})) kernel = nullptr;
  if (plan.rows_per_block == 1) {
    kernel = plan.is_many_tokens ? pick(Many{}, One{}) : pick(One{}, One{});
  } else if (plan.rows_per_block == kMatvecQ4KWarpRows) {
    kernel = plan.is_many_tokens ? pick(Many{}, Warp{}) : pick(One{}, Warp{});
  }
  return kernel;
}

}  // namespace

cudaError_t launch_matvec_q4_k_q8_input(const MatvecCudaArgs& args, const MatvecPlan& plan, cudaStream_t stream) {
  if (args.type != GgmlType::Q4_K || plan.load_bytes != 16) return cudaErrorInvalidValue;
  const auto kernel = q4_k_variant(plan, [](auto tokens, auto rows) {
    return matvec_q4_k_q8_kernel<decltype(tokens)::value, decltype(rows)::value>;
  });
  if (kernel == nullptr) return cudaErrorInvalidValue;
  IWB_LAUNCH(kernel, dim3(static_cast<unsigned>(plan.num_blocks)), dim3(kMatvecThreads), 0, stream,
             static_cast<const uint8_t*>(args.weight), plan.row_bytes, args.in_features, args.out_features, args.x_q8,
             args.x_q8_scale, static_cast<int>(args.num_tokens), args.y, args.bias);
  return cudaGetLastError();
}

cudaError_t launch_matvec_q4_k_q8_group(const MatvecCudaArgs* args, const MatvecPlan* plans, int count,
                                        cudaStream_t stream) {
  const MatvecPlan& plan = plans[0];
  if (count < 1 || count > cuda_detail::kMaxMatvecParts || plan.load_bytes != 16) return cudaErrorInvalidValue;
  const auto kernel = q4_k_variant(plan, [](auto tokens, auto rows) {
    return matvec_q4_k_q8_group_kernel<decltype(tokens)::value, decltype(rows)::value>;
  });
  if (kernel == nullptr) return cudaErrorInvalidValue;
  cuda_detail::MatvecParts parts{};
  unsigned blocks = 0;
  for (int p = 0; p < count; ++p) {
    blocks = parts.add(args[p].weight, args[p].out_features, args[p].y, args[p].bias,
                       static_cast<unsigned>(plans[p].num_blocks), blocks);
  }
  IWB_LAUNCH(kernel, dim3(blocks), dim3(kMatvecThreads), 0, stream, parts, plan.row_bytes, args[0].in_features,
             args[0].x_q8, args[0].x_q8_scale, static_cast<int>(args[0].num_tokens));
  return cudaGetLastError();
}

}  // namespace iwb::cuda_matvec
