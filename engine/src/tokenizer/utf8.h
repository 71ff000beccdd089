// UTF-8 helpers shared by the tokenizers: sequence lengths, codepoint decoding, sanitising
// invalid input the way llama.cpp does, and finding where a byte string stops being complete.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace iwb::tokenizer::utf8 {

inline constexpr uint32_t kReplacementChar = 0xFFFD;

// Length of the sequence a lead byte announces (1 for ASCII and stray continuation bytes),
// matching llama.cpp's unicode_len_utf8 so symbol splitting agrees with it on any input.
inline size_t sequence_length(unsigned char lead) {
  static constexpr uint8_t kLengths[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
  return kLengths[lead >> 4];
}

// Decodes one codepoint at `offset` and advances it. Invalid bytes decode to U+FFFD and
// advance by one byte (llama.cpp's unicode_cpts_from_utf8 rule).
uint32_t decode(std::string_view text, size_t* offset);

void append(std::string* out, uint32_t codepoint);
std::string encode(uint32_t codepoint);

// Text with every invalid sequence replaced by U+FFFD; surrogates and codepoints above
// U+10FFFF become U+FFFD too, so the result is valid UTF-8 for PCRE2.
std::string sanitize(std::string_view text);

// Number of leading bytes of `bytes` that form complete sequences; a multi-byte sequence cut
// off at the end is left out. Invalid bytes count as complete (they are not waiting for more).
size_t complete_prefix_length(std::string_view bytes);

}  // namespace iwb::tokenizer::utf8
