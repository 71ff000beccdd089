// The CUDA matvec and f16 dequantization sources compiled as host C++ against
// cuda_emulation_warps/ for test_cuda_matvec_emulated (launches run on CPU fibers).
#include "dequantize_f16.cu"
#include "experts.cu"
#include "matmul_split_mma.cu"
#include "matvec_cuda.cu"
#include "matvec_f16.cu"
#include "matvec_kquants.cu"
#include "matvec_q4_0.cu"
#include "matvec_q8_0.cu"
#include "matvec_split.cu"
