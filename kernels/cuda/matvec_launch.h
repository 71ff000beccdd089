// Per-family launchers behind matvec_cuda (matvec_cuda.cu dispatches to them): each runs the
// kernel variant the plan names, having been given arguments matvec_cuda_check accepted.
#pragma once

#include "iwb/kernels/cuda/matvec_plan.h"

#include <cuda_runtime.h>

namespace iwb::cuda_matvec {

// F32, F16, BF16: `count` matrices (matvec_group_cuda; 1 for matvec_cuda) in one launch.
cudaError_t launch_matvec_float(const MatvecCudaArgs* args, const MatvecPlan* plans, int count, cudaStream_t stream);
cudaError_t launch_matvec_q4_q5(const MatvecCudaArgs& args, const MatvecPlan& plan, cudaStream_t stream);  // Q4_0, Q4_1, Q5_0, Q5_1
cudaError_t launch_matvec_q8_0(const MatvecCudaArgs& args, const MatvecPlan& plan, cudaStream_t stream);
cudaError_t launch_matvec_kquants(const MatvecCudaArgs& args, const MatvecPlan& plan, cudaStream_t stream);  // Q4_K, Q5_K, Q6_K
// One token against int8 activations (plan.uses_q8_input): Q4_0 (matvec_q4_0.cu), Q8_0 (matvec_q8_0.cu),
// Q4_K and Q6_K (matvec_kquants.cu).
cudaError_t launch_matvec_q4_0_q8_input(const MatvecCudaArgs& args, const MatvecPlan& plan, cudaStream_t stream);
cudaError_t launch_matvec_q8_0_q8_input(const MatvecCudaArgs& args, const MatvecPlan& plan, cudaStream_t stream);
cudaError_t launch_matvec_q4_k_q8_input(const MatvecCudaArgs& args, const MatvecPlan& plan, cudaStream_t stream);
cudaError_t launch_matvec_q6_k_q8_input(const MatvecCudaArgs& args, const MatvecPlan& plan, cudaStream_t stream);
// Q4_K on int8 activations, `count` matrices on the same input in one launch (matvec_group_cuda).
cudaError_t launch_matvec_q4_k_q8_group(const MatvecCudaArgs* args, const MatvecPlan* plans, int count,
                                        cudaStream_t stream);
cudaError_t launch_quantize_x_q8(const float* x, int64_t n, int8_t* q, float* d, int32_t* sums, cudaStream_t stream);

}  // namespace iwb::cuda_matvec
