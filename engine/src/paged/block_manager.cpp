// Block manager operations: allocation with prefix-cache lookup, appends with copy-on-write,
// fork, truncate and free. Reports (statistics, snapshot, consistency) are in
// block_manager_report.cpp.
#include "iwb/engine/paged/block_manager.h"

#include <algorithm>
#include <limits>

namespace iwb {

const char* allocation_status_name(AllocationStatus status) {
  switch (status) {
    case AllocationStatus::Ok: return "ok";
    case AllocationStatus::Later: return "later";
    case AllocationStatus::Never: return "never";
  }
  return "?";
}

Result<BlockManager> BlockManager::create(BlockManagerConfig config) {
  if (config.block_size <= 0 || config.block_size > 4096) {
    return make_error(ErrorCode::InvalidArgument,
                      "a KV block holds 1 to 4096 tokens, not " + std::to_string(config.block_size));
  }
  if (config.num_blocks <= 0 || config.num_blocks > std::numeric_limits<BlockId>::max()) {
    return make_error(ErrorCode::InvalidArgument,
                      "a paged KV cache needs 1 to 2^31-1 blocks, not " + std::to_string(config.num_blocks));
  }
  BlockManager m;
  m.m_block_size = config.block_size;
  m.m_is_prefix_caching = config.enable_prefix_caching;
  m.m_hash = std::move(config.hash);
  m.m_is_usable_prefix = std::move(config.is_usable_prefix);
  m.m_blocks.resize(static_cast<size_t>(config.num_blocks));
  m.m_free.reserve(static_cast<size_t>(config.num_blocks));
  for (int64_t b = config.num_blocks - 1; b >= 0; --b) m.m_free.push_back(static_cast<BlockId>(b));
  return m;
}

std::string BlockManager::describe(SequenceId seq) { return "sequence " + std::to_string(seq); }

const BlockManager::SequenceBlocks* BlockManager::find(SequenceId seq) const {
  const auto it = m_sequences.find(seq);
  return it == m_sequences.end() ? nullptr : &it->second;
}
BlockManager::SequenceBlocks* BlockManager::find(SequenceId seq) {
  const auto it = m_sequences.find(seq);
  return it == m_sequences.end() ? nullptr : &it->second;
}

BlockHash BlockManager::hash_of(BlockHash parent, std::span<const int32_t> tokens) const {
  return m_hash ? m_hash(parent, tokens) : hash_block_tokens(parent, tokens);
}

std::vector<BlockHash> BlockManager::chain_hashes(std::span<const int32_t> tokens) const {
  std::vector<BlockHash> hashes;
  if (!m_is_prefix_caching) return hashes;
  const size_t num_full = tokens.size() / static_cast<size_t>(m_block_size);
  hashes.reserve(num_full);
  BlockHash parent = kRootBlockHash;
  for (size_t i = 0; i < num_full; ++i) {
    parent = hash_of(parent, tokens.subspan(i * static_cast<size_t>(m_block_size), static_cast<size_t>(m_block_size)));
    hashes.push_back(parent);
  }
  return hashes;
}

std::vector<BlockId> BlockManager::find_cached_prefix(std::span<const int32_t> tokens,
                                                      const std::vector<BlockHash>& hashes, int64_t max_blocks) const {
  std::vector<BlockId> found;
  const size_t bs = static_cast<size_t>(m_block_size);
  const size_t limit = std::min(hashes.size(), static_cast<size_t>(std::max<int64_t>(0, max_blocks)));
  for (size_t i = 0; i < limit; ++i) {
    const auto it = m_cached.find(hashes[i]);
    if (it == m_cached.end()) break;
    const Block& b = m_blocks[static_cast<size_t>(it->second)];
    // The hash only finds a candidate; the tokens and the exact parent block (at the same
    // generation) prove it holds this prefix, so a hash collision can cost a miss, never a wrong hit.
    const bool is_same_parent =
        i == 0
            ? b.parent == -1
            : b.parent == found.back() && b.parent_generation == m_blocks[static_cast<size_t>(found.back())].generation;
    const auto block_tokens = tokens.subspan(i * bs, bs);
    if (!b.is_registered || !is_same_parent || b.first_position != static_cast<int64_t>(i * bs) ||
        !std::equal(b.tokens.begin(), b.tokens.end(), block_tokens.begin(), block_tokens.end())) {
      break;
    }
    found.push_back(it->second);
  }
  while (m_is_usable_prefix && !found.empty() &&
         !m_is_usable_prefix(hashes[found.size() - 1], tokens.first(found.size() * bs))) {
    found.pop_back();
  }
  return found;
}

std::optional<BlockHash> BlockManager::prefix_key(SequenceId seq, int64_t num_tokens) const {
  const SequenceBlocks* s = find(seq);
  if (s == nullptr || num_tokens <= 0 || num_tokens % m_block_size != 0) return std::nullopt;
  const auto index = static_cast<size_t>(num_tokens / m_block_size) - 1;
  if (index < s->full_block_hashes.size()) return s->full_block_hashes[index];
  if (!m_is_prefix_caching || num_tokens > s->num_tokens) return std::nullopt;
  // Blocks whose tokens are all appended but not computed yet (a decode step about to fill
  // one): keyed as mark_computed will key them.
  BlockHash key = s->full_block_hashes.empty() ? kRootBlockHash : s->full_block_hashes.back();
  for (size_t i = s->full_block_hashes.size(); i <= index; ++i) {
    const Block& b = m_blocks[static_cast<size_t>(s->table[i])];
    if (b.tokens.size() < static_cast<size_t>(m_block_size)) return std::nullopt;
    key = hash_of(key, std::span<const int32_t>(b.tokens.data(), static_cast<size_t>(m_block_size)));
  }
  return key;
}

AllocationCheck BlockManager::can_allocate(std::span<const int32_t> tokens, int64_t num_reserved_blocks) const {
  AllocationCheck check;
  const int64_t num_tokens = static_cast<int64_t>(tokens.size());
  if (num_tokens == 0) {
    check.status = AllocationStatus::Never;
    check.message = "an empty prompt has nothing to compute";
    return check;
  }
  check.num_blocks_needed = num_blocks_for(num_tokens);
  if (check.num_blocks_needed > num_blocks()) {
    check.status = AllocationStatus::Never;
    check.message = "prompt needs " + std::to_string(check.num_blocks_needed) + " blocks but the cache holds " +
                    std::to_string(num_blocks()) + " (" + std::to_string(num_tokens) + " tokens, " +
                    std::to_string(m_block_size) + " per block)";
    return check;
  }
  const std::vector<BlockId> hits = find_cached_prefix(tokens, chain_hashes(tokens), max_prefix_blocks(num_tokens));
  // A hit on a cached block takes it off the eviction list: it saves no pool block.
  int64_t num_revived = 0;
  for (BlockId b : hits) num_revived += m_blocks[static_cast<size_t>(b)].is_evictable ? 1 : 0;
  check.num_new_blocks = check.num_blocks_needed - static_cast<int64_t>(hits.size()) + num_revived;
  const int64_t available = num_available_blocks() - std::max<int64_t>(0, num_reserved_blocks);
  if (check.num_new_blocks > available) {
    check.status = AllocationStatus::Later;
    check.message = "needs " + std::to_string(check.num_new_blocks) + " blocks, " +
                    std::to_string(std::max<int64_t>(0, available)) + " available now";
  }
  return check;
}

Result<int64_t> BlockManager::allocate(SequenceId seq, std::span<const int32_t> tokens) {
  if (has_sequence(seq)) return make_error(ErrorCode::InvalidArgument, describe(seq) + " already has a block table");
  const AllocationCheck check = can_allocate(tokens);
  if (check.status == AllocationStatus::Never) return make_error(ErrorCode::InvalidArgument, check.message);
  if (check.status == AllocationStatus::Later) {
    return make_error(ErrorCode::OutOfMemory, "not enough free KV blocks for " + describe(seq) + ": " + check.message);
  }
  const int64_t num_tokens = static_cast<int64_t>(tokens.size());
  SequenceBlocks s;
  s.full_block_hashes = chain_hashes(tokens);
  const std::vector<BlockId> hits = find_cached_prefix(tokens, s.full_block_hashes, max_prefix_blocks(num_tokens));
  for (BlockId b : hits) {
    retain(b);
    s.table.push_back(b);
  }
  const size_t bs = static_cast<size_t>(m_block_size);
  for (int64_t i = static_cast<int64_t>(hits.size()); i < check.num_blocks_needed; ++i) {
    const BlockId b = take_block(i * m_block_size);  // can_allocate promised the blocks
    const auto part =
        tokens.subspan(static_cast<size_t>(i) * bs, std::min(bs, tokens.size() - static_cast<size_t>(i) * bs));
    m_blocks[static_cast<size_t>(b)].tokens.assign(part.begin(), part.end());
    s.table.push_back(b);
  }
  s.num_tokens = num_tokens;
  s.num_computed = static_cast<int64_t>(hits.size()) * m_block_size;
  if (m_is_prefix_caching) {
    m_num_prefix_query_tokens += num_tokens;
    m_num_prefix_hit_tokens += s.num_computed;
  }
  const int64_t num_cached_tokens = s.num_computed;
  m_sequences.emplace(seq, std::move(s));
  return num_cached_tokens;
}

bool BlockManager::can_append(SequenceId seq) const {
  const SequenceBlocks* s = find(seq);
  if (s == nullptr) return false;
  const bool needs_block =
      s->num_tokens % m_block_size == 0 || m_blocks[static_cast<size_t>(s->table.back())].ref_count > 1;
  return !needs_block || num_available_blocks() > 0;
}

Result<AppendedSlot> BlockManager::append_slot(SequenceId seq, int32_t token) {
  SequenceBlocks* s = find(seq);
  if (s == nullptr) return make_error(ErrorCode::NotFound, describe(seq) + " has no block table");
  const int64_t position = s->num_tokens;
  const int64_t offset = position % m_block_size;
  const auto no_block = [&] {
    return make_error(ErrorCode::OutOfMemory, "no free KV block for the next token of " + describe(seq) + " (all " +
                                                  std::to_string(num_blocks()) + " blocks in use)");
  };
  AppendedSlot result;
  if (offset == 0) {
    const BlockId b = take_block(position);
    if (b < 0) return no_block();
    m_blocks[static_cast<size_t>(b)].tokens.push_back(token);
    s->table.push_back(b);
    result.slot = static_cast<int64_t>(b) * m_block_size;
  } else {
    const BlockId last = s->table.back();
    if (m_blocks[static_cast<size_t>(last)].ref_count > 1) {
      // Copy-on-write: the other owners keep the block as it is; this sequence continues in a
      // private copy of the slots it uses.
      const BlockId copy = take_block(position - offset);
      if (copy < 0) return no_block();
      const Block& shared = m_blocks[static_cast<size_t>(last)];
      Block& mine = m_blocks[static_cast<size_t>(copy)];
      mine.tokens.assign(shared.tokens.begin(), shared.tokens.begin() + offset);
      mine.tokens.push_back(token);
      release(last);
      s->table.back() = copy;
      result.copy = BlockCopy{last, copy};
      ++m_num_copy_on_writes;
    } else {
      Block& b = m_blocks[static_cast<size_t>(last)];
      // A cached prefix block being overwritten (after a truncation) stops being findable.
      unregister(last);
      b.tokens.resize(static_cast<size_t>(offset));
      b.tokens.push_back(token);
    }
    result.slot = static_cast<int64_t>(s->table.back()) * m_block_size + offset;
  }
  ++s->num_tokens;
  return result;
}

Status BlockManager::mark_computed(SequenceId seq, int64_t num_computed_tokens) {
  SequenceBlocks* s = find(seq);
  if (s == nullptr) return make_error(ErrorCode::NotFound, describe(seq) + " has no block table");
  if (num_computed_tokens < s->num_computed || num_computed_tokens > s->num_tokens) {
    return make_error(ErrorCode::InvalidArgument, describe(seq) + ": " + std::to_string(num_computed_tokens) +
                                                      " computed tokens is outside " + std::to_string(s->num_computed) +
                                                      ".." + std::to_string(s->num_tokens));
  }
  const size_t first = static_cast<size_t>(s->num_computed / m_block_size);
  s->num_computed = num_computed_tokens;
  if (!m_is_prefix_caching) return {};
  const size_t num_full = static_cast<size_t>(num_computed_tokens / m_block_size);
  for (size_t i = s->full_block_hashes.size(); i < num_full; ++i) {
    const Block& b = m_blocks[static_cast<size_t>(s->table[i])];
    const BlockHash parent = i == 0 ? kRootBlockHash : s->full_block_hashes[i - 1];
    s->full_block_hashes.push_back(
        hash_of(parent, std::span<const int32_t>(b.tokens.data(), static_cast<size_t>(m_block_size))));
  }
  for (size_t i = first; i < num_full; ++i) try_register(*s, i, s->full_block_hashes[i]);
  return {};
}

void BlockManager::try_register(SequenceBlocks& seq, size_t index, BlockHash hash) {
  const BlockId id = seq.table[index];
  Block& b = m_blocks[static_cast<size_t>(id)];
  if (b.is_registered) return;  // shared from the cache already
  // Only a chain of registered blocks is findable. A parent that is an unregistered duplicate
  // (the same prefix computed again: by two prompts at once, or past where a recurrent model
  // could resume) hands over to the registered block lookups reach, once its whole prefix is
  // proved the same; otherwise this block could never be reached and would only hold the key hostage.
  BlockId parent = index == 0 ? -1 : seq.table[index - 1];
  if (parent >= 0 && !m_blocks[static_cast<size_t>(parent)].is_registered) {
    parent = registered_twin(seq, index - 1);
    if (parent < 0) return;
  }
  if (m_cached.count(hash) != 0) return;  // the same prefix computed twice (or a collision): first one wins
  m_cached.emplace(hash, id);
  b.is_registered = true;
  b.hash = hash;
  b.parent = parent;
  b.parent_generation = parent >= 0 ? m_blocks[static_cast<size_t>(parent)].generation : 0;
}

BlockId BlockManager::registered_twin(const SequenceBlocks& seq, size_t index) const {
  const auto it = m_cached.find(seq.full_block_hashes[index]);
  if (it == m_cached.end()) return -1;
  // Down the twin's chain beside the sequence's table, block by block: the same tokens at each
  // depth, every link at the generation it was made with, until the chains meet or both end.
  BlockId theirs = it->second;
  for (size_t j = index + 1; j-- > 0;) {
    const BlockId mine = seq.table[j];
    if (theirs == mine) return it->second;
    const Block& t = m_blocks[static_cast<size_t>(theirs)];
    if (!t.is_registered || t.tokens != m_blocks[static_cast<size_t>(mine)].tokens) return -1;
    if (j == 0) return t.parent == -1 ? it->second : -1;
    if (t.parent < 0 || m_blocks[static_cast<size_t>(t.parent)].generation != t.parent_generation) return -1;
    theirs = t.parent;
  }
  return -1;
}

Status BlockManager::free(SequenceId seq) {
  SequenceBlocks* s = find(seq);
  if (s == nullptr) {
    return make_error(ErrorCode::NotFound, describe(seq) + " holds no blocks (never allocated, or already freed)");
  }
  // Deepest block first: of a freed prefix, its end goes to the eviction list first and is
  // evicted before the blocks it depends on.
  for (auto it = s->table.rbegin(); it != s->table.rend(); ++it) release(*it);
  m_sequences.erase(seq);
  return {};
}

Status BlockManager::fork(SequenceId parent, SequenceId child) {
  const SequenceBlocks* p = find(parent);
  if (p == nullptr) return make_error(ErrorCode::NotFound, "cannot fork " + describe(parent) + ": it has no blocks");
  if (has_sequence(child))
    return make_error(ErrorCode::InvalidArgument, "cannot fork into " + describe(child) + ": it exists");
  SequenceBlocks copy = *p;
  for (BlockId b : copy.table) retain(b);
  m_sequences.emplace(child, std::move(copy));
  return {};
}

Status BlockManager::truncate(SequenceId seq, int64_t num_tokens) {
  SequenceBlocks* s = find(seq);
  if (s == nullptr) return make_error(ErrorCode::NotFound, describe(seq) + " has no block table");
  if (num_tokens < 0 || num_tokens > s->num_tokens) {
    return make_error(ErrorCode::InvalidArgument, "cannot truncate " + describe(seq) + " of " +
                                                      std::to_string(s->num_tokens) + " tokens to " +
                                                      std::to_string(num_tokens));
  }
  const size_t keep = static_cast<size_t>(num_blocks_for(num_tokens));
  while (s->table.size() > keep) {
    release(s->table.back());
    s->table.pop_back();
  }
  const int64_t offset = num_tokens % m_block_size;
  if (offset != 0) {
    const BlockId last = s->table.back();
    Block& b = m_blocks[static_cast<size_t>(last)];
    if (b.ref_count == 1) {
      unregister(last);
      b.tokens.resize(static_cast<size_t>(offset));
    }
  }
  s->num_tokens = num_tokens;
  s->num_computed = std::min(s->num_computed, num_tokens);
  s->full_block_hashes.resize(std::min(s->full_block_hashes.size(), static_cast<size_t>(num_tokens / m_block_size)));
  return {};
}

BlockId BlockManager::take_block(int64_t first_position) {
  BlockId id = -1;
  if (!m_free.empty()) {
    id = m_free.back();
    m_free.pop_back();
    m_blocks[static_cast<size_t>(id)].is_free = false;
  } else if (m_lru_head >= 0) {
    id = m_lru_head;
    lru_remove(id);
    unregister(id);
    ++m_num_evictions;
  } else {
    return -1;
  }
  Block& b = m_blocks[static_cast<size_t>(id)];
  ++b.generation;
  b.tokens.clear();
  b.first_position = first_position;
  b.ref_count = 1;
  return id;
}

void BlockManager::retain(BlockId block) {
  Block& b = m_blocks[static_cast<size_t>(block)];
  if (b.is_evictable) lru_remove(block);
  ++b.ref_count;
}

void BlockManager::release(BlockId block) {
  Block& b = m_blocks[static_cast<size_t>(block)];
  if (--b.ref_count > 0) return;
  if (b.is_registered) {
    lru_push_back(block);
  } else {
    b.tokens.clear();
    b.is_free = true;
    m_free.push_back(block);
  }
}

void BlockManager::unregister(BlockId block) {
  Block& b = m_blocks[static_cast<size_t>(block)];
  if (!b.is_registered) return;
  const auto it = m_cached.find(b.hash);
  if (it != m_cached.end() && it->second == block) m_cached.erase(it);
  b.is_registered = false;
  // Blocks registered with this one as parent must no longer verify against it.
  ++b.generation;
}

void BlockManager::lru_push_back(BlockId block) {
  Block& b = m_blocks[static_cast<size_t>(block)];
  b.is_evictable = true;
  b.lru_prev = m_lru_tail;
  b.lru_next = -1;
  if (m_lru_tail >= 0)
    m_blocks[static_cast<size_t>(m_lru_tail)].lru_next = block;
  else
    m_lru_head = block;
  m_lru_tail = block;
  ++m_num_evictable;
}

void BlockManager::lru_remove(BlockId block) {
  Block& b = m_blocks[static_cast<size_t>(block)];
  if (b.lru_prev >= 0)
    m_blocks[static_cast<size_t>(b.lru_prev)].lru_next = b.lru_next;
  else
    m_lru_head = b.lru_next;
  if (b.lru_next >= 0)
    m_blocks[static_cast<size_t>(b.lru_next)].lru_prev = b.lru_prev;
  else
    m_lru_tail = b.lru_prev;
  b.lru_prev = b.lru_next = -1;
  b.is_evictable = false;
  --m_num_evictable;
}

}  // namespace iwb
