// Block manager reports: accessors, statistics, the per-block snapshot for the KV-cache map,
// and the consistency audit the property tests run after every operation.
#include "iwb/engine/paged/block_manager.h"

#include <algorithm>
#include <unordered_set>

namespace iwb {

const char* block_state_name(BlockState state) {
  switch (state) {
    case BlockState::Free: return "free";
    case BlockState::Cached: return "cached";
    case BlockState::InUse: return "in use";
  }
  return "?";
}

std::span<const BlockId> BlockManager::block_table(SequenceId seq) const {
  const SequenceBlocks* s = find(seq);
  return s == nullptr ? std::span<const BlockId>() : std::span<const BlockId>(s->table);
}

int64_t BlockManager::num_tokens(SequenceId seq) const {
  const SequenceBlocks* s = find(seq);
  return s == nullptr ? 0 : s->num_tokens;
}

int64_t BlockManager::num_computed_tokens(SequenceId seq) const {
  const SequenceBlocks* s = find(seq);
  return s == nullptr ? 0 : s->num_computed;
}

Result<int64_t> BlockManager::slot(SequenceId seq, int64_t position) const {
  const SequenceBlocks* s = find(seq);
  if (s == nullptr) return make_error(ErrorCode::NotFound, describe(seq) + " has no block table");
  if (position < 0 || position >= s->num_tokens) {
    return make_error(ErrorCode::InvalidArgument, describe(seq) + " holds positions 0.." +
                                                      std::to_string(s->num_tokens - 1) + ", not " +
                                                      std::to_string(position));
  }
  return static_cast<int64_t>(s->table[static_cast<size_t>(position / m_block_size)]) * m_block_size +
         position % m_block_size;
}

int32_t BlockManager::ref_count(BlockId block) const {
  return block >= 0 && block < num_blocks() ? m_blocks[static_cast<size_t>(block)].ref_count : -1;
}

std::vector<BlockId> BlockManager::eviction_order() const {
  std::vector<BlockId> order;
  for (BlockId b = m_lru_head; b >= 0; b = m_blocks[static_cast<size_t>(b)].lru_next) order.push_back(b);
  return order;
}

namespace {

// Slots of each block the sequences use: a shared block is as full as its fullest owner (a
// sequence truncated inside a shared block sees fewer of its slots).
std::vector<int32_t> slots_in_use(size_t num_blocks, int32_t block_size,
                                  const std::vector<std::pair<const std::vector<BlockId>*, int64_t>>& tables) {
  std::vector<int32_t> fill(num_blocks, 0);
  for (const auto& [table, num_tokens] : tables) {
    for (size_t i = 0; i < table->size(); ++i) {
      const int64_t used = std::min<int64_t>(block_size, num_tokens - static_cast<int64_t>(i) * block_size);
      int32_t& f = fill[static_cast<size_t>((*table)[i])];
      f = std::max(f, static_cast<int32_t>(used));
    }
  }
  return fill;
}

}  // namespace

BlockManagerStats BlockManager::stats() const {
  BlockManagerStats st;
  st.num_blocks = num_blocks();
  st.block_size = m_block_size;
  st.num_free_blocks = static_cast<int64_t>(m_free.size());
  st.num_cached_blocks = m_num_evictable;
  std::vector<std::pair<const std::vector<BlockId>*, int64_t>> tables;
  for (const auto& [id, s] : m_sequences) tables.emplace_back(&s.table, s.num_tokens);
  const std::vector<int32_t> fill = slots_in_use(m_blocks.size(), m_block_size, tables);
  for (size_t b = 0; b < m_blocks.size(); ++b) {
    if (m_blocks[b].ref_count <= 0) continue;
    ++st.num_used_blocks;
    if (m_blocks[b].ref_count > 1) ++st.num_shared_blocks;
    st.num_used_slots += fill[b];
  }
  st.utilisation = static_cast<double>(st.num_used_blocks) / static_cast<double>(st.num_blocks);
  if (st.num_used_blocks > 0) {
    const double slots = static_cast<double>(st.num_used_blocks) * m_block_size;
    st.internal_fragmentation = 1.0 - static_cast<double>(st.num_used_slots) / slots;
  }
  st.num_prefix_query_tokens = m_num_prefix_query_tokens;
  st.num_prefix_hit_tokens = m_num_prefix_hit_tokens;
  if (m_num_prefix_query_tokens > 0) {
    st.prefix_hit_rate = static_cast<double>(m_num_prefix_hit_tokens) / static_cast<double>(m_num_prefix_query_tokens);
  }
  st.num_evictions = m_num_evictions;
  st.num_copy_on_writes = m_num_copy_on_writes;
  st.num_sequences = static_cast<int64_t>(m_sequences.size());
  return st;
}

KvCacheSnapshot BlockManager::snapshot() const {
  KvCacheSnapshot snap;
  snap.stats = stats();
  snap.blocks.resize(m_blocks.size());
  std::vector<std::pair<const std::vector<BlockId>*, int64_t>> tables;
  for (const auto& [id, s] : m_sequences) {
    tables.emplace_back(&s.table, s.num_tokens);
    for (BlockId b : s.table) snap.blocks[static_cast<size_t>(b)].owners.push_back(id);
  }
  const std::vector<int32_t> fill = slots_in_use(m_blocks.size(), m_block_size, tables);
  for (size_t i = 0; i < m_blocks.size(); ++i) {
    const Block& b = m_blocks[i];
    BlockSnapshot& out = snap.blocks[i];
    out.id = static_cast<BlockId>(i);
    out.ref_count = b.ref_count;
    out.is_prefix_cached = b.is_registered;
    std::sort(out.owners.begin(), out.owners.end());
    if (b.ref_count > 0) {
      out.state = BlockState::InUse;
      out.fill = fill[i];
    } else if (b.is_evictable) {
      out.state = BlockState::Cached;
      out.fill = static_cast<int32_t>(b.tokens.size());
    } else {
      out.state = BlockState::Free;
      continue;
    }
    out.first_position = b.first_position;
    out.tokens.assign(b.tokens.begin(), b.tokens.begin() + std::min<size_t>(b.tokens.size(), static_cast<size_t>(out.fill)));
  }
  return snap;
}

Status BlockManager::check_consistency() const {
  const auto broken = [](const std::string& what) { return make_error(ErrorCode::InvalidArgument, "block manager: " + what); };
  std::vector<int32_t> owners(m_blocks.size(), 0);
  for (const auto& [id, s] : m_sequences) {
    if (static_cast<int64_t>(s.table.size()) != num_blocks_for(s.num_tokens)) {
      return broken(describe(id) + " has " + std::to_string(s.table.size()) + " blocks for " +
                    std::to_string(s.num_tokens) + " tokens");
    }
    if (s.num_computed < 0 || s.num_computed > s.num_tokens) return broken(describe(id) + " computed count out of range");
    for (size_t i = 0; i < s.table.size(); ++i) {
      const BlockId b = s.table[i];
      if (b < 0 || b >= num_blocks()) return broken(describe(id) + " holds block " + std::to_string(b));
      ++owners[static_cast<size_t>(b)];
      const Block& blk = m_blocks[static_cast<size_t>(b)];
      const int64_t used = std::min<int64_t>(m_block_size, s.num_tokens - static_cast<int64_t>(i) * m_block_size);
      if (blk.first_position != static_cast<int64_t>(i) * m_block_size || static_cast<int64_t>(blk.tokens.size()) < used) {
        return broken("block " + std::to_string(b) + " does not hold what " + describe(id) + " put there");
      }
    }
  }
  int64_t num_free = 0, num_cached = 0, num_used = 0;
  for (size_t i = 0; i < m_blocks.size(); ++i) {
    const Block& b = m_blocks[i];
    const std::string name = "block " + std::to_string(i);
    if (b.ref_count != owners[i]) {
      return broken(name + " counts " + std::to_string(b.ref_count) + " references but " +
                    std::to_string(owners[i]) + " tables hold it");
    }
    const int states = (b.is_free ? 1 : 0) + (b.is_evictable ? 1 : 0) + (b.ref_count > 0 ? 1 : 0);
    if (states != 1) return broken(name + " is in " + std::to_string(states) + " of the states free/cached/in use");
    if (b.is_free && b.is_registered) return broken(name + " is free yet indexed as a cached prefix");
    if (b.is_evictable && !b.is_registered) return broken(name + " is evictable but holds no cached prefix");
    if (b.is_registered) {
      const auto it = m_cached.find(b.hash);
      if (it == m_cached.end() || it->second != static_cast<BlockId>(i) ||
          static_cast<int64_t>(b.tokens.size()) != m_block_size) {
        return broken(name + " is registered but not indexed under its hash");
      }
    }
    num_free += b.is_free ? 1 : 0;
    num_cached += b.is_evictable ? 1 : 0;
    num_used += b.ref_count > 0 ? 1 : 0;
  }
  if (num_free + num_cached + num_used != num_blocks()) return broken("free + cached + used != total");
  std::unordered_set<BlockId> seen;
  for (BlockId b : m_free) {
    if (!seen.insert(b).second) return broken("block " + std::to_string(b) + " is twice on the free list");
    if (!m_blocks[static_cast<size_t>(b)].is_free) return broken("block " + std::to_string(b) + " on the free list is not free");
  }
  if (static_cast<int64_t>(m_free.size()) != num_free) return broken("free list length differs from free blocks");
  int64_t walked = 0;
  BlockId prev = -1;
  for (BlockId b = m_lru_head; b >= 0; b = m_blocks[static_cast<size_t>(b)].lru_next) {
    const Block& blk = m_blocks[static_cast<size_t>(b)];
    if (!blk.is_evictable || blk.lru_prev != prev || ++walked > num_blocks()) return broken("eviction list is corrupt");
    prev = b;
  }
  if (prev != m_lru_tail || walked != num_cached || walked != m_num_evictable) return broken("eviction list length is wrong");
  for (const auto& [hash, b] : m_cached) {
    if (!m_blocks[static_cast<size_t>(b)].is_registered || m_blocks[static_cast<size_t>(b)].hash != hash) {
      return broken("the prefix index names block " + std::to_string(b) + " which is not registered under that hash");
    }
  }
  return {};
}

}  // namespace iwb
