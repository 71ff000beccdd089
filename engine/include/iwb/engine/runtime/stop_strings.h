// Stop strings over streamed text: text that could still turn out to be the start of a stop
// string is held back, so a stop string is never shown, not even its first characters.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace iwb {

class StopStringMatcher {
 public:
  explicit StopStringMatcher(std::vector<std::string> stop_strings);  // empty strings are ignored

  struct Output {
    std::string text;         // safe to show now
    bool is_stopped = false;  // a stop string completed; `text` is everything before it
  };

  // Adds newly generated text (whole UTF-8 characters).
  Output push(std::string_view text);
  // The text held back when generation ends without a stop string.
  std::string flush();

  size_t num_held_bytes() const { return m_held.size(); }

 private:
  std::vector<std::string> m_stops;
  std::string m_held;
  bool m_is_stopped = false;
};

}  // namespace iwb
