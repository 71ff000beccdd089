// Host-side planning of the CUDA forward pass's steps, plain C++ so it is tested without a GPU:
// whether the device runs a model's plan at all, whether a step fits the buffers sized at load,
// the fixed-width block tables a captured graph needs, which steps replay a CUDA graph (and
// under which key), and the chunks the logits rows are computed in.
#pragma once

#include "iwb/engine/paged/forward_batch.h"
#include "iwb/engine/plan/forward_plan.h"
#include "iwb/engine/status.h"

#include <compare>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

namespace iwb {

// What the device buffers were sized for at load.
struct CudaStepCapacity {
  int64_t max_tokens = 0;               // tokens per step (EngineOptions::max_batch_tokens)
  int64_t max_sequences = 0;            // sequences per step
  int64_t max_blocks_per_sequence = 0;  // the fixed block-table width: ceil(context / block_size)
  int64_t num_blocks = 0;               // blocks in the pool
  int64_t block_size = 0;
  int64_t vocab_size = 0;
};

// Everything the device would otherwise read out of bounds, checked on the host: array lengths
// agree, counts within the capacity, token ids in the vocabulary, slots and block ids in the
// pool, positions below their sequence's length, logits rows among the step's tokens.
Status check_cuda_step(const FlatBatch& batch, const CudaStepCapacity& capacity);

// The batch's block tables re-laid at the fixed width (rows of `width`, unused entries 0 so a
// stray read stays inside the pool), `num_sequences` rows into `out` [num_sequences x width].
void pack_block_tables(const FlatBatch& batch, int64_t width, std::span<int32_t> out);

// A decode step (every sequence runs exactly one token and samples it) replays a CUDA graph
// captured for its shape: the grid sizes depend only on these two counts.
struct DecodeGraphKey {
  int64_t num_tokens = 0;
  int64_t num_sequences = 0;
  bool is_argmax = false;  // the graph ends with the greedy argmax rather than the logits
  auto operator<=>(const DecodeGraphKey&) const = default;
};

// The key when `batch` is such a decode step with at most `max_rows` logits rows, else nullopt
// (prefill chunks, speculative verification, rows past the logits buffer run eagerly).
std::optional<DecodeGraphKey> decode_graph_key(const FlatBatch& batch, int64_t max_rows);

// Rows [first, first + count) of the logits computed together: chunks of at most `chunk_rows`.
struct RowChunk {
  int64_t first = 0;
  int64_t count = 0;
};
std::vector<RowChunk> logits_row_chunks(int64_t num_rows, int64_t chunk_rows);

// Whether the device's kernels are launched programmatically (each may start while the one
// before it finishes: iwb/kernels/cuda/launch_cuda.h): Hopper and later (compute capability 9.0
// or more, where the griddepcontrol instructions exist), unless the environment's IWB_CUDA_PDL
// (`pdl_env`, null when unset) is "0": the two side by side in benchmarks.
bool cuda_may_launch_programmatically(int compute_capability_major, const char* pdl_env);

// Most experts, and most chosen per token, the device's routing takes (experts_cuda.h's
// kCudaMaxExperts and kCudaMaxExpertsUsed; cuda_experts.cpp checks they agree).
inline constexpr int64_t kCudaPlanMaxExperts = 512;
inline constexpr int64_t kCudaPlanMaxExpertsUsed = 32;

// Whether the CUDA backend runs every op of `plan`: an Unsupported error naming what it lacks
// otherwise (gpt-oss's attention sinks, latent attention, Gemma 4's and Qwen 3.5's layers, ...),
// which the engine's "auto" device turns into a fallback to the CPU, before any weight is uploaded.
Status check_cuda_plan_support(const ForwardPlan& plan);

}  // namespace iwb
