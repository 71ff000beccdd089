// Which recurrent states are kept for prefix caching, on the engine's side: each checkpoint's
// prefix (its chain hash and its tokens, so a hash collision can cost a miss, never a wrong
// state), least recently used first out. The backend holds the states themselves by id.
#pragma once

#include "iwb/engine/paged/block_hash.h"

#include <cstdint>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

namespace iwb {

class StateCheckpoints {
 public:
  explicit StateCheckpoints(int32_t capacity = 0, int64_t min_step = 0) : m_capacity(capacity), m_min_step(min_step) {}

  bool is_enabled() const { return m_capacity > 0; }
  size_t size() const { return m_entries.size(); }
  // Whether a checkpoint holds the state after exactly `prefix` (key: its chain hash).
  bool has(BlockHash key, std::span<const int32_t> prefix) const;
  // The checkpoint of `prefix`, now the most recently used; nullopt when none.
  std::optional<int64_t> use(BlockHash key, std::span<const int32_t> prefix);
  // An id for a state the backend is about to save.
  int64_t next_id() { return m_next_id++; }
  // Keeps a state the backend has saved as `id`; returns the ids dropped to stay within the
  // capacity (the backend frees them), including an older checkpoint of the same key.
  std::vector<int64_t> add(BlockHash key, std::span<const int32_t> prefix, int64_t id);
  // Forgets checkpoint `id` under `key` (the backend frees it); false when that key holds
  // another one now, or none.
  bool remove(BlockHash key, int64_t id);

  // Where a sequence whose prompt (or recomputed tokens) has num_tokens tokens keeps its state:
  // after its last full block, for prompts that continue it (a chat's next turn), and after the
  // last block a repeat of it can take from the cache (its last token is always computed: a
  // regenerated reply); with min_step > 0 also every min_step tokens before those (rounded
  // down to whole blocks, at least one), for prompts that share only its beginning. Ascending,
  // each a positive multiple of block_size.
  static std::vector<int64_t> positions(int64_t num_tokens, int64_t block_size, int64_t min_step = 0);
  // positions() with this index's min_step.
  std::vector<int64_t> positions_of(int64_t num_tokens, int64_t block_size) const {
    return positions(num_tokens, block_size, m_min_step);
  }

 private:
  struct Entry {
    int64_t id = 0;
    std::vector<int32_t> tokens;
    uint64_t last_used = 0;
  };
  const Entry* find(BlockHash key, std::span<const int32_t> prefix) const;

  int32_t m_capacity = 0;
  int64_t m_min_step = 0;
  uint64_t m_clock = 0;
  int64_t m_next_id = 0;
  std::unordered_map<BlockHash, Entry> m_entries;
};

}  // namespace iwb
