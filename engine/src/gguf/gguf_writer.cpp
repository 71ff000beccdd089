// GGUF writer: serialises metadata, tensor infos and aligned tensor data (version 3).
#include "iwb/engine/gguf/gguf_writer.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <unordered_set>

namespace iwb::gguf {
namespace {

class Encoder {
 public:
  template <typename T>
  void put(T v) {
    const auto* p = reinterpret_cast<const uint8_t*>(&v);
    m_bytes.insert(m_bytes.end(), p, p + sizeof(T));
  }
  void put_string(const std::string& s) {
    put<uint64_t>(s.size());
    m_bytes.insert(m_bytes.end(), s.begin(), s.end());
  }
  void put_value(const Value& v);
  void pad_to(uint64_t absolute_offset_base, uint64_t alignment) {
    while ((absolute_offset_base + m_bytes.size()) % alignment != 0) m_bytes.push_back(0);
  }
  std::vector<uint8_t>& bytes() { return m_bytes; }

 private:
  std::vector<uint8_t> m_bytes;
};

void Encoder::put_value(const Value& v) {
  switch (v.type()) {
    case ValueType::Uint8: put<uint8_t>(static_cast<uint8_t>(*v.as_uint())); break;
    case ValueType::Int8: put<int8_t>(static_cast<int8_t>(*v.as_int())); break;
    case ValueType::Uint16: put<uint16_t>(static_cast<uint16_t>(*v.as_uint())); break;
    case ValueType::Int16: put<int16_t>(static_cast<int16_t>(*v.as_int())); break;
    case ValueType::Uint32: put<uint32_t>(static_cast<uint32_t>(*v.as_uint())); break;
    case ValueType::Int32: put<int32_t>(static_cast<int32_t>(*v.as_int())); break;
    case ValueType::Uint64: put<uint64_t>(*v.as_uint()); break;
    case ValueType::Int64: put<int64_t>(*v.as_int()); break;
    case ValueType::Float32: put<float>(static_cast<float>(*v.as_float())); break;
    case ValueType::Float64: put<double>(*v.as_float()); break;
    case ValueType::Bool: put<uint8_t>(*v.as_bool() ? 1 : 0); break;
    case ValueType::String: put_string(*v.as_string()); break;
    case ValueType::Array: {
      const Array& a = *v.as_array();
      put<uint32_t>(static_cast<uint32_t>(a.element_type));
      put<uint64_t>(a.items.size());
      for (const Value& item : a.items) put_value(item);
      break;
    }
  }
}

// Arrays must be homogeneous: every item of the declared element type.
bool array_is_consistent(const Value& v) {
  const Array* a = v.as_array();
  if (!a) return true;
  for (const Value& item : a->items) {
    if (item.type() != a->element_type || !array_is_consistent(item)) return false;
  }
  return true;
}

}  // namespace

GgufWriter::GgufWriter(uint64_t alignment) : m_alignment(alignment ? alignment : kDefaultAlignment) {
  if (m_alignment != kDefaultAlignment) set_u32("general.alignment", static_cast<uint32_t>(m_alignment));
}

void GgufWriter::set(const std::string& key, Value value) {
  for (KeyValue& kv : m_metadata) {
    if (kv.key == key) {
      kv.value = std::move(value);
      return;
    }
  }
  m_metadata.push_back({key, std::move(value)});
}

Status GgufWriter::check_new_tensor(const std::string& name, const std::vector<int64_t>& shape, GgmlType type,
                                    uint64_t* num_bytes) const {
  for (const PendingTensor& t : m_tensors) {
    if (t.name == name) return make_error(ErrorCode::InvalidArgument, "duplicate tensor name '" + name + "'");
  }
  if (shape.empty() || shape.size() > 4) {
    return make_error(ErrorCode::InvalidArgument, "tensor '" + name + "' must have 1 to 4 dimensions");
  }
  if (!ggml_type_traits(static_cast<uint32_t>(type))) {
    return make_error(ErrorCode::InvalidArgument, "tensor '" + name + "' has an invalid type");
  }
  int64_t rows = 1;
  for (size_t d = 1; d < shape.size(); ++d) {
    if (shape[d] < 0) return make_error(ErrorCode::InvalidArgument, "tensor '" + name + "' has a negative dimension");
    rows *= shape[d];
  }
  const auto row_bytes = ggml_row_bytes(type, shape[0]);
  if (!row_bytes) {
    return make_error(ErrorCode::InvalidArgument,
                      "tensor '" + name + "': row length " + std::to_string(shape[0]) +
                          " is not a multiple of the block size of " + std::string(ggml_type_name(type)));
  }
  *num_bytes = *row_bytes * static_cast<uint64_t>(rows);
  return {};
}

Status GgufWriter::add_tensor(const std::string& name, std::vector<int64_t> shape, GgmlType type,
                              std::span<const uint8_t> data) {
  uint64_t num_bytes = 0;
  IWB_RETURN_IF_ERROR(check_new_tensor(name, shape, type, &num_bytes));
  if (data.size() != num_bytes) {
    return make_error(ErrorCode::InvalidArgument, "tensor '" + name + "' needs " + std::to_string(num_bytes) +
                                                      " bytes, got " + std::to_string(data.size()));
  }
  auto copy = std::make_shared<std::vector<uint8_t>>(data.begin(), data.end());
  m_tensors.push_back({name, std::move(shape), type, num_bytes, [copy](std::span<uint8_t> dst) {
                         std::memcpy(dst.data(), copy->data(), copy->size());
                         return Status{};
                       }});
  return {};
}

Status GgufWriter::add_tensor(const std::string& name, std::vector<int64_t> shape, GgmlType type,
                              TensorFiller filler) {
  uint64_t num_bytes = 0;
  IWB_RETURN_IF_ERROR(check_new_tensor(name, shape, type, &num_bytes));
  if (!filler) return make_error(ErrorCode::InvalidArgument, "tensor '" + name + "' has no data source");
  m_tensors.push_back({name, std::move(shape), type, num_bytes, std::move(filler)});
  return {};
}

Status GgufWriter::write_to(const std::function<Status(std::span<const uint8_t>)>& sink) const {
  for (const KeyValue& kv : m_metadata) {
    if (!array_is_consistent(kv.value)) {
      return make_error(ErrorCode::InvalidArgument, "metadata '" + kv.key + "' is an array with mixed item types");
    }
  }
  Encoder head;
  head.put<uint32_t>(kMagic);
  head.put<uint32_t>(3);
  head.put<uint64_t>(m_tensors.size());
  head.put<uint64_t>(m_metadata.size());
  for (const KeyValue& kv : m_metadata) {
    head.put_string(kv.key);
    head.put<uint32_t>(static_cast<uint32_t>(kv.value.type()));
    head.put_value(kv.value);
  }
  uint64_t offset = 0;
  for (const PendingTensor& t : m_tensors) {
    head.put_string(t.name);
    head.put<uint32_t>(static_cast<uint32_t>(t.shape.size()));
    for (int64_t d : t.shape) head.put<int64_t>(d);
    head.put<uint32_t>(static_cast<uint32_t>(t.type));
    head.put<uint64_t>(offset);
    offset += (t.num_bytes + m_alignment - 1) / m_alignment * m_alignment;
  }
  if (!m_tensors.empty()) head.pad_to(0, m_alignment);
  IWB_RETURN_IF_ERROR(sink(head.bytes()));

  std::vector<uint8_t> buffer;
  for (const PendingTensor& t : m_tensors) {
    const uint64_t padded = (t.num_bytes + m_alignment - 1) / m_alignment * m_alignment;
    buffer.assign(static_cast<size_t>(padded), 0);
    IWB_RETURN_IF_ERROR(t.filler(std::span<uint8_t>(buffer.data(), static_cast<size_t>(t.num_bytes))));
    IWB_RETURN_IF_ERROR(sink(buffer));
  }
  return {};
}

Result<std::vector<uint8_t>> GgufWriter::write_bytes() const {
  std::vector<uint8_t> out;
  Status s = write_to([&](std::span<const uint8_t> chunk) {
    out.insert(out.end(), chunk.begin(), chunk.end());
    return Status{};
  });
  if (!s) return s;
  return out;
}

Status GgufWriter::write_file(const std::string& path) const {
  const std::string tmp = path + ".partial";
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f) return make_error(ErrorCode::IoError, "cannot create '" + tmp + "': " + std::strerror(errno));
  Status s = write_to([&](std::span<const uint8_t> chunk) {
    if (std::fwrite(chunk.data(), 1, chunk.size(), f) != chunk.size()) {
      return make_error(ErrorCode::IoError, "cannot write '" + tmp + "': " + std::strerror(errno));
    }
    return Status{};
  });
  if (std::fclose(f) != 0 && s) s = make_error(ErrorCode::IoError, "cannot write '" + tmp + "': " + std::strerror(errno));
  if (s && std::rename(tmp.c_str(), path.c_str()) != 0) {
    s = make_error(ErrorCode::IoError, "cannot rename '" + tmp + "' to '" + path + "': " + std::strerror(errno));
  }
  if (!s) std::remove(tmp.c_str());
  return s;
}

}  // namespace iwb::gguf
