// Plain-value reports the engine gives its callers between steps: the paged KV cache as the
// UI's block map sees it (every block, the pool's counters, the sequences that own blocks and
// the scheduler's queues), and where the engine's memory goes. Copies, safe to pass to the GUI.
#pragma once

#include "iwb/engine/paged/kv_snapshot.h"
#include "iwb/engine/paged/scheduler.h"

#include <cstdint>
#include <vector>

namespace iwb {

// One sequence the scheduler holds (BlockSnapshot::owners name these ids).
struct KvSequenceInfo {
  SequenceId sequence = 0;
  RequestId request = 0;               // the Engine request it generates for
  bool is_running = false;             // false: waiting for admission (new, or preempted)
  int64_t num_tokens = 0;              // prompt + generated so far
  int64_t num_prompt_tokens = 0;
  int64_t num_computed_tokens = 0;     // tokens whose keys and values are in the cache
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
};

// Bytes the engine holds, by purpose.
struct MemoryReport {
  uint64_t weights_bytes = 0;       // model tensors as stored, mapped from the GGUF file
  uint64_t file_bytes = 0;          // the whole mapped file (header and metadata included)
  uint64_t kv_pool_bytes = 0;       // the paged KV pool, allocated whole at load
  uint64_t kv_bytes_per_position = 0;
  int64_t kv_num_blocks = 0;
  int32_t kv_block_size = 0;
  int64_t kv_positions_total = 0;   // num_blocks * block_size
  int64_t kv_positions_used = 0;    // slots holding tokens of live sequences
  int64_t kv_positions_allocated = 0;  // slots of blocks owned by live sequences (used + unused tails)
  int64_t kv_positions_cached = 0;  // slots of unowned blocks kept as reusable prefixes
  uint64_t scratch_bytes = 0;       // activations of one step and the logits rows
  uint64_t drafter_bytes = 0;       // speculative decoding: draft weights, its KV cache and scratch
};

}  // namespace iwb
