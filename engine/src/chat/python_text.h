// Python's str.strip() as Jinja's `trim` filter does it, and repr() of a string, for the chat
// templates reproduced here.
#pragma once

#include <string>
#include <string_view>
#include <utility>

namespace iwb::detail {

// Python's ASCII white space, which str.strip()/rstrip() remove (python_strip: the rest too).
inline constexpr std::string_view kPythonSpace = " \t\n\r\v\f";

// Whether Python's str.isspace() holds for the code point: ASCII's, the separators \x1c-\x1f,
// and Unicode's spaces (U+00A0, the ideographic U+3000 of Chinese and Japanese text, ...).
inline bool is_python_space(char32_t c) {
  return (c >= 0x09 && c <= 0x0d) || (c >= 0x1c && c <= 0x20) || c == 0x85 || c == 0xa0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200a) || c == 0x2028 || c == 0x2029 || c == 0x202f || c == 0x205f || c == 0x3000;
}

// The code point of the UTF-8 sequence at s[at] and its length; a byte that starts none reads as
// U+FFFD (no space) of one byte.
inline std::pair<char32_t, size_t> utf8_code_point(std::string_view s, size_t at) {
  const auto lead = static_cast<unsigned char>(s[at]);
  if (lead < 0x80) return {lead, 1};
  const size_t length = lead >= 0xf8 ? 0 : lead >= 0xf0 ? 4 : lead >= 0xe0 ? 3 : lead >= 0xc0 ? 2 : 0;
  if (length == 0 || at + length > s.size()) return {0xfffd, 1};
  auto c = static_cast<char32_t>(lead & (0x7f >> length));
  for (size_t k = 1; k < length; ++k) {
    const auto next = static_cast<unsigned char>(s[at + k]);
    if ((next & 0xc0) != 0x80) return {0xfffd, 1};
    c = (c << 6) | (next & 0x3f);
  }
  return {c, length};
}

// Jinja's `trim`: Python's str.strip(), of every character str.isspace() takes (Qwen3.5's
// template trims every message).
inline std::string python_strip(std::string_view s) {
  size_t begin = 0;
  while (begin < s.size()) {
    const auto [c, length] = utf8_code_point(s, begin);
    if (!is_python_space(c)) break;
    begin += length;
  }
  size_t end = s.size();
  while (end > begin) {
    size_t start = end - 1;  // back to the last character's first byte
    while (start > begin && end - start < 4 && (static_cast<unsigned char>(s[start]) & 0xc0) == 0x80) --start;
    const auto [c, length] = utf8_code_point(s, start);
    if (start + length != end || !is_python_space(c)) break;
    end = start;
  }
  return std::string(s.substr(begin, end - begin));
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
