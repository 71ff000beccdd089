// GPT-2's byte-level alphabet: every byte maps to one printable Unicode character, so byte-level
// BPE vocabularies never contain raw spaces or control bytes (' ' is 'Ġ', '\n' is 'Ċ').
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace iwb::tokenizer {

// UTF-8 of the character standing for `byte`.
const std::string& byte_to_unicode(uint8_t byte);
// The byte a character of the alphabet stands for; nullopt for any other codepoint.
std::optional<uint8_t> unicode_to_byte(uint32_t codepoint);

// Maps every byte of `bytes` to its character.
std::string bytes_to_unicode_text(std::string_view bytes);
// Reverses bytes_to_unicode_text. Characters outside the alphabet (a vocabulary entry that was
// never byte-encoded) are kept as their own UTF-8 rather than dropped.
std::string unicode_text_to_bytes(std::string_view text);

}  // namespace iwb::tokenizer
