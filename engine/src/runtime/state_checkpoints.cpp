// StateCheckpoints: the prefix index of kept recurrent states.
#include "runtime/state_checkpoints.h"

#include <algorithm>

namespace iwb {

const StateCheckpoints::Entry* StateCheckpoints::find(BlockHash key, std::span<const int32_t> prefix) const {
  const auto it = m_entries.find(key);
  if (it == m_entries.end()) return nullptr;
  const Entry& e = it->second;
  return std::equal(e.tokens.begin(), e.tokens.end(), prefix.begin(), prefix.end()) ? &e : nullptr;
}

bool StateCheckpoints::has(BlockHash key, std::span<const int32_t> prefix) const {
  return find(key, prefix) != nullptr;
}

std::optional<int64_t> StateCheckpoints::use(BlockHash key, std::span<const int32_t> prefix) {
  const Entry* e = find(key, prefix);
  if (e == nullptr) return std::nullopt;
  m_entries.at(key).last_used = ++m_clock;
  return e->id;
}

std::vector<int64_t> StateCheckpoints::add(BlockHash key, std::span<const int32_t> prefix, int64_t id) {
  std::vector<int64_t> dropped;
  if (const auto it = m_entries.find(key); it != m_entries.end()) {
    dropped.push_back(it->second.id);
    m_entries.erase(it);
  }
  if (m_capacity <= 0) {
    dropped.push_back(id);
    return dropped;
  }
  while (static_cast<int64_t>(m_entries.size()) >= m_capacity) {
    const auto oldest = std::min_element(m_entries.begin(), m_entries.end(), [](const auto& a, const auto& b) {
      return a.second.last_used < b.second.last_used;
    });
    dropped.push_back(oldest->second.id);
    m_entries.erase(oldest);
  }
  m_entries.emplace(key, Entry{id, std::vector<int32_t>(prefix.begin(), prefix.end()), ++m_clock});
  return dropped;
}

bool StateCheckpoints::remove(BlockHash key, int64_t id) {
  const auto it = m_entries.find(key);
  if (it == m_entries.end() || it->second.id != id) return false;
  m_entries.erase(it);
  return true;
}

std::vector<int64_t> StateCheckpoints::positions(int64_t num_tokens, int64_t block_size, int64_t min_step) {
  std::vector<int64_t> at;
  if (block_size <= 0) return at;
  const int64_t repeat = (num_tokens - 1) / block_size * block_size;
  const int64_t extend = num_tokens / block_size * block_size;
  if (min_step > 0) {
    const int64_t step = std::max(block_size, min_step / block_size * block_size);
    for (int64_t p = step; p < repeat; p += step) at.push_back(p);
  }
  if (repeat > 0) at.push_back(repeat);
  if (extend > 0 && extend != repeat) at.push_back(extend);
  return at;
}

}  // namespace iwb
