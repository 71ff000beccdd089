// Hand-assembles GGUF bytes for tests, so a test can build exactly the malformed file it needs.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace iwb::test {

class GgufBytes {
 public:
  template <typename T>
  GgufBytes& put(T v) {
    const auto* p = reinterpret_cast<const uint8_t*>(&v);
    bytes.insert(bytes.end(), p, p + sizeof(T));
    return *this;
  }
  GgufBytes& str(const std::string& s) {
    put<uint64_t>(s.size());
    bytes.insert(bytes.end(), s.begin(), s.end());
    return *this;
  }
  GgufBytes& header(uint32_t version, uint64_t num_tensors, uint64_t num_kv) {
    return put<uint32_t>(0x46554747).put<uint32_t>(version).put<uint64_t>(num_tensors).put<uint64_t>(num_kv);
  }
  GgufBytes& kv_u32(const std::string& key, uint32_t v) { return str(key).put<uint32_t>(4).put<uint32_t>(v); }
  GgufBytes& kv_str(const std::string& key, const std::string& v) { return str(key).put<uint32_t>(8).str(v); }
  // One tensor info; shape in ggml order.
  GgufBytes& tensor(const std::string& name, std::vector<int64_t> shape, uint32_t type, uint64_t offset) {
    str(name).put<uint32_t>(static_cast<uint32_t>(shape.size()));
    for (int64_t d : shape) put<int64_t>(d);
    return put<uint32_t>(type).put<uint64_t>(offset);
  }
  GgufBytes& pad(uint64_t alignment) {
    while (bytes.size() % alignment) bytes.push_back(0);
    return *this;
  }
  GgufBytes& zeros(size_t n) {
    bytes.insert(bytes.end(), n, 0);
    return *this;
  }

  std::vector<uint8_t> bytes;
};

}  // namespace iwb::test
