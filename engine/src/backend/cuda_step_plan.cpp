// check_cuda_plan_support, check_cuda_step, pack_block_tables, decode_graph_key, logits_row_chunks,
// cuda_may_launch_programmatically (see cuda_step_plan.h).
#include "iwb/engine/backend/cuda_step_plan.h"

#include <algorithm>
#include <string>
#include <string_view>

namespace iwb {
namespace {

Status refuse(const std::string& what) { return make_error(ErrorCode::InvalidArgument, "the CUDA step " + what); }

}  // namespace

Status check_cuda_plan_support(const ForwardPlan& plan) {
  // What the device has no kernel for; refusing here lets "auto" pick the CPU.
  const ModelConfig& c = plan.config;
  const auto no_kernel = [&](const std::string& what) {
    return make_error(ErrorCode::Unsupported, "the CUDA backend has no kernel for " + what + " (" +
                                                  c.architecture_name + "); the CPU runs this model");
  };
  if (plan.options.exports_hidden) return no_kernel("multi-token prediction (the hidden states an MTP head reads)");
  if (c.has_recurrent_layers()) return no_kernel("recurrent layers (Qwen 3.5's gated delta net)");
  if (c.has_attention_output_gate) return no_kernel("the attention output gate (Qwen 3.5's)");
  if (c.has_layer_attention_shapes()) return no_kernel("layers of different attention shapes (Gemma 4's)");
  if (c.has_value_norm) return no_kernel("normed values (Gemma 4's)");
  if (c.has_experts()) {
    if (c.has_parallel_dense_ffn) return no_kernel("experts beside a dense FFN (Gemma 4's)");
    if (c.num_expert_groups > 1) return no_kernel("group-limited expert routing (DeepSeek V3's)");
    if (c.has_shared_expert_gate) return no_kernel("the shared expert's gate (Qwen 3.5's)");
    if (c.num_experts > kCudaPlanMaxExperts || c.num_experts_used > std::min(c.num_experts, kCudaPlanMaxExpertsUsed)) {
      return no_kernel(std::to_string(c.num_experts) + " experts, " + std::to_string(c.num_experts_used) +
                       " a token (the routing kernel takes up to " + std::to_string(kCudaPlanMaxExperts) + ", " +
                       std::to_string(kCudaPlanMaxExpertsUsed) + " a token)");
    }
  }
  for (const PlanOp& op : plan.body) {
    switch (op.kind) {
      case PlanOpKind::Concat: return no_kernel("multi-token prediction");
      case PlanOpKind::LayerScale: return no_kernel("a layer output scale (Gemma 4's)");
      case PlanOpKind::PerLayerInputs: return no_kernel("per-layer embeddings (Gemma 4's)");
      case PlanOpKind::LatentKv:
      case PlanOpKind::HeadMatmuls: return no_kernel("multi-head latent attention");
      default: break;
    }
  }
  return {};
}

Status check_cuda_step(const FlatBatch& b, const CudaStepCapacity& c) {
  const auto n = static_cast<int64_t>(b.tokens.size());
  const auto num_sequences = static_cast<int64_t>(b.sequence_lengths.size());
  if (n == 0) return refuse("has no tokens");
  if (n > c.max_tokens) {
    return refuse("has " + std::to_string(n) + " tokens, more than the " + std::to_string(c.max_tokens) +
                  " its buffers hold");
  }
  if (num_sequences == 0 || num_sequences > c.max_sequences) {
    return refuse("has " + std::to_string(num_sequences) + " sequences; its buffers hold 1 to " +
                  std::to_string(c.max_sequences));
  }
  if (b.positions.size() != b.tokens.size() || b.slot_mapping.size() != b.tokens.size() ||
      b.token_sequences.size() != b.tokens.size() || b.logits_rows.size() > b.tokens.size() ||
      b.logits_sequences.size() != b.logits_rows.size()) {
    return refuse("arrays differ in length");
  }
  if (b.max_blocks_per_sequence < 0 || b.max_blocks_per_sequence > c.max_blocks_per_sequence ||
      static_cast<int64_t>(b.block_tables.size()) != num_sequences * b.max_blocks_per_sequence) {
    return refuse("has block tables of " + std::to_string(b.max_blocks_per_sequence) +
                  " blocks per sequence; the context allows " + std::to_string(c.max_blocks_per_sequence));
  }
  for (const int32_t block : b.block_tables) {
    if (block < -1 || block >= c.num_blocks)
      return refuse("names KV block " + std::to_string(block) + ", outside the pool");
  }
  const int64_t num_slots = c.num_blocks * c.block_size;
  for (int64_t t = 0; t < n; ++t) {
    const int32_t token = b.tokens[static_cast<size_t>(t)];
    if (token < 0 || token >= c.vocab_size) {
      return make_error(ErrorCode::InvalidArgument, "token id " + std::to_string(token) +
                                                        " is outside the vocabulary (" + std::to_string(c.vocab_size) +
                                                        " tokens)");
    }
    const int32_t s = b.token_sequences[static_cast<size_t>(t)];
    if (s < 0 || s >= num_sequences) return refuse("maps a token to a sequence outside the batch");
    if (t > 0 && s < b.token_sequences[static_cast<size_t>(t - 1)])
      return refuse("interleaves the tokens of sequences");
    const int32_t position = b.positions[static_cast<size_t>(t)];
    if (position < 0 || position >= b.sequence_lengths[static_cast<size_t>(s)]) {
      return refuse("has a token at position " + std::to_string(position) + " past its sequence's length");
    }
    const int64_t slot = b.slot_mapping[static_cast<size_t>(t)];
    if (slot >= num_slots) return refuse("writes KV slot " + std::to_string(slot) + ", outside the pool");
  }
  for (const int32_t length : b.sequence_lengths) {
    if (length < 1 || length > b.max_blocks_per_sequence * c.block_size) {
      return refuse("has a sequence of " + std::to_string(length) + " positions that its block table cannot hold");
    }
  }
  for (const int32_t row : b.logits_rows) {
    if (row < 0 || row >= n) return refuse("asks for the logits of a row outside its tokens");
  }
  return {};
}

void pack_block_tables(const FlatBatch& b, int64_t width, std::span<int32_t> out) {
  std::fill(out.begin(), out.end(), 0);
  const auto num_sequences = static_cast<int64_t>(b.sequence_lengths.size());
  const int64_t used = std::min(width, b.max_blocks_per_sequence);
  for (int64_t s = 0; s < num_sequences && (s + 1) * width <= static_cast<int64_t>(out.size()); ++s) {
    for (int64_t j = 0; j < used; ++j) {
      const int32_t block = b.block_tables[static_cast<size_t>(s * b.max_blocks_per_sequence + j)];
      out[static_cast<size_t>(s * width + j)] = block < 0 ? 0 : block;
    }
  }
}

std::optional<DecodeGraphKey> decode_graph_key(const FlatBatch& b, int64_t max_rows) {
  const auto n = static_cast<int64_t>(b.tokens.size());
  const auto num_sequences = static_cast<int64_t>(b.sequence_lengths.size());
  if (n == 0 || n != num_sequences || static_cast<int64_t>(b.logits_rows.size()) != n || n > max_rows) {
    return std::nullopt;
  }
  for (int64_t t = 0; t < n; ++t) {
    if (b.token_sequences[static_cast<size_t>(t)] != t || b.logits_rows[static_cast<size_t>(t)] != t)
      return std::nullopt;
  }
  return DecodeGraphKey{n, num_sequences};
}

bool cuda_may_launch_programmatically(int compute_capability_major, const char* pdl_env) {
  return compute_capability_major >= 9 && (pdl_env == nullptr || std::string_view(pdl_env) != "0");
}

std::vector<RowChunk> logits_row_chunks(int64_t num_rows, int64_t chunk_rows) {
  std::vector<RowChunk> chunks;
  if (num_rows <= 0 || chunk_rows <= 0) return chunks;
  for (int64_t first = 0; first < num_rows; first += chunk_rows) {
    chunks.push_back({first, std::min(chunk_rows, num_rows - first)});
  }
  return chunks;
}

}  // namespace iwb
