// GPU embedding gather: one row of the token table (kept in its stored GGUF type) per token,
// dequantized to f32 and optionally scaled (gemma: sqrt(dim)); embedding_lookup_ref is the CPU twin.
#pragma once

#include "iwb/kernels/ggml_type.h"

#include <cuda_runtime.h>

#include <cstdint>

namespace iwb {

struct EmbeddingCudaArgs {
  GgmlType table_type = GgmlType::F32;
  const void* table = nullptr;  // device [vocab_size rows of dim values], GGUF row layout
  int64_t vocab_size = 0;
  int64_t dim = 0;                  // a multiple of the type's block size
  const int32_t* tokens = nullptr;  // device [num_tokens]
  int64_t num_tokens = 0;
  float scale = 1.0f;
  float* output = nullptr;  // device [num_tokens x dim]
  // Optional device flag: set to 1 when a token id is outside [0, vocab_size) (its output row is
  // then zeros). Token ids live on the device, so this is how the caller learns of a bad one.
  int32_t* bad_token_flag = nullptr;
  bool is_split = false;  // Q4_0 / Q8_0 / Q6_K in the split layout (iwb/kernels/split_blocks.h), not GGUF rows
};

// Types the gather handles: F32, F16, BF16, Q4_0, Q8_0, Q4_K, Q6_K.
bool cuda_embedding_supports(GgmlType type);

// cudaErrorInvalidValue for an unsupported type, null pointers, sizes <= 0 (num_tokens 0 is
// fine), dim not a multiple of the block size or a misaligned table (2 bytes; 4 for F32).
cudaError_t embedding_cuda_check(const EmbeddingCudaArgs& args);
cudaError_t embedding_cuda(const EmbeddingCudaArgs& args, cudaStream_t stream);

}  // namespace iwb
