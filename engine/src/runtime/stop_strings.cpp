// Stop-string matching on a stream: find the earliest complete stop string, otherwise hold
// back the longest tail that is a prefix of some stop string.
#include "iwb/engine/runtime/stop_strings.h"

#include <algorithm>

namespace iwb {

StopStringMatcher::StopStringMatcher(std::vector<std::string> stop_strings) {
  for (std::string& s : stop_strings) {
    if (!s.empty()) m_stops.push_back(std::move(s));
  }
}

StopStringMatcher::Output StopStringMatcher::push(std::string_view text) {
  Output out;
  if (m_is_stopped) {
    out.is_stopped = true;
    return out;
  }
  m_held.append(text);

  size_t earliest = std::string::npos;
  for (const std::string& stop : m_stops) earliest = std::min(earliest, m_held.find(stop));
  if (earliest != std::string::npos) {
    out.text = m_held.substr(0, earliest);
    out.is_stopped = true;
    m_is_stopped = true;
    m_held.clear();
    return out;
  }

  // The longest tail of the text that some stop string begins with (shorter than the stop
  // string itself, or it would have matched above).
  size_t hold = 0;
  for (const std::string& stop : m_stops) {
    const size_t max_len = std::min(stop.size() - 1, m_held.size());
    for (size_t len = max_len; len > hold; --len) {
      if (m_held.compare(m_held.size() - len, len, stop, 0, len) == 0) {
        hold = len;
        break;
      }
    }
  }
  out.text = m_held.substr(0, m_held.size() - hold);
  m_held.erase(0, m_held.size() - hold);
  return out;
}

std::string StopStringMatcher::flush() {
  std::string rest = std::move(m_held);
  m_held.clear();
  return rest;
}

}  // namespace iwb
