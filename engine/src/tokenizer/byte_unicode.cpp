// The GPT-2 byte <-> unicode table, built once: printable Latin-1 bytes stand for themselves,
// the other 68 bytes take codepoints 256, 257, ... in byte order.
#include "tokenizer/byte_unicode.h"

#include "tokenizer/utf8.h"

#include <array>

namespace iwb::tokenizer {
namespace {

struct ByteTable {
  std::array<std::string, 256> to_unicode;
  std::array<uint32_t, 256> codepoint{};
  std::array<int16_t, 512> from_codepoint{};  // every codepoint of the alphabet is below 512

  ByteTable() {
    from_codepoint.fill(-1);
    auto printable = [](int b) {
      return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    };
    uint32_t next_extra = 256;
    for (int b = 0; b < 256; ++b) {
      codepoint[b] = printable(b) ? static_cast<uint32_t>(b) : next_extra++;
      to_unicode[b] = utf8::encode(codepoint[b]);
      from_codepoint[codepoint[b]] = static_cast<int16_t>(b);
    }
  }
};

const ByteTable& table() {
  static const ByteTable t;
  return t;
}

}  // namespace

const std::string& byte_to_unicode(uint8_t byte) { return table().to_unicode[byte]; }

std::optional<uint8_t> unicode_to_byte(uint32_t codepoint) {
  if (codepoint >= 512) return std::nullopt;
  const int16_t b = table().from_codepoint[codepoint];
  if (b < 0) return std::nullopt;
  return static_cast<uint8_t>(b);
}

std::string bytes_to_unicode_text(std::string_view bytes) {
  const ByteTable& t = table();
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char c : bytes) out += t.to_unicode[static_cast<uint8_t>(c)];
  return out;
}

std::string unicode_text_to_bytes(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  size_t offset = 0;
  while (offset < text.size()) {
    const size_t start = offset;
    const uint32_t cp = utf8::decode(text, &offset);
    if (auto b = unicode_to_byte(cp)) {
      out.push_back(static_cast<char>(*b));
    } else {
      out.append(text.substr(start, offset - start));
    }
  }
  return out;
}

}  // namespace iwb::tokenizer
