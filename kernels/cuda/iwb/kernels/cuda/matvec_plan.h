// Host-side launch planning of matvec_cuda: which kernel variant, how wide its weight loads and
// how many thread blocks. Plain C++ (no device code), so it is tested on machines without a GPU.
#pragma once

#include "iwb/kernels/cuda/matvec_cuda.h"

#include <cstdint>

namespace iwb {

// Threads per thread block of every matvec kernel, and output rows each thread block computes
// (the rows share their loads of x).
inline constexpr int kMatvecThreads = 128;
inline constexpr int kMatvecRowsPerBlock = 2;

struct MatvecPlan {
  // Width of each weight load (16, 4 or 2 bytes): 16 when the weight's base address and row
  // length in bytes are multiples of 16, else the widest width both divide.
  int load_bytes = 0;
  // F32/F16/BF16 only: the vectorised kernel (8 values per load) runs when load_bytes is 16; other
  // shapes take the scalar kernel.
  bool is_vector_path = false;
  int64_t row_bytes = 0;     // bytes of one weight row
  int64_t num_blocks = 0;    // grid size: ceil(out_features / kMatvecRowsPerBlock)
  bool is_many_tokens = false;  // the num_tokens > 1 instantiation (8 accumulators per row)
};

// The plan for valid args (matvec_cuda_check(args) == cudaSuccess); unspecified otherwise.
MatvecPlan plan_matvec_cuda(const MatvecCudaArgs& args);

}  // namespace iwb
