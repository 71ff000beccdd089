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
// The quantized kernels' rows per block with several tokens, on 16-byte loads of large
// matrices: every piece of x a thread loads (two float4 per 8 weights and token) then serves 4
// rows instead of 2. On an H100 (2026-11-27, bench_cuda_matvec, Q4_0 4096x14336 at 8 tokens)
// this took 12.1% of the bandwidth to 13.8%, and the batch-64 decode of llama-3-8b Q4_0 from
// 17.6x to 20.5x batch 1. One token keeps 2 rows: 8 rows measured slower there (34.5% to
// 31.8%; ncu: 119 registers, a quarter occupancy, one wave of load-then-compute blocks).
inline constexpr int kMatvecQuantWideRowsManyTokens = 4;
// Below this many output rows the wide blocks would be too few to keep every SM reading.
inline constexpr int64_t kMatvecQuantWideMinRows = 2048;
// Q4_K on int8 activations (matvec_q4_k_q8.cuh): a thread block a row, or a warp a row (4 rows a
// block) for rows of at most kQ4KWarpRowMaxInputs values, so rows of 1536 or 2048 values (48-64
// 16-byte pieces) do not leave half of a block's 128 threads idle.
inline constexpr int kMatvecQ4KWarpRows = 4;
inline constexpr int64_t kQ4KWarpRowMaxInputs = 2048;

struct MatvecPlan {
  // Width of each weight load (16, 4 or 2 bytes): 16 when the weight's base address and row
  // length in bytes are multiples of 16, else the widest width both divide.
  int load_bytes = 0;
  // F32/F16/BF16 only: the vectorised kernel (8 values per load) runs when load_bytes is 16; other
  // shapes take the scalar kernel.
  bool is_vector_path = false;
  int64_t row_bytes = 0;     // bytes of one weight row
  int rows_per_block = kMatvecRowsPerBlock;  // output rows per thread block (quantized: 1, 2 or 4)
  int64_t num_blocks = 0;                    // grid size: ceil(out_features / rows_per_block)
  bool is_many_tokens = false;  // the num_tokens > 1 instantiation (8 accumulators per row)
  bool uses_q8_input = false;   // one token of Q4_0 / Q8_0 / Q4_K / Q6_K against args.x_q8 (integer products)
};

// The plan for valid args (matvec_cuda_check(args) == cudaSuccess); unspecified otherwise.
MatvecPlan plan_matvec_cuda(const MatvecCudaArgs& args);

}  // namespace iwb
