// The token mask's walk through a pattern's text: every token of a vocabulary checked from one
// place (JsonMatcher::pattern_place), with the pattern's NFA steps on ASCII characters kept as a
// DFA built as the tokens need it. Tens of thousands of tokens start alike, so most of their
// characters are one table lookup instead of a step of a set of NFA states.
#pragma once

#include "iwb/engine/sampling/json_grammar.h"

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string_view>
#include <vector>

namespace iwb {

class PatternWalk {
 public:
  explicit PatternWalk(JsonMatcher::PatternPlace place);

  // Whether the bytes may come next (as JsonMatcher::can_feed would say), or nullopt when they
  // hold a JSON string's own bytes (a quote, a backslash, a control byte: the matcher decides).
  std::optional<bool> takes(std::string_view bytes);

  size_t num_states() const { return m_sets.size(); }  // the DFA states built so far

 private:
  static constexpr int32_t kUnknown = -2, kDead = -1;
  int32_t intern(Regex::States states);
  // The rest of the bytes from `at`, through the frame-by-frame reader (a character that is not
  // ASCII, or a character not yet whole where the walk starts).
  bool takes_by_frame(std::string_view bytes, size_t at, int32_t state, int64_t count) const;

  JsonMatcher::PatternPlace m_place;
  std::map<Regex::States, int32_t> m_ids;
  std::vector<Regex::States> m_sets;
  std::vector<std::array<int32_t, 128>> m_next;  // kUnknown until asked
  std::vector<int32_t> m_distance;               // per state: the fewest characters to a match
};

}  // namespace iwb
