// Python's str.strip() as Jinja's `trim` filter does it, and repr() of a string, for the chat
// templates reproduced here.
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

// Python's repr() of a string (how Jinja prints a string inside a list or mapping): single
// quotes unless it holds one and no double quote; backslash, newline, return, tab and other
// control characters escaped.
inline std::string python_repr(std::string_view s) {
  const char quote = s.find('\'') != std::string_view::npos && s.find('"') == std::string_view::npos ? '"' : '\'';
  std::string out(1, quote);
  for (const char c : s) {
    const auto b = static_cast<unsigned char>(c);
    if (c == quote || c == '\\') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (b < 0x20 || b == 0x7f) {
      static constexpr char kHex[] = "0123456789abcdef";
      out += "\\x";
      out += kHex[b >> 4];
      out += kHex[b & 15];
    } else {
      out += c;
    }
  }
  return out + quote;
}

}  // namespace iwb::detail
