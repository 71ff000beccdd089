// Embedding lookup: one dequantized row of the token table per token, optionally scaled
// (gemma multiplies by sqrt(dim)). The table stays in its stored type.
#pragma once

#include "iwb/kernels/ggml_type.h"
#include "iwb/kernels/op_cost.h"

#include <cstdint>

namespace iwb {

struct EmbeddingArgs {
  GgmlType table_type = GgmlType::F32;
  const void* table = nullptr;     // [vocab_size rows of dim], row-major as GGUF stores it
  int64_t vocab_size = 0;
  int64_t dim = 0;
  const int32_t* tokens = nullptr; // [num_tokens]
  int64_t num_tokens = 0;
  float scale = 1.0f;
  float* output = nullptr;         // [num_tokens x dim]
};

// False when a token id is outside the table or the arguments are unusable.
bool embedding_lookup(const EmbeddingArgs& args);
bool embedding_lookup_ref(const EmbeddingArgs& args);
OpCost embedding_cost(const EmbeddingArgs& args);

}  // namespace iwb
