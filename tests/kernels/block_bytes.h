// Test helpers: write GGUF block fields at explicit byte offsets (so the tests check the
// on-disk layout, not just our structs) and compare float rows with a useful message.
#pragma once

#include "iwb/kernels/dequantize.h"

#include <QString>

#include <cmath>
#include <cstdint>
#include <vector>

namespace iwb::test {

inline void put_u16(std::vector<uint8_t>& bytes, size_t offset, uint16_t value) {
  bytes.at(offset) = static_cast<uint8_t>(value & 0xFF);  // GGUF is little-endian
  bytes.at(offset + 1) = static_cast<uint8_t>(value >> 8);
}

// Only for values exactly representable in fp16, so the expected results stay exact.
inline void put_f16(std::vector<uint8_t>& bytes, size_t offset, float value) {
  put_u16(bytes, offset, f32_to_fp16(value));
}

// "" when every got[i] is within tolerance of expected[i] (exactly equal for 0), otherwise
// a description of the first difference.
inline QString first_mismatch(const std::vector<float>& got, const std::vector<float>& expected,
                              float tolerance = 0.0f) {
  if (got.size() != expected.size()) {
    return QStringLiteral("size %1, expected %2").arg(got.size()).arg(expected.size());
  }
  for (size_t i = 0; i < got.size(); ++i) {
    const bool is_same = tolerance == 0.0f ? got[i] == expected[i]
                                           : std::fabs(got[i] - expected[i]) <= tolerance;
    if (!is_same) {
      return QStringLiteral("element %1: got %2, expected %3")
          .arg(i)
          .arg(static_cast<double>(got[i]), 0, 'g', 9)
          .arg(static_cast<double>(expected[i]), 0, 'g', 9);
    }
  }
  return {};
}

}  // namespace iwb::test
