// GGUF metadata values: every scalar type, strings, and (nested) arrays.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace iwb::gguf {

inline constexpr uint32_t kMagic = 0x46554747;  // "GGUF" little-endian
inline constexpr uint64_t kDefaultAlignment = 32;

// On-disk ids of metadata value types.
enum class ValueType : uint32_t {
  Uint8 = 0, Int8 = 1, Uint16 = 2, Int16 = 3, Uint32 = 4, Int32 = 5, Float32 = 6, Bool = 7,
  String = 8, Array = 9, Uint64 = 10, Int64 = 11, Float64 = 12,
};
std::string_view value_type_name(ValueType type);
bool is_valid_value_type(uint32_t id);

class Value;

struct Array {
  ValueType element_type = ValueType::Uint8;
  std::vector<Value> items;
};

class Value {
 public:
  Value() = default;  // Uint8 0
  static Value u8(uint8_t v) { return Value(ValueType::Uint8, Storage(uint64_t{v})); }
  static Value i8(int8_t v) { return Value(ValueType::Int8, Storage(int64_t{v})); }
  static Value u16(uint16_t v) { return Value(ValueType::Uint16, Storage(uint64_t{v})); }
  static Value i16(int16_t v) { return Value(ValueType::Int16, Storage(int64_t{v})); }
  static Value u32(uint32_t v) { return Value(ValueType::Uint32, Storage(uint64_t{v})); }
  static Value i32(int32_t v) { return Value(ValueType::Int32, Storage(int64_t{v})); }
  static Value u64(uint64_t v) { return Value(ValueType::Uint64, Storage(v)); }
  static Value i64(int64_t v) { return Value(ValueType::Int64, Storage(v)); }
  static Value f32(float v) { return Value(ValueType::Float32, Storage(double{v})); }
  static Value f64(double v) { return Value(ValueType::Float64, Storage(v)); }
  static Value boolean(bool v) { return Value(ValueType::Bool, Storage(v)); }
  static Value string(std::string v) { return Value(ValueType::String, Storage(std::move(v))); }
  static Value array(Array v) { return Value(ValueType::Array, Storage(std::move(v))); }
  static Value string_array(const std::vector<std::string>& items);
  static Value f32_array(const std::vector<float>& items);
  static Value i32_array(const std::vector<int32_t>& items);

  ValueType type() const { return m_type; }
  bool is_integer() const;

  // Conversions; nullopt when the value is of another kind or does not fit.
  std::optional<int64_t> as_int() const;
  std::optional<uint64_t> as_uint() const;
  std::optional<double> as_float() const;  // floats and integers
  std::optional<bool> as_bool() const;
  const std::string* as_string() const;
  const Array* as_array() const;

  // Short human-readable form: long arrays are shown as their first items and a count.
  std::string to_display_string(size_t max_items = 6) const;

 private:
  using Storage = std::variant<uint64_t, int64_t, double, bool, std::string, Array>;
  Value(ValueType type, Storage storage) : m_type(type), m_storage(std::move(storage)) {}

  ValueType m_type = ValueType::Uint8;
  Storage m_storage = uint64_t{0};
};

struct KeyValue {
  std::string key;
  Value value;
};

}  // namespace iwb::gguf
