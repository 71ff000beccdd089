// Python's str.strip() as Jinja's `trim` filter does it, for the chat templates reproduced here.
#pragma once

#include <string>
#include <string_view>

namespace iwb::detail {

// Python's white space, which Jinja's `trim` and str.strip()/rstrip() remove.
inline constexpr std::string_view kPythonSpace = " \t\n\r\v\f";

// Jinja's `trim`: Python's str.strip() of white space.
inline std::string python_strip(std::string_view s) {
  const size_t begin = s.find_first_not_of(kPythonSpace);
  if (begin == std::string_view::npos) return {};
  return std::string(s.substr(begin, s.find_last_not_of(kPythonSpace) - begin + 1));
}

}  // namespace iwb::detail
