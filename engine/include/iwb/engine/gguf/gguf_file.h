// Memory-mapped, validating GGUF reader (versions 2 and 3). Every malformed input is reported
// as a Status naming the problem and its byte offset; nothing is trusted before it is checked.
#pragma once

#include "iwb/engine/gguf/gguf_value.h"
#include "iwb/engine/status.h"
#include "iwb/kernels/ggml_type.h"

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace iwb::gguf {

struct TensorInfo {
  std::string name;
  std::vector<int64_t> shape;  // ggml order: shape[0] is the row length (innermost)
  GgmlType type = GgmlType::F32;
  uint64_t offset = 0;  // relative to the start of the data section
  uint64_t num_bytes = 0;
  int64_t num_elements() const;
  std::string shape_string() const;  // "2048 x 32000"
};

class MappedFile;

// How a file's bytes come into memory: mapped (pages shared with the page cache, nothing read
// until touched), or read into memory the process owns, advised for 2 MiB transparent huge
// pages (EngineOptions::load_mode says when and why).
enum class LoadMode { Map, Read };

class GgufFile {
 public:
  ~GgufFile();
  GgufFile(const GgufFile&) = delete;
  GgufFile& operator=(const GgufFile&) = delete;

  // Maps (or reads) the file read-only and validates header, metadata and tensor infos.
  // `read_progress` (Read mode) gets the fraction of the file read so far, on the calling
  // thread, a few times a second.
  static Result<std::unique_ptr<GgufFile>> open(const std::string& path, LoadMode mode = LoadMode::Map,
                                                const std::function<void(double)>& read_progress = {});
  // Parses an in-memory copy (tests, files written to a buffer).
  static Result<std::unique_ptr<GgufFile>> from_bytes(std::vector<uint8_t> bytes);

  const std::string& path() const { return m_path; }
  uint32_t version() const { return m_version; }
  uint64_t alignment() const { return m_alignment; }
  uint64_t data_offset() const { return m_data_offset; }  // absolute offset of tensor data
  uint64_t file_size() const { return m_bytes.size(); }
  // Map for a file parsed from memory. Read: the copy's bytes in transparent huge pages now.
  LoadMode load_mode() const;
  uint64_t huge_page_bytes() const;
  // Locks the file's bytes in memory (mlock: no page of them is swapped or dropped from here
  // on); the error names the limit (RLIMIT_MEMLOCK, `ulimit -l`) where the kernel refused.
  Status lock_in_memory() const;

  const std::vector<KeyValue>& metadata() const { return m_metadata; }
  const Value* find(std::string_view key) const;
  std::optional<std::string> get_string(std::string_view key) const;
  std::optional<int64_t> get_int(std::string_view key) const;
  std::optional<double> get_float(std::string_view key) const;
  std::optional<bool> get_bool(std::string_view key) const;
  const Array* get_array(std::string_view key) const;

  const std::vector<TensorInfo>& tensors() const { return m_tensors; }
  const TensorInfo* find_tensor(std::string_view name) const;
  // Bytes of a tensor inside the mapping (valid while this object lives).
  std::span<const uint8_t> tensor_data(const TensorInfo& tensor) const;

 private:
  GgufFile() = default;
  static Result<std::unique_ptr<GgufFile>> parse(std::unique_ptr<GgufFile> file);

  std::string m_path;
  std::unique_ptr<MappedFile> m_mapping;  // owns m_bytes when opened from disk
  std::vector<uint8_t> m_owned;           // owns m_bytes when parsed from memory
  std::span<const uint8_t> m_bytes;
  uint32_t m_version = 0;
  uint64_t m_alignment = kDefaultAlignment;
  uint64_t m_data_offset = 0;
  std::vector<KeyValue> m_metadata;
  std::vector<TensorInfo> m_tensors;
};

}  // namespace iwb::gguf
