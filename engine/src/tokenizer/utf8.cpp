// UTF-8 decoding, encoding and sanitising for the tokenizers.
#include "tokenizer/utf8.h"

namespace iwb::tokenizer::utf8 {
namespace {

bool is_continuation(unsigned char c) { return (c & 0xC0) == 0x80; }

}  // namespace

uint32_t decode(std::string_view text, size_t* offset) {
  const size_t at = *offset;
  const auto b0 = static_cast<unsigned char>(text[at]);
  const size_t left = text.size() - at;
  auto cont = [&](size_t i) { return i < left && is_continuation(static_cast<unsigned char>(text[at + i])); };
  auto byte = [&](size_t i) { return static_cast<uint32_t>(static_cast<unsigned char>(text[at + i])); };
  if (b0 < 0x80) {
    *offset += 1;
    return b0;
  }
  if ((b0 & 0xE0) == 0xC0 && cont(1)) {
    *offset += 2;
    return ((b0 & 0x1Fu) << 6) | (byte(1) & 0x3F);
  }
  if ((b0 & 0xF0) == 0xE0 && cont(1) && cont(2)) {
    *offset += 3;
    return ((b0 & 0x0Fu) << 12) | ((byte(1) & 0x3F) << 6) | (byte(2) & 0x3F);
  }
  if ((b0 & 0xF8) == 0xF0 && cont(1) && cont(2) && cont(3)) {
    *offset += 4;
    return ((b0 & 0x07u) << 18) | ((byte(1) & 0x3F) << 12) | ((byte(2) & 0x3F) << 6) | (byte(3) & 0x3F);
  }
  *offset += 1;
  return kReplacementChar;
}

void append(std::string* out, uint32_t cp) {
  if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) cp = kReplacementChar;
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

std::string encode(uint32_t codepoint) {
  std::string s;
  append(&s, codepoint);
  return s;
}

std::string sanitize(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  size_t offset = 0;
  while (offset < text.size()) {
    const size_t start = offset;
    const uint32_t cp = decode(text, &offset);
    // Overlong forms decode to a small codepoint from more bytes than it needs; re-encoding
    // canonicalises them, as llama.cpp's decode/encode round trip does.
    if (cp < 0x80 && offset - start == 1) {
      out.push_back(text[start]);
    } else {
      append(&out, cp);
    }
  }
  return out;
}

size_t complete_prefix_length(std::string_view bytes) {
  // Only the last three bytes can belong to an unfinished sequence.
  const size_t n = bytes.size();
  const size_t lookback = n < 3 ? n : 3;
  for (size_t back = 1; back <= lookback; ++back) {
    const auto c = static_cast<unsigned char>(bytes[n - back]);
    if (is_continuation(c)) continue;
    if (c < 0xC0) return n;  // ASCII: everything before is complete
    size_t needed = 0;
    if ((c & 0xE0) == 0xC0) needed = 2;
    else if ((c & 0xF0) == 0xE0) needed = 3;
    else if ((c & 0xF8) == 0xF0) needed = 4;
    else return n;  // 0xF8..0xFF never starts a sequence
    // Check that the bytes after the lead really are continuations (they are, by the loop).
    return back < needed ? n - back : n;
  }
  return n;  // only continuation bytes at the end: stray, nothing to wait for
}

}  // namespace iwb::tokenizer::utf8
