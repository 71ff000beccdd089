// Matrix-vector kernels for the K-quant super-block formats (Q4_K, Q5_K, Q6_K): eight threads
// per 256-value block, each decoding one 32-value sub-block (see matvec_quant.cuh).
#include "matvec_launch.h"
#include "matvec_quant_launch.cuh"

namespace iwb::cuda_matvec {

cudaError_t launch_matvec_kquants(const MatvecCudaArgs& args, const MatvecPlan& plan, cudaStream_t stream) {
  switch (args.type) {
    case GgmlType::Q4_K: return launch_matvec_quant<UnitK45<false>>(args, plan, stream);
    case GgmlType::Q5_K: return launch_matvec_quant<UnitK45<true>>(args, plan, stream);
    case GgmlType::Q6_K: return launch_matvec_quant<UnitQ6_K>(args, plan, stream);
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace iwb::cuda_matvec
