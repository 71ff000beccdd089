// The UTF-8 a structured reply may hold (RFC 3629), one rule for the matcher and the token
// table: a lead byte says how many continuation bytes follow and the range of the first of
// them, which rules out overlong forms, UTF-16 surrogates and code points past U+10FFFF (strict
// JSON parsers refuse them). The later continuation bytes are 0x80-0xBF.
#pragma once

#include <cstdint>

namespace iwb::detail {

struct Utf8Lead {
  int8_t follow = -1;               // continuation bytes after the lead; -1: not a lead byte of a character
  uint8_t low = 0x80, high = 0xBF;  // the first continuation byte's range
};

// For a byte >= 0x80 (below that a byte is a character of its own).
inline Utf8Lead utf8_lead(uint8_t b) {
  Utf8Lead lead;
  if (b >= 0xC2 && b <= 0xDF)
    lead.follow = 1;
  else if (b >= 0xE0 && b <= 0xEF)
    lead.follow = 2;
  else if (b >= 0xF0 && b <= 0xF4)
    lead.follow = 3;
  if (b == 0xE0) lead.low = 0xA0;
  if (b == 0xED) lead.high = 0x9F;
  if (b == 0xF0) lead.low = 0x90;
  if (b == 0xF4) lead.high = 0x8F;
  return lead;
}

}  // namespace iwb::detail
