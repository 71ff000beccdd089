// The real device sampling code (kernels/cuda/sampling.cu) built as host C++ against
// cuda_emulation_warps/, for test_cuda_ops_emulated.
#include "sampling.cu"
