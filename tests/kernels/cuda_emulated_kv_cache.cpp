// The real KV cache write / block copy code (kernels/cuda/kv_cache.cu) built as host C++ against
// cuda_emulation_warps/, for test_cuda_ops_emulated.
#include "kv_cache.cu"
