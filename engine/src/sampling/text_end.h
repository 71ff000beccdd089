// A raw text's end marker found as its bytes come (a tagged parameter's "\n</parameter>\n"): the
// one step the matcher's Until frames and the token mask's automaton both take.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace iwb::detail {

// With the end's first `matched` bytes ending the text so far, byte `b` comes: how many of the
// end's bytes then end the text (its longest start that is a suffix); end.size(): the text is over.
inline size_t end_matched_after(std::string_view end, size_t matched, uint8_t b) {
  std::string tail(end.substr(0, matched));
  tail += static_cast<char>(b);
  size_t k = std::min(tail.size(), end.size());
  while (k > 0 && std::string_view(tail).substr(tail.size() - k) != end.substr(0, k)) --k;
  return k;
}

}  // namespace iwb::detail
