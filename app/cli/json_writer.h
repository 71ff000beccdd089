// Minimal streaming JSON writer for the CLI's --json outputs (keys in insertion order).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace iwb::cli {

class JsonWriter {
 public:
  JsonWriter& begin_object() { open('{'); return *this; }
  JsonWriter& end_object() { close('}'); return *this; }
  JsonWriter& begin_array() { open('['); return *this; }
  JsonWriter& end_array() { close(']'); return *this; }

  JsonWriter& key(const std::string& k) {
    separate();
    append_string(k);
    m_out += ':';
    m_after_key = true;
    return *this;
  }
  JsonWriter& value(const std::string& s) { separate(); append_string(s); return *this; }
  JsonWriter& value(const char* s) { return value(std::string(s)); }
  JsonWriter& value(bool b) { separate(); m_out += b ? "true" : "false"; return *this; }
  JsonWriter& value(int64_t v) { separate(); m_out += std::to_string(v); return *this; }
  JsonWriter& value(uint64_t v) { separate(); m_out += std::to_string(v); return *this; }
  JsonWriter& value(int v) { return value(static_cast<int64_t>(v)); }
  JsonWriter& value(double v) {
    separate();
    if (!std::isfinite(v)) { m_out += "null"; return *this; }
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.9g", v);
    m_out += buf;
    return *this;
  }
  template <typename T>
  JsonWriter& field(const std::string& k, const T& v) { key(k); return value(v); }

  const std::string& str() const { return m_out; }

 private:
  void open(char c) { separate(); m_out += c; m_first.push_back(true); }
  void close(char c) { m_out += c; m_first.pop_back(); }
  // Commas between siblings; none right after a key.
  void separate() {
    if (m_after_key) { m_after_key = false; return; }
    if (!m_first.empty()) {
      if (!m_first.back()) m_out += ',';
      m_first.back() = false;
    }
  }
  void append_string(const std::string& s) {
    m_out += '"';
    for (unsigned char c : s) {
      switch (c) {
        case '"': m_out += "\\\""; break;
        case '\\': m_out += "\\\\"; break;
        case '\n': m_out += "\\n"; break;
        case '\r': m_out += "\\r"; break;
        case '\t': m_out += "\\t"; break;
        default:
          if (c < 0x20) {
            char buf[8];
            std::snprintf(buf, sizeof buf, "\\u%04x", c);
            m_out += buf;
          } else {
            m_out += static_cast<char>(c);
          }
      }
    }
    m_out += '"';
  }

  std::string m_out;
  std::vector<bool> m_first;
  bool m_after_key = false;
};

}  // namespace iwb::cli
