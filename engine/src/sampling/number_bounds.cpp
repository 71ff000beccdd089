// Numbers in structured replies (number_bounds.h).
#include "sampling/number_bounds.h"

#include <cmath>
#include <cstdlib>

namespace iwb::detail {
namespace {

using Node = JsonGrammar::Node;
using namespace number_phase;

// Bounded numbers (minimum, maximum, exclusive*): written without exponents, a number's text so
// far is kept, and each byte must leave some value within the bounds that the number can still
// become; where it ends, the value it has (as strtod reads it, as clients do) must be within.
bool is_within(const Node& n, long double x) {
  if (n.has_minimum && (x < n.minimum || (n.is_minimum_exclusive && x == n.minimum))) return false;
  if (n.has_maximum && (x > n.maximum || (n.is_maximum_exclusive && x == n.maximum))) return false;
  return true;
}

// Whether the values [lo, hi] (lo <= hi) reach into the bounds.
bool reaches(const Node& n, long double lo, long double hi) {
  if (n.has_minimum && (hi < n.minimum || (n.is_minimum_exclusive && hi == n.minimum))) return false;
  if (n.has_maximum && (lo > n.maximum || (n.is_maximum_exclusive && lo == n.maximum))) return false;
  return true;
}

}  // namespace

bool number_is_within(const Node& n, const std::string& text) {
  if (!n.has_bounds()) return true;
  return is_within(n, static_cast<long double>(std::strtod(text.c_str(), nullptr)));
}

// Whether a number that begins with `text` (in `phase`) can still become a value within the
// bounds. Integers are exact; other numbers take the values between the text and the next
// number at its last digit as one closed range (16 fraction digits are finer than a double, so
// a value at the open end is what strtod gives for the digits that approach it).
bool number_may_fit(const Node& n, const std::string& text, uint8_t phase, bool integers_only) {
  if (!n.has_bounds()) return true;
  const bool negative = text[0] == '-';
  const std::string body = text.substr(negative ? 1 : 0);
  const auto reaches_signed = [&](long double lo, long double hi) {
    return negative ? reaches(n, -hi, -lo) : reaches(n, lo, hi);
  };
  if (body.empty()) {  // only the sign: any magnitude
    return reaches_signed(0, integers_only ? 1e16L - 1 : 1e16L);
  }
  if (phase == kDot || phase == kFraction) {
    const size_t dot = body.find('.');
    const auto digits = static_cast<int>(body.size() - dot - 1);
    const long double value = std::strtold(body.c_str(), nullptr);
    // No digit may follow the last one allowed: then the value is all there is.
    const long double step = digits >= kMaxFractionDigits ? 0 : std::pow(10.0L, -digits);
    return reaches_signed(value, value + step);
  }
  if (phase == kZero) return reaches_signed(0, integers_only ? 0 : 1);
  // Integer digits, more may follow: v * 10^j plus any j further digits.
  const long double v = std::strtold(body.c_str(), nullptr);
  long double scale = 1;
  for (int64_t k = static_cast<int64_t>(body.size()); k <= kMaxIntegerDigits; ++k, scale *= 10) {
    const long double lo = v * scale;
    if (reaches_signed(lo, integers_only ? lo + scale - 1 : (v + 1) * scale)) return true;
  }
  return false;
}

}  // namespace iwb::detail

namespace iwb::detail {

NumberStep number_step(const JsonGrammar::Node& n, JsonMatcher::Frame& f, uint8_t b) {
  using namespace number_phase;
  const bool integers_only = (n.types & JsonGrammar::kNumber) == 0;
  const bool digit = b >= '0' && b <= '9';
  const auto go = [&](uint8_t phase, int64_t count) {
    if (n.has_bounds()) {
      if (phase == kExponentMark) return NumberStep::Refused;  // no exponents
      f.text += static_cast<char>(b);
      if (!number_may_fit(n, f.text, phase, integers_only)) return NumberStep::Refused;
    }
    f.phase = phase;
    f.count = count;
    return NumberStep::Took;
  };
  constexpr NumberStep kRefused = NumberStep::Refused;
  switch (f.phase) {
    case kMinus:
      if (b == '0') return go(kZero, 1);
      return digit ? go(kIntegerDigits, 1) : kRefused;
    case kZero:
      if (digit) return kRefused;  // no leading zeros
      break;
    case kIntegerDigits:
      if (digit) return f.count < kMaxIntegerDigits ? go(kIntegerDigits, f.count + 1) : kRefused;
      break;
    case kDot: return digit ? go(kFraction, 1) : kRefused;
    case kFraction:
      if (digit) return f.count < kMaxFractionDigits ? go(kFraction, f.count + 1) : kRefused;
      break;
    case kExponentMark:
      if (b == '+' || b == '-') return go(kExponentSign, 0);
      return digit ? go(kExponent, 1) : kRefused;
    case kExponentSign: return digit ? go(kExponent, 1) : kRefused;
    case kExponent:
      if (digit) return f.count < kMaxExponentDigits ? go(kExponent, f.count + 1) : kRefused;
      return NumberStep::Ended;
  }
  if (!integers_only && b == '.' && f.phase != kFraction) return go(kDot, 0);
  if (!integers_only && (b == 'e' || b == 'E')) return go(kExponentMark, 0);
  return NumberStep::Ended;
}

}  // namespace iwb::detail
