// Splits one fuzz input into the pieces a target needs (a selector byte, integers, strings),
// the way FuzzedDataProvider does, without depending on clang's header in replay builds.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace iwb::fuzz {

class FuzzInput {
 public:
  FuzzInput(const uint8_t* data, size_t size) : m_data(data), m_size(size) {}

  bool empty() const { return m_pos >= m_size; }
  size_t remaining() const { return m_size - m_pos; }

  uint8_t byte() { return empty() ? 0 : m_data[m_pos++]; }
  uint32_t u32() {
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) v = (v << 8) | byte();
    return v;
  }
  // Up to max_len bytes, ending early at a 0xFF byte (a separator the fuzzer learns to place).
  std::string string(size_t max_len) {
    std::string s;
    while (!empty() && s.size() < max_len) {
      const uint8_t b = m_data[m_pos++];
      if (b == 0xFF) break;
      s.push_back(static_cast<char>(b));
    }
    return s;
  }
  std::string_view rest() {
    std::string_view v(reinterpret_cast<const char*>(m_data + m_pos), remaining());
    m_pos = m_size;
    return v;
  }

 private:
  const uint8_t* m_data;
  size_t m_size;
  size_t m_pos = 0;
};

}  // namespace iwb::fuzz
