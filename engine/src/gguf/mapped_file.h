// A whole file in memory, read-only: mapped (POSIX mmap) or read into memory this process owns,
// advised for transparent huge pages. Released on destruction.
#pragma once

#include "iwb/engine/gguf/gguf_file.h"
#include "iwb/engine/runtime/huge_page_region.h"
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

  // `read_progress`: GgufFile::open's.
  static Result<std::unique_ptr<MappedFile>> open(const std::string& path, LoadMode mode = LoadMode::Map,
                                                  const std::function<void(double)>& read_progress = {});
  std::span<const uint8_t> bytes() const { return {static_cast<const uint8_t*>(m_data), m_size}; }
  LoadMode mode() const { return m_mode; }
  // Read: how many of the bytes sit in transparent huge pages now (the kernel's count in
  // /proc/self/smaps; it may give fewer than asked when memory is fragmented). Map: 0.
  uint64_t huge_page_bytes() const;

 private:
  MappedFile() = default;
  void* m_data = nullptr;  // Map: the mapping; Read: m_copy's first byte
  size_t m_size = 0;
  HugePageRegion m_copy;  // Read: the file's bytes, in memory rounded up to 2 MiB pages
  LoadMode m_mode = LoadMode::Map;
};

}  // namespace iwb::gguf
