// Bookkeeping of the paged KV cache (no K/V data here; PagedKvStorage holds that): a pool of
// fixed-size blocks, a block table per sequence, reference counts for blocks shared by forks
// and by prompts with a common prefix, a prefix cache of full blocks keyed by chained hashes
// with least-recently-used eviction, and copy-on-write when a shared block would be written.
#pragma once

#include "iwb/engine/paged/block_hash.h"
#include "iwb/engine/paged/kv_snapshot.h"
#include "iwb/engine/paged/paged_types.h"
#include "iwb/engine/status.h"

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

namespace iwb {

struct BlockManagerConfig {
  int64_t num_blocks = 0;
  int32_t block_size = kDefaultBlockSize;
  bool enable_prefix_caching = true;
  BlockHashFunction hash;  // empty: hash_block_tokens (XXH3)
  // Whether a cached prefix may end after these tokens (key: their chain hash). A model whose
  // state is not all in KV blocks (recurrent layers) can resume only where its state was kept;
  // a hit is cut back to the longest prefix this accepts. Empty: every prefix.
  std::function<bool(BlockHash key, std::span<const int32_t> prefix)> is_usable_prefix;
};

// The answer of can_allocate. Later and Never are different promises: Later will become Ok
// once running sequences free blocks; Never will not, whatever happens.
enum class AllocationStatus { Ok, Later, Never };
const char* allocation_status_name(AllocationStatus status);

struct AllocationCheck {
  AllocationStatus status = AllocationStatus::Ok;
  int64_t num_blocks_needed = 0;  // blocks the sequence's table needs in all
  int64_t num_new_blocks = 0;     // of them, blocks that must come from the free or cached pool
  std::string message;            // why Never (or Later), for a person
};

// Where append_slot put the new token, and the block copy the storage must do first.
struct AppendedSlot {
  int64_t slot = 0;  // block id * block_size + offset
  std::optional<BlockCopy> copy;
};

class BlockManager {
 public:
  static Result<BlockManager> create(BlockManagerConfig config);

  int64_t num_blocks() const { return static_cast<int64_t>(m_blocks.size()); }
  int32_t block_size() const { return m_block_size; }
  int64_t num_blocks_for(int64_t num_tokens) const { return (num_tokens + m_block_size - 1) / m_block_size; }
  // Blocks a new allocation can take now: free ones plus cached ones (evicted on demand).
  int64_t num_available_blocks() const { return static_cast<int64_t>(m_free.size()) + m_num_evictable; }

  // Can a sequence of these tokens get its blocks now? Counts the blocks its cached prefix
  // would share and keeps `num_reserved_blocks` available for others (the scheduler reserves
  // room for running sequences' next tokens). Never when the table alone exceeds the pool.
  AllocationCheck can_allocate(std::span<const int32_t> tokens, int64_t num_reserved_blocks = 0) const;
  // Gives `seq` a table for `tokens`: the longest cached prefix of full blocks is shared, the
  // rest comes from the pool. Returns how many leading tokens already have their K/V computed
  // (a multiple of the block size, always < tokens.size() so the last token is computed and
  // gives logits). Refused when `seq` already has a table or the pool is too small.
  Result<int64_t> allocate(SequenceId seq, std::span<const int32_t> tokens);

  // Whether append_slot(seq) would find a block (a new one when the last is full or shared).
  bool can_append(SequenceId seq) const;
  // Reserves the slot of the sequence's next token. When the last block is shared (fork,
  // truncation), the sequence gets a private copy first: the returned copy must be done by the
  // storage before the token's K/V is written.
  Result<AppendedSlot> append_slot(SequenceId seq, int32_t token);

  // The first num_computed_tokens tokens of `seq` now have their K/V in the storage: its full
  // blocks among them become findable by later prompts (prefix caching).
  Status mark_computed(SequenceId seq, int64_t num_computed_tokens);

  // Drops the sequence's table. Blocks whose count falls to zero go to the free list, or,
  // when they hold a cached prefix, to the tail of the eviction list (deepest block first, so
  // a prefix is evicted from its end). Freeing an unknown (or already freed) sequence is an error.
  Status free(SequenceId seq);
  // `child` shares every block of `parent` (several samples of one prompt).
  Status fork(SequenceId parent, SequenceId child);
  // Keeps the first num_tokens tokens (rollback of rejected draft tokens). Blocks past them are
  // released; a kept block shared with another sequence is left as it is (a later append copies it).
  Status truncate(SequenceId seq, int64_t num_tokens);

  bool has_sequence(SequenceId seq) const { return m_sequences.count(seq) != 0; }
  // The sequence's block table, or empty for an unknown sequence.
  std::span<const BlockId> block_table(SequenceId seq) const;
  int64_t num_tokens(SequenceId seq) const;           // slots reserved (0 when unknown)
  int64_t num_computed_tokens(SequenceId seq) const;  // as told by mark_computed, within num_tokens
  // The chain hash of the sequence's first num_tokens tokens (a positive multiple of the block
  // size, within its prompt's full blocks, its computed ones, or those whose tokens are all
  // appended); nullopt otherwise or without prefix caching.
  std::optional<BlockHash> prefix_key(SequenceId seq, int64_t num_tokens) const;
  // Slot of a position the sequence holds: table[pos / block_size] * block_size + pos % block_size.
  Result<int64_t> slot(SequenceId seq, int64_t position) const;
  int32_t ref_count(BlockId block) const;
  // Cached (evictable) blocks, the next to be evicted first.
  std::vector<BlockId> eviction_order() const;

  BlockManagerStats stats() const;
  KvCacheSnapshot snapshot() const;
  // Checks every internal invariant (reference counts against tables, free + cached + used =
  // total, hash index consistency); an error names the first one broken.
  Status check_consistency() const;

 private:
  struct Block {
    int32_t ref_count = 0;
    std::vector<int32_t> tokens;  // token ids written (or about to be) in slot order
    int64_t first_position = 0;
    uint64_t generation = 0;  // bumped whenever the block's content changes identity
    // Prefix cache entry (is_registered): key, and the parent block with the generation it had,
    // so a hit is verified exactly even when two different prefixes share a hash.
    bool is_registered = false;
    BlockHash hash = 0;
    BlockId parent = -1;
    uint64_t parent_generation = 0;
    bool is_free = true;        // on m_free
    bool is_evictable = false;  // on the eviction list
    BlockId lru_prev = -1;      // eviction list neighbours (toward the head / the tail)
    BlockId lru_next = -1;
  };
  struct SequenceBlocks {
    std::vector<BlockId> table;
    int64_t num_tokens = 0;
    int64_t num_computed = 0;
    std::vector<BlockHash> full_block_hashes;  // chain keys of the leading full blocks known so far
  };

  BlockManager() = default;

  BlockHash hash_of(BlockHash parent, std::span<const int32_t> tokens) const;
  // Chain keys of the full blocks of `tokens`.
  std::vector<BlockHash> chain_hashes(std::span<const int32_t> tokens) const;
  // Cached blocks matching the leading full blocks (at most max_blocks of them).
  std::vector<BlockId> find_cached_prefix(std::span<const int32_t> tokens, const std::vector<BlockHash>& hashes,
                                          int64_t max_blocks) const;
  int64_t max_prefix_blocks(int64_t num_tokens) const { return (num_tokens - 1) / m_block_size; }
  // A block with no content for a new purpose: from the free list, else evicts the least
  // recently used cached block. -1 when neither has one.
  BlockId take_block(int64_t first_position);
  void retain(BlockId block);
  void release(BlockId block);
  void unregister(BlockId block);
  void lru_push_back(BlockId block);
  void lru_remove(BlockId block);
  void try_register(SequenceBlocks& seq, size_t index, BlockHash hash);
  // The registered block holding exactly the prefix of seq's block `index` (its chain checked
  // token by token), or -1.
  BlockId registered_twin(const SequenceBlocks& seq, size_t index) const;
  const SequenceBlocks* find(SequenceId seq) const;
  SequenceBlocks* find(SequenceId seq);
  static std::string describe(SequenceId seq);

  int32_t m_block_size = kDefaultBlockSize;
  bool m_is_prefix_caching = true;
  BlockHashFunction m_hash;
  std::function<bool(BlockHash, std::span<const int32_t>)> m_is_usable_prefix;
  std::vector<Block> m_blocks;
  std::vector<BlockId> m_free;  // a stack: low ids are handed out first
  // Cached blocks as a doubly linked list through Block::lru_prev/next: the head was released
  // longest ago and is evicted first.
  BlockId m_lru_head = -1;
  BlockId m_lru_tail = -1;
  int64_t m_num_evictable = 0;
  std::unordered_map<BlockHash, BlockId> m_cached;  // prefix cache index
  std::unordered_map<SequenceId, SequenceBlocks> m_sequences;
  int64_t m_num_prefix_query_tokens = 0;
  int64_t m_num_prefix_hit_tokens = 0;
  int64_t m_num_evictions = 0;
  int64_t m_num_copy_on_writes = 0;
};

}  // namespace iwb
