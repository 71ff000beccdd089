// What the CUDA backend allocates besides weights and the KV pool, in plain C++ so the Memory
// tab can estimate it before a load (and on machines without CUDA): the sizes below are the ones
// CudaForwardBackend::allocate_scratch uses.
#pragma once

#include "iwb/engine/model/model_info.h"

#include <cstdint>

namespace iwb {

inline constexpr uint64_t kCudaCublasWorkspaceBytes = uint64_t{32} << 20;  // what cuBLAS asks for on Hopper
inline constexpr int64_t kCudaMaxLogitsChunkRows = 128;                    // logits rows computed together
inline constexpr int64_t kCudaMatvecTokens = 8;  // products of more tokens go through cuBLAS (kCudaMatvecMaxTokens)

// Device scratch for steps of up to max_batch_tokens tokens: f32 activations (and logits rows),
// the int8 activations of up to kCudaMatvecTokens tokens, and past kCudaMatvecTokens an f16 copy of the largest
// weight, f16 activations and the cuBLAS workspace. The largest weight is taken as the widest of
// the output head, the FFN and the attention projections (the summary has no tensor shapes);
// the attention workspace (a few MiB to tens of MiB) is left out.
uint64_t estimate_cuda_scratch_bytes(const ModelHyperParams& h, int64_t max_batch_tokens);

}  // namespace iwb
