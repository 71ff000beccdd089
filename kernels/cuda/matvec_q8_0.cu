// Matrix-vector kernel for Q8_0 weights: the shared kernel of matvec_quant.cuh with its decoder.
#include "matvec_launch.h"
#include "matvec_quant_launch.cuh"

namespace iwb::cuda_matvec {

cudaError_t launch_matvec_q8_0(const MatvecCudaArgs& args, const MatvecPlan& plan, cudaStream_t stream) {
  if (args.type != GgmlType::Q8_0) return cudaErrorInvalidValue;
  return launch_matvec_quant<UnitQ8_0>(args, plan, stream);
}

}  // namespace iwb::cuda_matvec
