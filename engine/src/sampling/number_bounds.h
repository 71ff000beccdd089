// Numbers in structured replies: a number's text byte by byte, the limits on its digits, and
// JSON Schema's bounds (minimum, maximum, exclusive*) checked on a text that is still growing.
#pragma once

#include "iwb/engine/sampling/json_grammar.h"

#include <cstdint>
#include <string>

namespace iwb::detail {

// Limits that keep a model from writing digits forever (llama.cpp's JSON grammar has the same).
inline constexpr int64_t kMaxIntegerDigits = 16;
inline constexpr int64_t kMaxFractionDigits = 16;
// Two exponent digits keep every number a finite double (16 digits and e99 is about 1e115):
// "8E463" is JSON, but a double overflow to many parsers.
inline constexpr int64_t kMaxExponentDigits = 2;

namespace number_phase {
enum NumberPhase : uint8_t { kMinus, kZero, kIntegerDigits, kDot, kFraction, kExponentMark, kExponentSign, kExponent };
}  // namespace number_phase

inline bool is_number_end(uint8_t phase) {
  using namespace number_phase;
  return phase == kZero || phase == kIntegerDigits || phase == kFraction || phase == kExponent;
}

// Whether a whole number's text (as strtod reads it, as clients do) is within the node's bounds.
bool number_is_within(const JsonGrammar::Node& n, const std::string& text);

// Whether a number that begins with `text` (in `phase`) can still become a value within the
// node's bounds.
bool number_may_fit(const JsonGrammar::Node& n, const std::string& text, uint8_t phase, bool integers_only);

// One byte of a number's text (a Number frame): taken (the frame moved on), refused for good, or
// the number ended before it (its parent takes the byte, if the number is within its bounds).
enum class NumberStep : uint8_t { Took, Refused, Ended };
NumberStep number_step(const JsonGrammar::Node& n, JsonMatcher::Frame& f, uint8_t b);

}  // namespace iwb::detail
