// Scalar IEEE half (fp16) and bfloat16 <-> f32 conversions, bit-exact and portable: every
// quantized type's scales go through these, so they must not depend on F16C being present.
#include "iwb/kernels/dequantize.h"

#include <bit>
#include <cstdint>

namespace iwb {

float fp16_to_f32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1Fu;
  const uint32_t mantissa = h & 0x3FFu;
  if (exponent == 0) {
    // Zero or subnormal: mantissa * 2^-24 is exact in f32 (2^-24 is a power of two).
    const float magnitude = static_cast<float>(mantissa) * 0x1p-24f;
    return sign ? -magnitude : magnitude;
  }
  if (exponent == 0x1F) {
    // Inf keeps a zero mantissa; NaN keeps its payload (shifted into the top bits).
    return std::bit_cast<float>(sign | 0x7F800000u | (mantissa << 13));
  }
  // Normal: rebias the exponent from 15 to 127.
  return std::bit_cast<float>(sign | ((exponent + (127 - 15)) << 23) | (mantissa << 13));
}

uint16_t f32_to_fp16(float f) {
  const uint32_t bits = std::bit_cast<uint32_t>(f);
  const uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
  const uint32_t magnitude = bits & 0x7FFFFFFFu;

  if (magnitude >= 0x7F800000u) {
    if (magnitude == 0x7F800000u) return sign | 0x7C00u;  // inf
    // NaN: keep the top payload bits and force the quiet bit so it never becomes inf.
    return static_cast<uint16_t>(sign | 0x7C00u | 0x0200u | ((magnitude >> 13) & 0x3FFu));
  }
  // 65520 is halfway between 65504 (max half, odd mantissa) and 65536: ties-to-even
  // rounds it, and everything above, to inf.
  if (magnitude >= 0x477FF000u) return sign | 0x7C00u;

  const uint32_t exponent = magnitude >> 23;  // biased by 127
  if (exponent >= 113) {                      // >= 2^-14: a normal half
    uint32_t result = ((exponent - 112) << 10) | ((magnitude >> 13) & 0x3FFu);
    const uint32_t rest = magnitude & 0x1FFFu;  // the 13 dropped mantissa bits
    // Round to nearest, ties to even; a carry out of the mantissa bumps the exponent,
    // which is the correctly rounded result.
    if (rest > 0x1000u || (rest == 0x1000u && (result & 1u))) ++result;
    return static_cast<uint16_t>(sign | result);
  }
  // Subnormal half (or zero): value = h * 2^-24. 2^-25 is the tie between 0 and the
  // smallest subnormal and rounds to even (0), so anything up to it is zero.
  if (magnitude <= 0x33000000u) return sign;
  const uint32_t significand = (magnitude & 0x7FFFFFu) | 0x800000u;  // implicit 1
  const uint32_t shift = 126 - exponent;  // 14..24
  uint32_t result = significand >> shift;
  const uint32_t rest = significand & ((1u << shift) - 1u);
  const uint32_t halfway = 1u << (shift - 1);
  // Rounding up from 0x3FF gives 0x400, the smallest normal: again the right encoding.
  if (rest > halfway || (rest == halfway && (result & 1u))) ++result;
  return static_cast<uint16_t>(sign | result);
}

float bf16_to_f32(uint16_t b) { return std::bit_cast<float>(static_cast<uint32_t>(b) << 16); }

uint16_t f32_to_bf16(float f) {
  const uint32_t bits = std::bit_cast<uint32_t>(f);
  if ((bits & 0x7FFFFFFFu) > 0x7F800000u) {
    // NaN: truncate and set the quiet bit, so a payload living only in the low bits
    // cannot turn into inf.
    return static_cast<uint16_t>((bits >> 16) | 0x0040u);
  }
  // Round to nearest even: add 0x7FFF plus the lowest kept bit, then truncate. Overflow
  // carries into the exponent and yields inf, which is the correctly rounded result.
  const uint32_t rounding = 0x7FFFu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>((bits + rounding) >> 16);
}

}  // namespace iwb
