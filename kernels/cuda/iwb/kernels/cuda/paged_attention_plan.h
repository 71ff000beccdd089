// Launch planning of the GPU paged attention (paged_attention_cuda.h), plain C++ so the CPU
// tests check it: query tile size, the fixed maximum number of query tiles and key splits, and
// the workspace layout. Everything here depends only on fixed sizes, never on sequence lengths.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

namespace iwb {

struct AttentionPlanInputs {
  int64_t num_tokens = 0;
  int64_t num_sequences = 0;
  int64_t num_heads = 0;
  int64_t num_kv_heads = 0;
  int64_t head_dim_v = 0;
  int64_t max_context = 0;  // max_blocks_per_sequence * block_size
};

struct AttentionLaunchPlan {
  int64_t rows_per_block = 0;   // (token, head) rows one thread block holds: 64, or 32 for head_dim_v > 128
  int64_t tile_tokens = 0;      // query tokens per tile: rows_per_block / group, at least 1
  int64_t max_tiles = 0;        // grid x: an upper bound on the tiles any batch of this shape needs
  int64_t split_size = 0;       // keys per split (a multiple of kAttentionKeyTile)
  int64_t num_splits = 0;       // grid z: ceil(max_context / split_size)
  size_t tiles_offset = 0;      // workspace layout, bytes: the tile list (int32 first token per tile)
  size_t max_offset = 0;        // partial maxima  [num_tokens x num_heads x num_splits] (when split)
  size_t sum_offset = 0;        // partial sums    [same]
  size_t acc_offset = 0;        // partial outputs [num_tokens x num_heads x num_splits x head_dim_v]
  size_t workspace_bytes = 0;
};

inline constexpr int64_t kAttentionKeyTile = 32;      // keys per shared-memory tile (one per lane)
inline constexpr int64_t kAttentionMinSplit = 128;    // smallest split worth a thread block (and a combine)
inline constexpr int64_t kAttentionTargetBlocks = 512;  // enough blocks to fill an H100 (132 SMs) ~4x
// A decode step (one token per sequence) splits finer: its thread blocks hold only a group of
// query heads each and walk their keys one 32-key tile after another, a chain of dependent
// loads (~9,000 cycles a tile on an H100, ncu: 47 us for 1,024 keys in 128-key splits). Short
// splits over many blocks read the same keys side by side instead.
inline constexpr int64_t kAttentionMinSplitDecode = kAttentionKeyTile;
inline constexpr int64_t kAttentionTargetBlocksDecode = 2048;

inline size_t attention_align_256(size_t bytes) { return (bytes + 255) / 256 * 256; }

// The plan for these sizes; all zeros when a size is not positive or the group exceeds 64.
inline AttentionLaunchPlan plan_paged_attention(const AttentionPlanInputs& in) {
  AttentionLaunchPlan p;
  if (in.num_tokens <= 0 || in.num_sequences <= 0 || in.num_heads <= 0 || in.num_kv_heads <= 0 ||
      in.head_dim_v <= 0 || in.max_context <= 0 || in.num_heads % in.num_kv_heads != 0) {
    return p;
  }
  const int64_t group = in.num_heads / in.num_kv_heads;
  p.rows_per_block = in.head_dim_v > 128 ? 32 : 64;
  if (group > p.rows_per_block) return AttentionLaunchPlan{};
  p.tile_tokens = std::max<int64_t>(1, p.rows_per_block / group);
  // A run of n tokens of one sequence takes ceil(n / T) <= floor(n / T) + 1 tiles.
  p.max_tiles = std::min(in.num_tokens, in.num_tokens / p.tile_tokens + in.num_sequences);
  // Split the keys only when tiles x KV heads cannot fill the GPU; the split count comes from
  // the maximum context so it never changes while sequences grow.
  const int64_t base_blocks = p.max_tiles * in.num_kv_heads;
  const bool is_decode = in.num_tokens == in.num_sequences;
  const int64_t target_blocks = is_decode ? kAttentionTargetBlocksDecode : kAttentionTargetBlocks;
  int64_t desired = 1;
  if (base_blocks < target_blocks) desired = (target_blocks + base_blocks - 1) / base_blocks;
  int64_t split = (in.max_context + desired - 1) / desired;
  split = std::max(split, is_decode ? kAttentionMinSplitDecode : kAttentionMinSplit);
  split = (split + kAttentionKeyTile - 1) / kAttentionKeyTile * kAttentionKeyTile;
  p.split_size = split;
  p.num_splits = (in.max_context + split - 1) / split;
  p.tiles_offset = 0;
  size_t bytes = attention_align_256(static_cast<size_t>(p.max_tiles) * sizeof(int32_t));
  if (p.num_splits > 1) {
    const size_t partials = static_cast<size_t>(in.num_tokens) * static_cast<size_t>(in.num_heads) *
                            static_cast<size_t>(p.num_splits);
    p.max_offset = bytes;
    bytes += attention_align_256(partials * sizeof(float));
    p.sum_offset = bytes;
    bytes += attention_align_256(partials * sizeof(float));
    p.acc_offset = bytes;
    bytes += attention_align_256(partials * static_cast<size_t>(in.head_dim_v) * sizeof(float));
  }
  p.workspace_bytes = bytes;
  return p;
}

}  // namespace iwb
