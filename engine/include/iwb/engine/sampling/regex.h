// Regular expressions for structured output: JSON Schema's `pattern` (ECMA-262 syntax, as the
// schema specification says) and vLLM's `guided_regex`. Compiled to a Thompson NFA over Unicode
// code points, so a matcher can follow a reply one character at a time, and tell before a
// multi-byte character is whole whether any character its bytes can still become may come.
//
// The syntax taken: literals, `.`, classes (`[a-z]`, `[^...]`, ranges, escapes inside), `\d \D
// \w \W \s \S`, `\t \n \r \f \v \0 \xHH \uHHHH \u{H...}`, escaped punctuation, groups `(...)`,
// `(?:...)`, `(?<name>...)`, alternation, the quantifiers `* + ? {n} {n,} {n,m}` (lazy ones
// too: the language is the same), and `^` / `$` at the pattern's ends (or an alternative's at
// the top level). Refused by name: back-references, lookaround, `\b` / `\B` word boundaries,
// `\p{...}` properties, anchors elsewhere. Case is significant (a schema's pattern has no
// flags).
#pragma once

#include "iwb/engine/status.h"

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace iwb {

class Regex {
 public:
  enum class Mode {
    Search,     // JSON Schema: the pattern matches anywhere in the text unless ^ / $ anchor it;
                // the text is a JSON string's (no control characters but \b \t \n \f \r)
    FullMatch,  // vLLM's guided_regex (Python's re.fullmatch): the whole text
  };
  static Result<std::shared_ptr<const Regex>> compile(std::string_view pattern, Mode mode);

  // Where a text is in the pattern: the sorted set of NFA states it may be in (after empty
  // moves). Empty: the text cannot be continued into a match.
  using States = std::vector<uint16_t>;
  States start() const;
  // The states after one more character; empty when it may not come.
  States step(const States& states, char32_t c) const;
  // Whether some character in [lo, hi] may come (a multi-byte character not yet whole), after
  // which a match is at most `max_after` more characters away (a string's maxLength; -1: any).
  bool may_step_within(const States& states, char32_t lo, char32_t hi, int64_t max_after = -1) const;
  // The fewest characters that take the text to a match (0: it matches; INT32_MAX: never).
  int32_t distance_to_match(const States& states) const;
  // Whether the text so far matches (a string may close, a reply may end).
  bool is_accepting(const States& states) const;
  // Whether any character at all may come.
  bool may_continue(const States& states) const;

  const std::string& pattern() const { return m_pattern; }
  size_t num_states() const { return m_states.size(); }

  // The NFA (built by regex.cpp).
  using Ranges = std::vector<std::pair<char32_t, char32_t>>;  // sorted, disjoint, inclusive
  struct State {
    enum class Kind : uint8_t { Char, Split, Empty, Match } kind = Kind::Empty;
    Ranges ranges;  // Char: the characters it takes
    int32_t out = -1, out2 = -1;
  };
  Regex(std::string pattern, std::vector<State> states, int32_t start)
      : m_pattern(std::move(pattern)), m_states(std::move(states)), m_start(start) {
    measure_distances();
  }

 private:
  struct Marks;
  void add_closure(int32_t state, Marks* marks, States* out) const;
  void measure_distances();

  std::string m_pattern;
  std::vector<State> m_states;
  int32_t m_start = 0;
  std::vector<int32_t> m_distance;  // per state: the fewest characters from it to a match
};

}  // namespace iwb
