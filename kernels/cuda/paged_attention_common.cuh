// Pieces shared by the two paged attention kernels (paged_attention.cu: f32 CUDA cores, any
// batch; paged_attention_tc.cu: f16 tensor cores for prefill tiles): the kernel parameters, the
// key range and cache slot arithmetic, and the loading of key/value tiles into shared memory.
#pragma once

#include "cuda_common.cuh"
#include "iwb/kernels/cuda/paged_attention_plan.h"
#include "kv_quant.cuh"

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace iwb::cuda_detail {

struct AttentionParams {
  const float* q;
  const uint16_t* k_cache;
  const uint16_t* v_cache;
  int64_t num_blocks, block_size;
  const int32_t* block_tables;
  int64_t max_blocks_per_sequence;
  const int32_t* sequence_lengths;
  int64_t num_sequences;
  const int32_t* token_sequences;
  const int32_t* positions;
  int64_t num_tokens, num_heads, num_kv_heads, group;
  int head_dim, head_dim_v, k_stride;  // k_stride: halfs per key row in shared memory
  int64_t k_row_units, v_row_units;    // uint16 units per cache slot (all KV heads)
  int64_t k_head_units, v_head_units;  // uint16 units per KV head within a slot
  float scale, softcap;
  int64_t sliding_window;
  float* output;
  const int32_t* tiles;  // first token of each query tile, -1 past the last; null: tile i is token i
  int64_t tile_tokens, split_size, num_splits;
  float* part_max;
  float* part_sum;
  float* part_acc;
  int k_code, v_code;    // KvCode of each side (kv_quant.cuh)
  const float* k_scale;  // FP8 keys' scale (device, null: 1): multiplies the scores
  const float* v_scale;  // FP8 values' scale (device, null: 1): multiplies the output
  const float* sinks;    // per head (device, null: none): gpt-oss's attention sinks
};

// The query's factor (softmax scale times the FP8 keys' scale) and the output's (FP8 values' scale).
__device__ inline float query_factor(const AttentionParams& p) {
  return p.k_scale != nullptr ? p.scale * *p.k_scale : p.scale;
}
__device__ inline float output_factor(const AttentionParams& p) { return p.v_scale != nullptr ? *p.v_scale : 1.0f; }

// A row's softmax denominator from its scores' max and its sum of exp(score - max): with an
// attention sink (gpt-oss: one more logit per head, with no value) exp(sink - max) more, so the
// weights sum to less than 1 as the CPU's softmax_row_with_sink gives them. A row without a
// visible key (max -inf) keeps 0: its output is 0 either way.
__device__ inline float softmax_denominator(const AttentionParams& p, int64_t head, float max, float sum) {
  return p.sinks != nullptr && max != -INFINITY ? sum + expf(p.sinks[head] - max) : sum;
}

__device__ inline int64_t first_visible(int64_t pos, int64_t window) {
  return window > 0 ? max(int64_t{0}, pos - window + 1) : 0;
}

// The first token of this thread block's query tile: from the planned list, or (no list: every
// sequence has one token, so each token is a tile) the block index itself.
__device__ inline int64_t first_token_of_tile(const AttentionParams& p) {
  return p.tiles != nullptr ? static_cast<int64_t>(p.tiles[blockIdx.x]) : static_cast<int64_t>(blockIdx.x);
}

// The tile's tokens: consecutive tokens of the first one's sequence, at most tile_tokens.
__device__ inline int tile_token_count(const AttentionParams& p, int64_t first, int32_t seq) {
  int n = 0;
  while (n < p.tile_tokens && first + n < p.num_tokens && p.token_sequences[first + n] == seq) ++n;
  return n;
}

// What a thread block of the attention kernels covers: its tile's tokens (consecutive tokens of
// one sequence) and the keys [key_begin, key_end) any of them sees within the block's key split,
// clamped to the sequence and its block table. The three kernels (paged_attention.cu,
// paged_attention_tc.cu, paged_attention_mma.cu) must agree on it: the combine kernel recomputes
// which splits a row has.
struct TileKeys {
  int32_t seq = -1;
  bool is_seq_valid = false;
  int num_tokens = 0;       // tokens of the tile
  int num_active_rows = 0;  // tokens x the query group
  int64_t key_begin = 0, key_end = 0;
};

__device__ inline TileKeys tile_keys(const AttentionParams& p, int64_t tile_first, int64_t split) {
  TileKeys t;
  t.seq = p.token_sequences[tile_first];
  t.is_seq_valid = t.seq >= 0 && t.seq < p.num_sequences;
  t.num_tokens = t.is_seq_valid ? tile_token_count(p, tile_first, t.seq) : 0;
  t.num_active_rows = t.num_tokens * static_cast<int>(p.group);
  int64_t lo = INT64_MAX, hi = 0;
  for (int i = 0; i < t.num_tokens; ++i) {
    const int64_t pos = p.positions[tile_first + i];
    lo = min(lo, first_visible(pos, p.sliding_window));
    hi = max(hi, pos + 1);
  }
  if (t.is_seq_valid) {
    hi = min(hi, static_cast<int64_t>(p.sequence_lengths[t.seq]));
    hi = min(hi, p.max_blocks_per_sequence * p.block_size);
  }
  t.key_begin = max(lo, split * p.split_size);
  t.key_end = min(hi, (split + 1) * p.split_size);
  return t;
}

// The cache slot of key position pos, or -1 past key_end or behind a block id outside the pool.
__device__ inline int64_t slot_of(const AttentionParams& p, const int32_t* table, int64_t pos, int64_t key_end) {
  if (pos >= key_end) return -1;
  const int64_t block = table[pos / p.block_size];
  if (block < 0 || block >= p.num_blocks) return -1;
  return block * p.block_size + pos % p.block_size;
}

// Keys and values of positions key0 .. key0 + kKeys - 1 of KV head g into shared memory as f16
// (rows k_stride / v_stride halfs apart, 4-byte aligned), zeros
// for missing slots (so garbage never turns into NaN through 0 * inf).
// kIsF16 (both sides F16): 16-byte loads (head rows start 16-byte aligned: head sizes are
// multiples of 8). Otherwise a thread expands 16 values of one side (kv_quant.cuh: d * q
// rounded to f16, FP8 exactly, F16 as it is); blocks are 2 to 34 bytes, so only 2-byte loads.
template <bool kIsF16, int kKeys>
__device__ inline void load_kv_tile(const AttentionParams& p, const int32_t* table, int64_t g, int64_t key0,
                                    int64_t key_end, __half* k_s, int k_stride, __half* v_s, int v_stride) {
  constexpr int kValuesPerPiece = kIsF16 ? 8 : 16;
  const int k_pieces = p.head_dim / kValuesPerPiece, v_pieces = p.head_dim_v / kValuesPerPiece;
  for (int idx = threadIdx.x; idx < kKeys * (k_pieces + v_pieces); idx += blockDim.x) {
    const bool is_key = idx < kKeys * k_pieces;
    const int local = is_key ? idx : idx - kKeys * k_pieces;
    const int pieces = is_key ? k_pieces : v_pieces;
    const int kk = local / pieces, piece = local % pieces;
    const int64_t slot = slot_of(p, table, key0 + kk, key_end);
    __half* dst =
        is_key ? k_s + kk * k_stride + piece * kValuesPerPiece : v_s + kk * v_stride + piece * kValuesPerPiece;
    if constexpr (kIsF16) {
      uint4 data = make_uint4(0, 0, 0, 0);
      if (slot >= 0) {
        const uint16_t* src = is_key ? p.k_cache + slot * p.k_row_units + g * p.head_dim
                                     : p.v_cache + slot * p.v_row_units + g * p.head_dim_v;
        data = *reinterpret_cast<const uint4*>(src + piece * 8);
      }
      uint32_t* words = reinterpret_cast<uint32_t*>(dst);
      words[0] = data.x;
      words[1] = data.y;
      words[2] = data.z;
      words[3] = data.w;
    } else {
      __half2* out = reinterpret_cast<__half2*>(dst);
      if (slot < 0) {
        for (int u = 0; u < 8; ++u) out[u] = __floats2half2_rn(0.0f, 0.0f);
        continue;
      }
      const uint16_t* head = is_key ? p.k_cache + slot * p.k_row_units + g * p.k_head_units
                                    : p.v_cache + slot * p.v_row_units + g * p.v_head_units;
      float values[16];
      expand_kv_piece(is_key ? p.k_code : p.v_code, head, piece, 1.0f, values);
      for (int u = 0; u < 8; ++u) out[u] = __floats2half2_rn(values[2 * u], values[2 * u + 1]);
    }
  }
}

// The tensor-core kernel (paged_attention_tc.cu): query tiles of plan.rows_per_block rows
// (16 per warp), keys 64 at a time, Q and P rounded to f16, f32 accumulation. It needs head sizes
// that are multiples of 16 and writes the same outputs / split partials as the f32 kernel.
bool attention_tc_supports(int64_t head_dim, int64_t head_dim_v);
cudaError_t launch_attention_tc(const AttentionParams& params, const AttentionLaunchPlan& plan, bool is_f16,
                                cudaStream_t stream);

// The register-resident tensor-core kernel (paged_attention_mma.cu), preferred over the WMMA one
// where it applies: equal key and value head sizes of 64, 80, 96 or 128 and 64-row tiles.
bool attention_mma_supports(int64_t head_dim, int64_t head_dim_v, int64_t rows_per_block);
cudaError_t launch_attention_mma(const AttentionParams& params, const AttentionLaunchPlan& plan, bool is_f16,
                                 cudaStream_t stream);

}  // namespace iwb::cuda_detail
