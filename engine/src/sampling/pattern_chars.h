// A pattern's characters as JsonMatcher meets them, one byte at a time: a string held to a JSON
// Schema `pattern`, or a guided_regex reply (regex.h). Each byte must leave some character the
// pattern can still take, within the length a string has left, so a reply never stands where no
// byte may follow.
#pragma once

#include "iwb/engine/sampling/json_grammar.h"

#include <cstdint>

namespace iwb::detail {

using Frame = JsonMatcher::Frame;

// A character whose bits so far are `code`, `left` continuation bytes to come (the next in
// [next_low, next_high]): whole, it moves the frame's states on; not yet, some character it can
// become must fit. `max_after`: characters that may follow it (-1: any).
bool regex_takes(const Regex& re, Frame& f, uint32_t code, int left, uint8_t next_low, uint8_t next_high,
                 int64_t max_after);

// One byte of a pattern's text outside a string's quotes and escapes; `max_length` bounds the
// characters `count` counts (-1: no bound). False: the byte may not come (the frame is then
// part-changed: callers hold a copy).
bool pattern_char_byte(const Regex& re, Frame& f, uint8_t b, int64_t max_length);

// The character a JSON escape (the byte after the backslash) stands for; 0 for \u and others.
char32_t escaped_char(uint8_t b);

// Whether a backslash may come in a pattern's string: some character an escape writes fits.
bool may_escape(const Regex& re, const Frame& f, int64_t max_after);

}  // namespace iwb::detail
