// GGUF writer (version 3): metadata in insertion order, tensors aligned to general.alignment.
// Files are written to a temporary name and renamed, so a failed write never leaves a
// half-written model behind.
#pragma once

#include "iwb/engine/gguf/gguf_value.h"
#include "iwb/engine/status.h"
#include "iwb/kernels/ggml_type.h"

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

namespace iwb::gguf {

class GgufWriter {
 public:
  // Fills `dst` (exactly the tensor's byte size) with the tensor's data.
  using TensorFiller = std::function<Status(std::span<uint8_t> dst)>;

  explicit GgufWriter(uint64_t alignment = 32);

  // Sets a metadata key; replacing an existing key keeps its position.
  void set(const std::string& key, Value value);
  void set_string(const std::string& key, std::string v) { set(key, Value::string(std::move(v))); }
  void set_u32(const std::string& key, uint32_t v) { set(key, Value::u32(v)); }
  void set_i32(const std::string& key, int32_t v) { set(key, Value::i32(v)); }
  void set_f32(const std::string& key, float v) { set(key, Value::f32(v)); }
  void set_bool(const std::string& key, bool v) { set(key, Value::boolean(v)); }

  // Adds a tensor whose bytes are copied now.
  Status add_tensor(const std::string& name, std::vector<int64_t> shape, GgmlType type,
                    std::span<const uint8_t> data);
  // Adds a tensor whose bytes are produced while writing (large models never sit in memory).
  Status add_tensor(const std::string& name, std::vector<int64_t> shape, GgmlType type,
                    TensorFiller filler);

  Status write_file(const std::string& path) const;
  Result<std::vector<uint8_t>> write_bytes() const;

 private:
  struct PendingTensor {
    std::string name;
    std::vector<int64_t> shape;
    GgmlType type;
    uint64_t num_bytes;
    TensorFiller filler;
  };
  Status check_new_tensor(const std::string& name, const std::vector<int64_t>& shape, GgmlType type,
                          uint64_t* num_bytes) const;
  Status write_to(const std::function<Status(std::span<const uint8_t>)>& sink) const;

  uint64_t m_alignment;
  std::vector<KeyValue> m_metadata;
  std::vector<PendingTensor> m_tensors;
};

}  // namespace iwb::gguf
