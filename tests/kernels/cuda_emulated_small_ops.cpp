// The real embedding, activation and element-wise GPU code (kernels/cuda/{embedding,activations,
// elementwise}.cu) built as host C++ against cuda_emulation_warps/, for test_cuda_ops_emulated.
#include "activations.cu"
#include "elementwise.cu"
#include "embedding.cu"
