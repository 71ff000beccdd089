// Matrix-vector kernels for the 32-value 4- and 5-bit formats (Q4_0, Q4_1, Q5_0, Q5_1): the
// shared kernel of matvec_quant.cuh instantiated with their decoders.
#include "matvec_launch.h"
#include "matvec_quant_launch.cuh"

namespace iwb::cuda_matvec {

cudaError_t launch_matvec_q4_q5(const MatvecCudaArgs& args, const MatvecPlan& plan, cudaStream_t stream) {
  switch (args.type) {
    case GgmlType::Q4_0: return launch_matvec_quant<UnitQ4_0>(args, plan, stream);
    case GgmlType::Q4_1: return launch_matvec_quant<UnitQ4_1>(args, plan, stream);
    case GgmlType::Q5_0: return launch_matvec_quant<UnitQ5<false>>(args, plan, stream);
    case GgmlType::Q5_1: return launch_matvec_quant<UnitQ5<true>>(args, plan, stream);
    default: return cudaErrorInvalidValue;
  }
}

cudaError_t launch_matvec_q4_0_q8_input(const MatvecCudaArgs& args, const MatvecPlan& plan, cudaStream_t stream) {
  if (args.type != GgmlType::Q4_0) return cudaErrorInvalidValue;
  return launch_matvec_q8_input<UnitQ4_0, DotQ4_0>(args, plan, stream);
}

}  // namespace iwb::cuda_matvec
