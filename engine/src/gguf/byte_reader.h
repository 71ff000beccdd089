// Bounds-checked little-endian cursor over untrusted bytes. Every read either succeeds or
// returns a CorruptFile Status that names what was being read and the byte offset.
#pragma once

#include "iwb/engine/status.h"

#include <cstdint>
#include <cstring>
#include <span>
#include <string>

namespace iwb::gguf {

class ByteReader {
 public:
  explicit ByteReader(std::span<const uint8_t> bytes) : m_bytes(bytes) {}

  uint64_t offset() const { return m_offset; }
  uint64_t size() const { return m_bytes.size(); }
  uint64_t remaining() const { return m_bytes.size() - m_offset; }

  template <typename T>
  Status read(T* out, const char* what) {
    if (remaining() < sizeof(T)) return truncated(what, sizeof(T));
    std::memcpy(out, m_bytes.data() + m_offset, sizeof(T));  // files are little-endian, as is x86/ARM
    m_offset += sizeof(T);
    return {};
  }

  // A GGUF string: u64 length then bytes (not NUL-terminated).
  Status read_string(std::string* out, const char* what) {
    const uint64_t at = m_offset;
    uint64_t length = 0;
    IWB_RETURN_IF_ERROR(read(&length, what));
    if (length > remaining()) {
      return error(at, std::string(what) + ": length " + std::to_string(length) +
                           " runs past the end of the file (" + std::to_string(remaining()) +
                           " bytes left)");
    }
    out->assign(reinterpret_cast<const char*>(m_bytes.data() + m_offset), static_cast<size_t>(length));
    m_offset += length;
    return {};
  }

  Status error(uint64_t at, const std::string& message) const {
    return make_error(ErrorCode::CorruptFile, "corrupt GGUF at byte " + std::to_string(at) + ": " + message);
  }

 private:
  Status truncated(const char* what, size_t needed) const {
    return error(m_offset, std::string("file truncated while reading ") + what + " (needs " +
                               std::to_string(needed) + " bytes, " + std::to_string(remaining()) +
                               " left)");
  }

  std::span<const uint8_t> m_bytes;
  uint64_t m_offset = 0;
};

}  // namespace iwb::gguf
