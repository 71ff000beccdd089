#include "iwb/engine/backend/cuda_scratch_estimate.h"

#include <algorithm>

namespace iwb {
namespace {

uint64_t align_256(uint64_t bytes) { return (bytes + 255) / 256 * 256; }

}  // namespace

uint64_t estimate_cuda_scratch_bytes(const ModelHyperParams& h, int64_t max_batch_tokens) {
  const auto t = static_cast<uint64_t>(std::max<int64_t>(1, max_batch_tokens));
  const auto chunk = static_cast<uint64_t>(std::min<int64_t>(static_cast<int64_t>(t), kCudaMaxLogitsChunkRows));
  const auto emb = static_cast<uint64_t>(h.embedding_length);
  const auto ffn = static_cast<uint64_t>(h.feed_forward_length);
  const auto q = static_cast<uint64_t>(h.head_count * h.key_length);
  const auto k = static_cast<uint64_t>(h.head_count_kv * h.key_length);
  const auto v = static_cast<uint64_t>(h.head_count_kv * h.value_length);
  const auto attn_out = static_cast<uint64_t>(h.head_count * h.value_length);
  const auto vocab = static_cast<uint64_t>(h.vocab_size);
  // Expert layers: the router's logits, each routed row's gate, up and output, the shared
  // experts' gate and up, the routing's choices and weights; the grouping's rows, places and
  // group table (cuda_expert_max_groups: a group of 8 rows, or one per expert).
  const auto routed = t * static_cast<uint64_t>(h.expert_used_count);
  const auto expert_ff = static_cast<uint64_t>(h.expert_feed_forward_length);
  const auto shared = static_cast<uint64_t>(h.expert_shared_feed_forward_length > 0
                                                ? h.expert_shared_feed_forward_length
                                                : h.expert_shared_count * h.expert_feed_forward_length);
  const uint64_t max_groups =
      h.expert_count > 0 ? (routed + 7) / 8 + std::min<uint64_t>(static_cast<uint64_t>(h.expert_count), routed) : 0;
  // The f32 activations, one 256-byte aligned buffer each (as allocated).
  const uint64_t widths[] = {t * emb,
                             t * emb,
                             t * q,
                             t * k,
                             t * v,
                             t * attn_out,
                             t * emb,
                             t * ffn,
                             t * ffn,
                             chunk * emb,
                             chunk * vocab,
                             t * static_cast<uint64_t>(h.expert_count),
                             routed * expert_ff,
                             routed * expert_ff,
                             routed * emb,
                             t * shared,
                             t * shared,
                             routed,
                             routed,
                             routed * emb,
                             routed,
                             routed,
                             3 * max_groups,
                             h.expert_count > 0 ? 1u : 0u};
  uint64_t bytes = 0;
  for (const uint64_t w : widths) bytes += align_256(w * 4);
  // int8 activations of up to kCudaMatvecTokens tokens (the split-layout products) and their scales.
  const uint64_t widest = std::max({emb, ffn, expert_ff, shared, q, attn_out});
  const uint64_t widest32 = (widest + 31) / 32 * 32;
  bytes += align_256(widest32 * kCudaMatvecTokens) + widest32 / 32 * 4 * kCudaMatvecTokens;
  if (static_cast<int64_t>(t) > kCudaMatvecTokens) {
    const uint64_t largest = std::max({vocab * emb, emb * ffn, emb * expert_ff, emb * shared, q * emb, attn_out * emb});
    bytes += t * widest * 2 + largest * 2 + kCudaCublasWorkspaceBytes;
  }
  return bytes;
}

}  // namespace iwb
