// Embedding lookup: dequantize the table row of each token (scaled for gemma).
#include "iwb/kernels/embedding.h"

#include "iwb/kernels/dequantize.h"
#include "iwb/kernels/dequantize_fast.h"

namespace iwb {
namespace {

bool valid(const EmbeddingArgs& a) {
  if (a.table == nullptr || a.tokens == nullptr || a.output == nullptr) return false;
  if (a.vocab_size <= 0 || a.dim <= 0 || a.num_tokens <= 0 || !ggml_can_dequantize(a.table_type)) return false;
  if (!ggml_row_bytes(a.table_type, a.dim)) return false;
  for (int64_t t = 0; t < a.num_tokens; ++t) {
    if (a.tokens[t] < 0 || a.tokens[t] >= a.vocab_size) return false;
  }
  return true;
}

template <typename Dequantize>
bool lookup(const EmbeddingArgs& a, Dequantize dequantize) {
  if (!valid(a)) return false;
  const size_t stride = *ggml_row_bytes(a.table_type, a.dim);
  for (int64_t t = 0; t < a.num_tokens; ++t) {
    const auto* row = static_cast<const uint8_t*>(a.table) + static_cast<size_t>(a.tokens[t]) * stride;
    float* out = a.output + t * a.dim;
    if (!dequantize(a.table_type, row, out, a.dim)) return false;
    if (a.scale != 1.0f) {
      for (int64_t i = 0; i < a.dim; ++i) out[i] *= a.scale;
    }
  }
  return true;
}

}  // namespace

bool embedding_lookup(const EmbeddingArgs& a) { return lookup(a, dequantize_row); }
bool embedding_lookup_ref(const EmbeddingArgs& a) { return lookup(a, dequantize_row_ref); }

OpCost embedding_cost(const EmbeddingArgs& a) {
  OpCost cost;
  if (a.table == nullptr || a.dim <= 0 || a.num_tokens <= 0 || !ggml_row_bytes(a.table_type, a.dim)) return cost;
  const double n = static_cast<double>(a.num_tokens) * static_cast<double>(a.dim);
  cost.flops = a.scale != 1.0f ? n : 0.0;
  cost.bytes = static_cast<double>(*ggml_row_bytes(a.table_type, a.dim)) * static_cast<double>(a.num_tokens) +
               4.0 * n + 4.0 * static_cast<double>(a.num_tokens);
  return cost;
}

}  // namespace iwb
