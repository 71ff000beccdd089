// The real RMSNorm and RoPE code (kernels/cuda/norm.cu, rope.cu) built as host C++ against
// cuda_emulation_warps/, for test_cuda_ops_emulated.
#include "norm.cu"
#include "rope.cu"
