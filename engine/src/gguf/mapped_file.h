// Read-only memory mapping of a whole file (POSIX mmap); unmapped on destruction.
#pragma once

#include "iwb/engine/status.h"

#include <cstdint>
#include <memory>
#include <span>
#include <string>

namespace iwb::gguf {

class MappedFile {
 public:
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  static Result<std::unique_ptr<MappedFile>> open(const std::string& path);
  std::span<const uint8_t> bytes() const { return {static_cast<const uint8_t*>(m_data), m_size}; }

 private:
  MappedFile() = default;
  void* m_data = nullptr;
  size_t m_size = 0;
};

}  // namespace iwb::gguf
