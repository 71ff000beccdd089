// GPU attention over the paged KV cache (vLLM layout, see paged_attention.h): every query of a
// batch (decode, prefill chunks, or both mixed) over its sequence's keys through its block
// table, causal by position, grouped-query sharing, optional sliding window and soft-capping.
// paged_attention_ref is the CPU twin.
//
// One entry point serves decode and prefill: a thread block takes a query tile (up to
// paged_attention_cuda_plan(args).tile_tokens consecutive tokens of one sequence, times the
// query heads of one KV head) and one split of the key range, walks the keys through the block
// table with an online softmax in shared memory (no score matrix), and when the key range is
// split (small batches: flash-decoding) a second kernel combines the partial (max, sum, acc)
// results. Decode batches run on f32 CUDA cores; batches where a sequence brings several
// queries use tensor cores (see allow_tensor_cores). Query tiles are planned on the device from
// token_sequences (one token per sequence needs no planning: each token is its tile); the grid
// depends only on num_tokens, num_sequences, max_blocks_per_sequence * block_size and the model
// sizes, so a captured CUDA graph stays valid while sequences grow (empty splits exit early).
#pragma once

#include "iwb/kernels/cuda/paged_attention_plan.h"
#include "iwb/kernels/ggml_type.h"

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace iwb {

struct PagedAttentionCudaArgs {
  const float* q = nullptr;           // device [num_tokens x num_heads x head_dim]
  const uint16_t* k_cache = nullptr;  // device, one layer's keys (k_type: see paged_attention.h)
  const uint16_t* v_cache = nullptr;  // device, one layer's values
  int64_t num_blocks = 0;
  int64_t block_size = 0;
  const int32_t* block_tables = nullptr;  // device [num_sequences x max_blocks_per_sequence]
  int64_t max_blocks_per_sequence = 0;
  const int32_t* sequence_lengths = nullptr;  // device [num_sequences]
  int64_t num_sequences = 0;
  const int32_t* token_sequences = nullptr;  // device [num_tokens]; a sequence's tokens are contiguous
  const int32_t* positions = nullptr;        // device [num_tokens], < the sequence's length
  int64_t num_tokens = 0;
  int64_t num_heads = 0;
  int64_t num_kv_heads = 0;  // divides num_heads; num_heads / num_kv_heads <= 64
  int64_t head_dim = 0;      // multiple of 8 (16 with a quantized side), <= 256
  int64_t head_dim_v = 0;    // multiple of 8 (16 with a quantized side), <= 256
  float scale = 1.0f;
  int64_t sliding_window = 0;    // > 0: query at p sees keys p - window < key <= p
  float softcap = 0.0f;          // > 0: score = softcap * tanh(score / softcap)
  const float* sinks = nullptr;  // device [num_heads]: gpt-oss's attention sinks (a logit
                                 // per head in the softmax, with no value), or null
  float* output = nullptr;       // device [num_tokens x num_heads x head_dim_v]
  // The cache types, each side its own (as the CPU's PagedAttentionArgs): F16, a block type
  // (Q8_0, Q5_1, Q5_0, Q4_1, Q4_0: head sizes multiples of 32; rows Hadamard-rotated when
  // is_rotated, as write_kv_paged_cuda stores them) or F8_E4M3. A quantized tile is expanded to
  // f16 in shared memory (d * q rounded to f16; FP8 values exactly, their scales applied to the
  // scores and the output in f32). Rotated keys: the queries are rotated first (a copy in the
  // workspace); rotated values: the output is rotated back at the end.
  GgmlType k_type = GgmlType::F16;
  GgmlType v_type = GgmlType::F16;
  bool is_rotated = true;
  const float* k_scale = nullptr;  // device, one float: FP8 keys' scale (null: 1; other types: unused)
  const float* v_scale = nullptr;  // device, one float: FP8 values' scale
  // Batches where some sequence has several queries (num_tokens > num_sequences) run on tensor
  // cores when head sizes are multiples of 16 (Q and the softmax weights rounded to f16); false
  // keeps every batch on the f32 kernel.
  bool allow_tensor_cores = true;
  void* workspace = nullptr;   // device scratch, 256-byte aligned
  size_t workspace_bytes = 0;  // >= paged_attention_cuda_workspace_bytes(args)
};

// The launch shape these arguments get (host arithmetic only; see paged_attention_plan.h).
AttentionLaunchPlan paged_attention_cuda_plan(const PagedAttentionCudaArgs& args);

// Scratch the call needs (query tile list, partial results when the key range is split, the
// rotated queries of a rotated key cache). Depends only on the fixed sizes, like the grid.
size_t paged_attention_cuda_workspace_bytes(const PagedAttentionCudaArgs& args);

// cudaErrorInvalidValue for: null pointers, sizes <= 0 (num_tokens 0 is fine), num_heads not a
// multiple of num_kv_heads or a group over 64, head sizes not multiples of 8 (16 with a
// quantized side, 32 for a block type) or over 256, a type that is no KV cache type, a negative
// window, caches not 16-byte aligned, a workspace that is too small or not 256-byte aligned.
// Device data (block ids, lengths, positions) is not checked; the kernels clamp what they read
// so bad values give wrong numbers, never out-of-bounds accesses.
cudaError_t paged_attention_cuda_check(const PagedAttentionCudaArgs& args);

cudaError_t paged_attention_cuda(const PagedAttentionCudaArgs& args, cudaStream_t stream);

}  // namespace iwb
