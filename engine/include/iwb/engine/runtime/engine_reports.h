// Plain-value reports the engine gives its callers between steps: the paged KV cache as the
// UI's block map sees it (every block, the pool's counters, the sequences that own blocks and
// the scheduler's queues), and where the engine's memory goes. Copies, safe to pass to the GUI.
#pragma once

#include "iwb/engine/paged/kv_snapshot.h"
#include "iwb/engine/paged/scheduler.h"

#include <cstdint>
#include <string>
#include <vector>

namespace iwb {

// One sequence the scheduler holds (BlockSnapshot::owners name these ids).
struct KvSequenceInfo {
  SequenceId sequence = 0;
  RequestId request = 0;    // the Engine request it generates for
  bool is_running = false;  // false: waiting for admission (new, or preempted)
  int64_t num_tokens = 0;   // prompt + generated so far
  int64_t num_prompt_tokens = 0;
  int64_t num_computed_tokens = 0;       // tokens whose keys and values are in the cache
  int64_t num_cached_prompt_tokens = 0;  // prefix-cache hit when it was last admitted
  int64_t num_preemptions = 0;
};

struct EngineKvSnapshot {
  // Every block (free / cached prefix / in use, owners, fill, tokens) and the pool's counters:
  // cache.stats.num_used_blocks / num_blocks, utilisation, internal_fragmentation,
  // prefix_hit_rate, num_evictions, num_copy_on_writes.
  KvCacheSnapshot cache;
  // Waiting and running counts, preemptions, failures and steps since the load.
  SchedulerStats scheduler;
  std::vector<KvSequenceInfo> sequences;  // waiting ones first (in admission order), then running
  uint64_t bytes_per_block = 0;           // K and V of all layers
  std::string cache_type = "f16";         // "q8_0", or keys/values "q8_0/q4_0" (kv_cache_types_name)
};

// Bytes the engine holds, by purpose.
struct MemoryReport {
  uint64_t weights_bytes = 0;  // model tensors as stored, mapped from the GGUF file
  uint64_t file_bytes = 0;     // the whole mapped file (header and metadata included)
  // The file read into memory of the process's own instead of mapped (EngineOptions::load_mode):
  // resident as anonymous memory (RssAnon), not as file pages. 0 when mapped.
  uint64_t weights_read_bytes = 0;
  uint64_t kv_pool_bytes = 0;       // the paged KV pool, allocated whole at load
  uint64_t kv_huge_page_bytes = 0;  // of a host pool, in 2 MiB pages (counted at load); 0 on a device
  uint64_t kv_bytes_per_position = 0;
  std::string kv_cache_type = "f16";  // as EngineKvSnapshot::cache_type
  int64_t kv_num_blocks = 0;
  int32_t kv_block_size = 0;
  int64_t kv_positions_total = 0;      // num_blocks * block_size
  int64_t kv_positions_used = 0;       // slots holding tokens of live sequences
  int64_t kv_positions_allocated = 0;  // slots of blocks owned by live sequences (used + unused tails)
  int64_t kv_positions_cached = 0;     // slots of unowned blocks kept as reusable prefixes
  uint64_t scratch_bytes = 0;          // activations of one step and the logits rows
  uint64_t drafter_bytes = 0;          // speculative decoding: draft weights, its KV cache and scratch
  // Recurrent layers (Qwen 3.5): the live sequences' states, beside the KV pool, and one
  // sequence's (ModelConfig::recurrent_state_bytes); 0 for other models.
  uint64_t recurrent_state_bytes = 0;
  uint64_t recurrent_state_bytes_per_sequence = 0;
  int64_t recurrent_num_sequences = 0;
  // Prefix caching's copies of states at block boundaries (EngineOptions::max_state_checkpoints).
  uint64_t recurrent_checkpoint_bytes = 0;
  int64_t recurrent_num_checkpoints = 0;

  // Where the forward pass runs: "cpu" or "cuda:N". On a CUDA device the weights are uploaded
  // and the KV pool lives there (kv_pool_bytes above is then device memory too); the fields
  // below are that device's allocations, all 0 on the CPU.
  std::string device_id = "cpu";
  std::string device_name;              // CPU model name or GPU product name
  uint64_t device_weights_bytes = 0;    // matrices in their stored type (or converted), norms and biases as f32
  uint64_t device_kv_pool_bytes = 0;    // the paged K/V pools of every layer
  uint64_t device_scratch_bytes = 0;    // activations of one step, f16 staging for cuBLAS, attention workspace,
                                        // the step's metadata and logits rows
  uint64_t device_workspace_bytes = 0;  // the workspace handed to cuBLAS
  uint64_t host_pinned_bytes = 0;       // page-locked host staging buffers (metadata up, logits down)
  uint64_t device_free_bytes = 0;       // free device memory when the report was made (all processes)
  uint64_t device_total_bytes = 0;
  int32_t device_num_graphs = 0;  // captured decode-step CUDA graphs (one per batch shape)
};

}  // namespace iwb
