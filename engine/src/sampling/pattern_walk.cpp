// The token mask's walk through a pattern's text (pattern_walk.h).
#include "iwb/engine/sampling/pattern_walk.h"

#include "sampling/pattern_chars.h"

namespace iwb {

PatternWalk::PatternWalk(JsonMatcher::PatternPlace place) : m_place(std::move(place)) {
  intern(m_place.frame.regex);  // state 0: where the text stands
}

int32_t PatternWalk::intern(Regex::States states) {
  const auto [it, is_new] = m_ids.try_emplace(states, static_cast<int32_t>(m_sets.size()));
  if (is_new) {
    m_distance.push_back(m_place.regex->distance_to_match(states));
    m_sets.push_back(std::move(states));
    m_next.emplace_back();
    m_next.back().fill(kUnknown);
  }
  return it->second;
}

bool PatternWalk::takes_by_frame(std::string_view bytes, size_t at, int32_t state, int64_t count) const {
  JsonMatcher::Frame f = m_place.frame;
  if (at > 0) {  // the walk has moved on: a whole character ends where it stands
    f.regex = m_sets[static_cast<size_t>(state)];
    f.count = count;
  }
  for (size_t i = at; i < bytes.size(); ++i) {
    if (!detail::pattern_char_byte(*m_place.regex, f, static_cast<uint8_t>(bytes[i]), m_place.max_length)) {
      return false;
    }
  }
  return true;
}

std::optional<bool> PatternWalk::takes(std::string_view bytes) {
  if (m_place.is_in_string) {
    for (const char c : bytes) {
      if (c == '"' || c == '\\' || static_cast<uint8_t>(c) < 0x20) return std::nullopt;  // JSON's own bytes
    }
  }
  if (m_place.frame.utf8_left > 0) return takes_by_frame(bytes, 0, 0, 0);
  const int64_t max_length = m_place.max_length;
  int32_t state = 0;
  int64_t count = m_place.frame.count;
  for (size_t i = 0; i < bytes.size(); ++i) {
    const auto b = static_cast<uint8_t>(bytes[i]);
    if (b >= 0x80) return takes_by_frame(bytes, i, state, count);
    if (max_length >= 0 && count >= max_length) return false;
    int32_t next = m_next[static_cast<size_t>(state)][b];
    if (next == kUnknown) {
      Regex::States stepped = m_place.regex->step(m_sets[static_cast<size_t>(state)], b);
      next = stepped.empty() ? kDead : intern(std::move(stepped));
      m_next[static_cast<size_t>(state)][b] = next;
    }
    if (next == kDead) return false;
    ++count;
    // Within a string's length, a match must stay in reach (as the frame reader checks).
    if (max_length >= 0 && m_distance[static_cast<size_t>(next)] > max_length - count) return false;
    state = next;
  }
  return true;
}

}  // namespace iwb
