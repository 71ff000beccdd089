// A pattern's characters as a JSON matcher meets them, one byte at a time (pattern_chars.h).
#include "sampling/pattern_chars.h"

#include "sampling/utf8_lead.h"

namespace iwb::detail {
namespace {

// The bits a UTF-8 lead byte gives its character.
uint32_t lead_bits(uint8_t b, int follow) { return b & (follow == 1 ? 0x1Fu : follow == 2 ? 0x0Fu : 0x07u); }

}  // namespace

// A character of a string held to a pattern (or of a regex reply), as far as its bytes go:
// `code` is its bits so far, `left` continuation bytes still to come (the next in [next_low,
// next_high]). Whole, it moves the frame's states on; not yet whole, some character it can
// still become must be one the pattern takes next, so no byte leads where nothing may follow.
// `max_after`: how many characters may follow this one (a string's maxLength; -1: any), so a
// string never gets where its pattern cannot match within its length.
bool regex_takes(const Regex& re, Frame& f, uint32_t code, int left, uint8_t next_low, uint8_t next_high,
                 int64_t max_after) {
  if (left == 0) {
    Regex::States next = re.step(f.regex, code);
    if (next.empty()) return false;
    if (max_after >= 0 && re.distance_to_match(next) > max_after) return false;
    f.regex = std::move(next);
    return true;
  }
  const int shift = 6 * (left - 1);
  const char32_t lo = ((code << 6) | (next_low & 0x3Fu)) << shift;
  const char32_t hi = ((((code << 6) | (next_high & 0x3Fu)) << shift) | ((1u << shift) - 1));
  return re.may_step_within(f.regex, lo, hi, max_after);
}

// One byte of a pattern's text (a guided_regex reply, or a pattern's string outside its quotes
// and escapes): UTF-8 as strings take it (utf8_lead.h), each character through the pattern;
// `max_length` bounds the characters `count` counts (-1: no bound). False: the byte may not
// come (the frame is then part-changed: callers hold a copy).
bool pattern_char_byte(const Regex& re, Frame& f, uint8_t b, int64_t max_length) {
  // How many characters may follow the one this byte is part of.
  const auto room_after = [&](bool is_counted) -> int64_t {
    return max_length < 0 ? -1 : max_length - f.count - (is_counted ? 0 : 1);
  };
  if (f.utf8_left > 0) {
    if (b < f.next_low || b > f.next_high) return false;
    --f.utf8_left;
    f.next_low = 0x80;
    f.next_high = 0xBF;
    f.code = (f.code << 6) | (b & 0x3Fu);
    return regex_takes(re, f, f.code, f.utf8_left, 0x80, 0xBF, room_after(true));
  }
  if (max_length >= 0 && f.count >= max_length) return false;
  if (b >= 0x80) {
    const detail::Utf8Lead lead = detail::utf8_lead(b);
    if (lead.follow < 0) return false;
    f.utf8_left = lead.follow;
    f.next_low = lead.low;
    f.next_high = lead.high;
    f.code = lead_bits(b, lead.follow);
    if (!regex_takes(re, f, f.code, lead.follow, lead.low, lead.high, room_after(false))) return false;
  } else if (!regex_takes(re, f, b, 0, 0, 0, room_after(false))) {
    return false;
  }
  ++f.count;
  return true;
}

// The character a JSON escape (after the backslash) stands for; 0 for \u and others.
char32_t escaped_char(uint8_t b) {
  switch (b) {
    case '"': return '"';
    case '\\': return '\\';
    case '/': return '/';
    case 'b': return '\b';
    case 'f': return '\f';
    case 'n': return '\n';
    case 'r': return '\r';
    case 't': return '\t';
    default: return 0;
  }
}

// Whether a backslash may come: some character an escape writes is one the pattern takes.
bool may_escape(const Regex& re, const Frame& f, int64_t max_after) {
  for (const uint8_t e : {'"', '\\', '/', 'b', 'f', 'n', 'r', 't'}) {
    const char32_t c = escaped_char(e);
    if (re.may_step_within(f.regex, c, c, max_after)) return true;
  }
  return false;
}

}  // namespace iwb::detail
