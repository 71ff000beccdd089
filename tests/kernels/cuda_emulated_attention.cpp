// The real paged attention code (kernels/cuda/paged_attention*.cu: checks, planning, launches and
// device code) built as host C++ against cuda_emulation_warps/, for test_cuda_ops_emulated.
#include "paged_attention.cu"
#include "paged_attention_mma.cu"
#include "paged_attention_tc.cu"
