// GGUF metadata values: conversions and a short display form for tools and the UI.
#include "iwb/engine/gguf/gguf_value.h"

#include <cmath>
#include <cstdio>
#include <limits>

namespace iwb::gguf {

std::string_view value_type_name(ValueType type) {
  switch (type) {
    case ValueType::Uint8: return "u8";
    case ValueType::Int8: return "i8";
    case ValueType::Uint16: return "u16";
    case ValueType::Int16: return "i16";
    case ValueType::Uint32: return "u32";
    case ValueType::Int32: return "i32";
    case ValueType::Float32: return "f32";
    case ValueType::Bool: return "bool";
    case ValueType::String: return "str";
    case ValueType::Array: return "arr";
    case ValueType::Uint64: return "u64";
    case ValueType::Int64: return "i64";
    case ValueType::Float64: return "f64";
  }
  return "?";
}

bool is_valid_value_type(uint32_t id) { return id <= static_cast<uint32_t>(ValueType::Float64); }

Value Value::string_array(const std::vector<std::string>& items) {
  Array a{ValueType::String, {}};
  a.items.reserve(items.size());
  for (const std::string& s : items) a.items.push_back(Value::string(s));
  return Value::array(std::move(a));
}

Value Value::f32_array(const std::vector<float>& items) {
  Array a{ValueType::Float32, {}};
  a.items.reserve(items.size());
  for (float f : items) a.items.push_back(Value::f32(f));
  return Value::array(std::move(a));
}

Value Value::i32_array(const std::vector<int32_t>& items) {
  Array a{ValueType::Int32, {}};
  a.items.reserve(items.size());
  for (int32_t v : items) a.items.push_back(Value::i32(v));
  return Value::array(std::move(a));
}

bool Value::is_integer() const {
  return std::holds_alternative<uint64_t>(m_storage) || std::holds_alternative<int64_t>(m_storage);
}


std::optional<int64_t> Value::as_int() const {
  if (const auto* u = std::get_if<uint64_t>(&m_storage)) {
    if (*u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return std::nullopt;
    return static_cast<int64_t>(*u);
  }
  if (const auto* i = std::get_if<int64_t>(&m_storage)) return *i;
  return std::nullopt;
}

std::optional<uint64_t> Value::as_uint() const {
  if (const auto* u = std::get_if<uint64_t>(&m_storage)) return *u;
  if (const auto* i = std::get_if<int64_t>(&m_storage)) {
    if (*i < 0) return std::nullopt;
    return static_cast<uint64_t>(*i);
  }
  return std::nullopt;
}

std::optional<double> Value::as_float() const {
  if (const auto* d = std::get_if<double>(&m_storage)) return *d;
  if (const auto* u = std::get_if<uint64_t>(&m_storage)) return static_cast<double>(*u);
  if (const auto* i = std::get_if<int64_t>(&m_storage)) return static_cast<double>(*i);
  return std::nullopt;
}

std::optional<bool> Value::as_bool() const {
  if (const auto* b = std::get_if<bool>(&m_storage)) return *b;
  return std::nullopt;
}

const std::string* Value::as_string() const { return std::get_if<std::string>(&m_storage); }

const Array* Value::as_array() const { return std::get_if<Array>(&m_storage); }

namespace {

// Quotes a string, escaping control characters and cutting long text.
std::string quoted(const std::string& s, size_t max_chars) {
  std::string out = "\"";
  size_t n = 0;
  for (char c : s) {
    // Count characters, not bytes, so the cut never splits a UTF-8 sequence.
    if ((static_cast<unsigned char>(c) & 0xC0) != 0x80 && n++ >= max_chars) {
      out += "…";
      break;
    }
    switch (c) {
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\x%02x", static_cast<unsigned char>(c));
          out += buf;
        } else {
          out += c;
        }
    }
  }
  out += '"';
  return out;
}

std::string format_double(double d) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.7g", d);
  return buf;
}

}  // namespace

std::string Value::to_display_string(size_t max_items) const {
  if (const auto* s = std::get_if<std::string>(&m_storage)) return quoted(*s, 80);
  if (const auto* b = std::get_if<bool>(&m_storage)) return *b ? "true" : "false";
  if (const auto* d = std::get_if<double>(&m_storage)) return format_double(*d);
  if (const auto* u = std::get_if<uint64_t>(&m_storage)) return std::to_string(*u);
  if (const auto* i = std::get_if<int64_t>(&m_storage)) return std::to_string(*i);
  const Array& a = std::get<Array>(m_storage);
  std::string out = "[";
  for (size_t k = 0; k < a.items.size() && k < max_items; ++k) {
    if (k) out += ", ";
    out += a.items[k].to_display_string(max_items);
  }
  if (a.items.size() > max_items) out += ", …";
  out += "]";
  if (a.items.size() > max_items) {
    out += " (" + std::to_string(a.items.size()) + " " + std::string(value_type_name(a.element_type)) + ")";
  }
  return out;
}

}  // namespace iwb::gguf
