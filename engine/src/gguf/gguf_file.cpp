// GGUF reader: header, metadata key/values, tensor infos, data section — all validated
// against the file size before anything is allocated or dereferenced.
#include "iwb/engine/gguf/gguf_file.h"

#include "gguf/byte_reader.h"
#include "gguf/mapped_file.h"

#include <sys/mman.h>
#include <sys/resource.h>

#include <cerrno>
#include <cstring>
#include <limits>
#include <unordered_set>

namespace iwb::gguf {
namespace {

constexpr uint32_t kMaxDims = 4;                             // GGML_MAX_DIMS
constexpr int kMaxArrayNesting = 8;                          // deeper nesting is not used by any real file
constexpr uint64_t kMinKeyValueBytes = 8 + 4 + 1;            // key length, value type, smallest value
constexpr uint64_t kMinTensorInfoBytes = 8 + 4 + 8 + 4 + 8;  // name len, n_dims, one dim, type, offset

// Smallest encoding of one value of a type, to bound array counts before reserving memory.
uint64_t min_value_bytes(ValueType type) {
  switch (type) {
    case ValueType::Uint8:
    case ValueType::Int8:
    case ValueType::Bool: return 1;
    case ValueType::Uint16:
    case ValueType::Int16: return 2;
    case ValueType::Uint32:
    case ValueType::Int32:
    case ValueType::Float32: return 4;
    case ValueType::Uint64:
    case ValueType::Int64:
    case ValueType::Float64: return 8;
    case ValueType::String: return 8;
    case ValueType::Array: return 12;
  }
  return 1;
}

Status read_value(ByteReader& r, ValueType type, Value* out, int depth);

Status read_array(ByteReader& r, Value* out, int depth) {
  const uint64_t at = r.offset();
  if (depth >= kMaxArrayNesting) return r.error(at, "arrays nested deeper than " + std::to_string(kMaxArrayNesting));
  uint32_t element_type_id = 0;
  IWB_RETURN_IF_ERROR(r.read(&element_type_id, "array element type"));
  if (!is_valid_value_type(element_type_id)) {
    return r.error(at, "unknown array element type " + std::to_string(element_type_id));
  }
  const auto element_type = static_cast<ValueType>(element_type_id);
  const uint64_t count_at = r.offset();
  uint64_t count = 0;
  IWB_RETURN_IF_ERROR(r.read(&count, "array length"));
  // Each element takes at least min_value_bytes: a count that cannot fit is corrupt, and
  // checking it first keeps a hostile count from triggering a huge allocation.
  if (count > r.remaining() / min_value_bytes(element_type)) {
    return r.error(count_at, "array of " + std::to_string(count) + " " + std::string(value_type_name(element_type)) +
                                 " elements cannot fit in the " + std::to_string(r.remaining()) + " bytes left");
  }
  Array array{element_type, {}};
  array.items.reserve(static_cast<size_t>(count));
  for (uint64_t i = 0; i < count; ++i) {
    Value item;
    IWB_RETURN_IF_ERROR(read_value(r, element_type, &item, depth + 1));
    array.items.push_back(std::move(item));
  }
  *out = Value::array(std::move(array));
  return {};
}

// Reads one scalar of type T and wraps it with the matching Value factory.
template <typename T, typename Make>
Status read_scalar(ByteReader& r, Value* out, Make make) {
  T v{};
  IWB_RETURN_IF_ERROR(r.read(&v, "metadata value"));
  *out = make(v);
  return {};
}

Status read_value(ByteReader& r, ValueType type, Value* out, int depth) {
  switch (type) {
    case ValueType::Uint8: return read_scalar<uint8_t>(r, out, Value::u8);
    case ValueType::Int8: return read_scalar<int8_t>(r, out, Value::i8);
    case ValueType::Uint16: return read_scalar<uint16_t>(r, out, Value::u16);
    case ValueType::Int16: return read_scalar<int16_t>(r, out, Value::i16);
    case ValueType::Uint32: return read_scalar<uint32_t>(r, out, Value::u32);
    case ValueType::Int32: return read_scalar<int32_t>(r, out, Value::i32);
    case ValueType::Uint64: return read_scalar<uint64_t>(r, out, Value::u64);
    case ValueType::Int64: return read_scalar<int64_t>(r, out, Value::i64);
    case ValueType::Float32: return read_scalar<float>(r, out, Value::f32);
    case ValueType::Float64: return read_scalar<double>(r, out, Value::f64);
    case ValueType::Bool: {
      const uint64_t at = r.offset();
      uint8_t v = 0;
      IWB_RETURN_IF_ERROR(r.read(&v, "metadata value"));
      if (v > 1) return r.error(at, "boolean value " + std::to_string(v) + " is neither 0 nor 1");
      *out = Value::boolean(v != 0);
      return {};
    }
    case ValueType::String: {
      std::string s;
      IWB_RETURN_IF_ERROR(r.read_string(&s, "string value"));
      *out = Value::string(std::move(s));
      return {};
    }
    case ValueType::Array: return read_array(r, out, depth);
  }
  return r.error(r.offset(), "unknown value type");
}

Status read_header(ByteReader& r, uint32_t* version, uint64_t* num_tensors, uint64_t* num_kv) {
  uint32_t magic = 0;
  IWB_RETURN_IF_ERROR(r.read(&magic, "magic"));
  if (magic != kMagic) {
    return make_error(ErrorCode::CorruptFile, "not a GGUF file: bad magic at byte 0 (expected \"GGUF\")");
  }
  IWB_RETURN_IF_ERROR(r.read(version, "version"));
  if (*version == 1) {
    return make_error(ErrorCode::Unsupported,
                      "GGUF version 1 is not supported (only versions 2 and 3); "
                      "re-convert the model with a current converter");
  }
  if (*version != 2 && *version != 3) {
    // A byte-swapped 2 or 3 means a big-endian file.
    if (*version == 0x02000000u || *version == 0x03000000u) {
      return make_error(ErrorCode::Unsupported, "big-endian GGUF files are not supported");
    }
    return make_error(ErrorCode::Unsupported,
                      "unsupported GGUF version " + std::to_string(*version) + " at byte 4 (supported: 2 and 3)");
  }
  IWB_RETURN_IF_ERROR(r.read(num_tensors, "tensor count"));
  IWB_RETURN_IF_ERROR(r.read(num_kv, "metadata count"));
  if (*num_kv > r.remaining() / kMinKeyValueBytes) {
    return r.error(16, "metadata count " + std::to_string(*num_kv) + " cannot fit in the file");
  }
  if (*num_tensors > r.remaining() / kMinTensorInfoBytes) {
    return r.error(8, "tensor count " + std::to_string(*num_tensors) + " cannot fit in the file");
  }
  return {};
}

Status read_tensor_info(ByteReader& r, TensorInfo* t) {
  const uint64_t at = r.offset();
  IWB_RETURN_IF_ERROR(r.read_string(&t->name, "tensor name"));
  uint32_t num_dims = 0;
  const uint64_t dims_at = r.offset();
  IWB_RETURN_IF_ERROR(r.read(&num_dims, "tensor dimension count"));
  if (num_dims == 0 || num_dims > kMaxDims) {
    return r.error(dims_at, "tensor '" + t->name + "' has " + std::to_string(num_dims) + " dimensions (1 to " +
                                std::to_string(kMaxDims) + " allowed)");
  }
  t->shape.resize(num_dims);
  int64_t num_elements = 1;
  for (uint32_t d = 0; d < num_dims; ++d) {
    const uint64_t dim_at = r.offset();
    IWB_RETURN_IF_ERROR(r.read(&t->shape[d], "tensor dimension"));
    if (t->shape[d] < 0) {
      return r.error(dim_at, "tensor '" + t->name + "' has negative dimension " + std::to_string(t->shape[d]));
    }
    if (t->shape[d] != 0 && num_elements > std::numeric_limits<int64_t>::max() / t->shape[d]) {
      return r.error(dim_at, "tensor '" + t->name + "' has an element count that overflows");
    }
    num_elements *= t->shape[d];
  }
  const uint64_t type_at = r.offset();
  uint32_t type_id = 0;
  IWB_RETURN_IF_ERROR(r.read(&type_id, "tensor type"));
  const auto traits = ggml_type_traits(type_id);
  if (!traits) {
    return make_error(ErrorCode::Unsupported, "corrupt or newer GGUF at byte " + std::to_string(type_at) +
                                                  ": tensor '" + t->name + "' has unknown type id " +
                                                  std::to_string(type_id));
  }
  t->type = static_cast<GgmlType>(type_id);
  if (t->shape[0] % traits->block_size != 0) {
    return r.error(type_at, "tensor '" + t->name + "' of type " + std::string(traits->name) + " has rows of " +
                                std::to_string(t->shape[0]) + " elements, not a multiple of the block size " +
                                std::to_string(traits->block_size));
  }
  // bytes = elements / block * block bytes; elements fit int64, so blocks * bytes may not: check.
  const uint64_t num_blocks = static_cast<uint64_t>(num_elements / traits->block_size);
  if (traits->bytes_per_block && num_blocks > std::numeric_limits<uint64_t>::max() / traits->bytes_per_block) {
    return r.error(at, "tensor '" + t->name + "' byte size overflows");
  }
  t->num_bytes = num_blocks * traits->bytes_per_block;
  IWB_RETURN_IF_ERROR(r.read(&t->offset, "tensor data offset"));
  return {};
}

}  // namespace

int64_t TensorInfo::num_elements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string TensorInfo::shape_string() const {
  std::string s;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += " x ";
    s += std::to_string(shape[i]);
  }
  return s;
}

GgufFile::~GgufFile() = default;

LoadMode GgufFile::load_mode() const { return m_mapping ? m_mapping->mode() : LoadMode::Map; }

uint64_t GgufFile::huge_page_bytes() const { return m_mapping ? m_mapping->huge_page_bytes() : 0; }

Status GgufFile::lock_in_memory() const {
  if (m_bytes.empty()) return {};
  if (mlock(m_bytes.data(), m_bytes.size()) == 0) return {};
  const int err = errno;
  std::string limit = "unknown";
  if (rlimit r{}; getrlimit(RLIMIT_MEMLOCK, &r) == 0) {
    limit = r.rlim_cur == RLIM_INFINITY ? "unlimited"
            : r.rlim_cur >= (1u << 20)  ? std::to_string(r.rlim_cur >> 20) + " MiB"
                                        : std::to_string(r.rlim_cur >> 10) + " KiB";
  }
  return make_error(ErrorCode::OutOfMemory, "cannot lock its " + std::to_string(m_bytes.size() >> 20) +
                                                " MiB in memory: " + std::strerror(err) + " (RLIMIT_MEMLOCK is " +
                                                limit + "; raise it with ulimit -l)");
}

Result<std::unique_ptr<GgufFile>> GgufFile::open(const std::string& path, LoadMode mode,
                                                 const std::function<void(double)>& read_progress) {
  auto mapping = MappedFile::open(path, mode, read_progress);
  if (!mapping) return mapping.status();
  std::unique_ptr<GgufFile> file(new GgufFile());
  file->m_path = path;
  file->m_mapping = std::move(mapping.value());
  file->m_bytes = file->m_mapping->bytes();
  auto parsed = parse(std::move(file));
  if (!parsed) return make_error(parsed.status().code(), path + ": " + parsed.status().message());
  return parsed;
}

Result<std::unique_ptr<GgufFile>> GgufFile::from_bytes(std::vector<uint8_t> bytes) {
  std::unique_ptr<GgufFile> file(new GgufFile());
  file->m_owned = std::move(bytes);
  file->m_bytes = file->m_owned;
  return parse(std::move(file));
}

Result<std::unique_ptr<GgufFile>> GgufFile::parse(std::unique_ptr<GgufFile> file) {
  ByteReader r(file->m_bytes);
  uint64_t num_tensors = 0;
  uint64_t num_kv = 0;
  IWB_RETURN_IF_ERROR(read_header(r, &file->m_version, &num_tensors, &num_kv));

  std::unordered_set<std::string> keys;
  file->m_metadata.reserve(static_cast<size_t>(num_kv));
  for (uint64_t i = 0; i < num_kv; ++i) {
    const uint64_t at = r.offset();
    KeyValue kv;
    IWB_RETURN_IF_ERROR(r.read_string(&kv.key, "metadata key"));
    if (!keys.insert(kv.key).second) return r.error(at, "duplicate metadata key '" + kv.key + "'");
    const uint64_t type_at = r.offset();
    uint32_t type_id = 0;
    IWB_RETURN_IF_ERROR(r.read(&type_id, "metadata value type"));
    if (!is_valid_value_type(type_id)) {
      return r.error(type_at, "metadata key '" + kv.key + "' has unknown value type " + std::to_string(type_id));
    }
    IWB_RETURN_IF_ERROR(read_value(r, static_cast<ValueType>(type_id), &kv.value, 0));
    file->m_metadata.push_back(std::move(kv));
  }

  if (const Value* alignment = file->find("general.alignment")) {
    const auto a = alignment->as_uint();
    if (alignment->type() != ValueType::Uint32 || !a || *a == 0 || (*a & (*a - 1)) != 0) {
      return make_error(ErrorCode::CorruptFile, "corrupt GGUF: general.alignment must be a power-of-two u32, got " +
                                                    alignment->to_display_string());
    }
    file->m_alignment = *a;
  }

  std::unordered_set<std::string> names;
  file->m_tensors.reserve(static_cast<size_t>(num_tensors));
  for (uint64_t i = 0; i < num_tensors; ++i) {
    const uint64_t at = r.offset();
    TensorInfo t;
    IWB_RETURN_IF_ERROR(read_tensor_info(r, &t));
    if (!names.insert(t.name).second) return r.error(at, "duplicate tensor name '" + t.name + "'");
    file->m_tensors.push_back(std::move(t));
  }

  const uint64_t align = file->m_alignment;
  const uint64_t end_of_infos = r.offset();
  file->m_data_offset = (end_of_infos + align - 1) / align * align;
  if (file->m_tensors.empty()) return file;  // vocab-only files may end without a data section

  if (file->m_data_offset > r.size()) {
    return r.error(end_of_infos, "file truncated: tensor data section would start at byte " +
                                     std::to_string(file->m_data_offset) + " but the file has " +
                                     std::to_string(r.size()) + " bytes");
  }
  const uint64_t data_size = r.size() - file->m_data_offset;
  for (const TensorInfo& t : file->m_tensors) {
    if (t.offset % align != 0) {
      return make_error(ErrorCode::CorruptFile, "corrupt GGUF: tensor '" + t.name + "' data offset " +
                                                    std::to_string(t.offset) + " is not aligned to " +
                                                    std::to_string(align) + " bytes");
    }
    if (t.offset > data_size || t.num_bytes > data_size - t.offset) {
      return make_error(ErrorCode::CorruptFile,
                        "corrupt or truncated GGUF: tensor '" + t.name + "' (" + std::to_string(t.num_bytes) +
                            " bytes at data offset " + std::to_string(t.offset) + ", file byte " +
                            std::to_string(file->m_data_offset + t.offset) + ") runs past the end of the file (" +
                            std::to_string(r.size()) + " bytes)");
    }
  }
  return file;
}

const Value* GgufFile::find(std::string_view key) const {
  for (const KeyValue& kv : m_metadata) {
    if (kv.key == key) return &kv.value;
  }
  return nullptr;
}

std::optional<std::string> GgufFile::get_string(std::string_view key) const {
  const Value* v = find(key);
  if (!v || !v->as_string()) return std::nullopt;
  return *v->as_string();
}

std::optional<int64_t> GgufFile::get_int(std::string_view key) const {
  const Value* v = find(key);
  return v ? v->as_int() : std::nullopt;
}

std::optional<double> GgufFile::get_float(std::string_view key) const {
  const Value* v = find(key);
  return v ? v->as_float() : std::nullopt;
}

std::optional<bool> GgufFile::get_bool(std::string_view key) const {
  const Value* v = find(key);
  return v ? v->as_bool() : std::nullopt;
}

const Array* GgufFile::get_array(std::string_view key) const {
  const Value* v = find(key);
  return v ? v->as_array() : nullptr;
}

const TensorInfo* GgufFile::find_tensor(std::string_view name) const {
  for (const TensorInfo& t : m_tensors) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

std::span<const uint8_t> GgufFile::tensor_data(const TensorInfo& tensor) const {
  return m_bytes.subspan(static_cast<size_t>(m_data_offset + tensor.offset), static_cast<size_t>(tensor.num_bytes));
}

}  // namespace iwb::gguf
