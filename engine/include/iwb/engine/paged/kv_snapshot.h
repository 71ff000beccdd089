// Plain values describing the paged KV cache for the UI's block map and for benchmarks:
// counters of the whole pool and a copy of every block's state. Safe to pass across threads.
#pragma once

#include "iwb/engine/paged/paged_types.h"

#include <cstdint>
#include <vector>

namespace iwb {

struct BlockManagerStats {
  int64_t num_blocks = 0;
  int32_t block_size = 0;
  int64_t num_free_blocks = 0;    // empty, on the free list
  int64_t num_cached_blocks = 0;  // unowned but holding a reusable prefix (evictable)
  int64_t num_used_blocks = 0;    // owned by at least one sequence
  int64_t num_shared_blocks = 0;  // owned by two or more sequences
  int64_t num_used_slots = 0;     // token slots filled in used blocks
  // Used blocks / all blocks.
  double utilisation = 0;
  // Unused slots in used blocks / slots of used blocks (the waste paging leaves: at most one
  // partly filled block per sequence).
  double internal_fragmentation = 0;
  // Prompt tokens looked up in the prefix cache, and how many of them were found.
  int64_t num_prefix_query_tokens = 0;
  int64_t num_prefix_hit_tokens = 0;
  double prefix_hit_rate = 0;     // hit / query tokens, 0 before the first lookup
  int64_t num_evictions = 0;      // cached blocks taken for new content
  int64_t num_copy_on_writes = 0;
  int64_t num_sequences = 0;
};

enum class BlockState { Free, Cached, InUse };
const char* block_state_name(BlockState state);

struct BlockSnapshot {
  BlockId id = -1;
  BlockState state = BlockState::Free;
  int32_t ref_count = 0;
  std::vector<SequenceId> owners;  // sequences whose block table holds it (ref_count of them)
  bool is_prefix_cached = false;   // full, computed and findable by later prompts
  int64_t first_position = 0;      // position of slot 0 within the owners' sequences
  int32_t fill = 0;                // slots holding tokens (for a shared block: the most any owner uses)
  std::vector<int32_t> tokens;     // token ids in the slots, `fill` of them
};

struct KvCacheSnapshot {
  BlockManagerStats stats;
  std::vector<BlockSnapshot> blocks;  // indexed by block id
};

}  // namespace iwb
