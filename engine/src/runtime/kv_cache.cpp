// The contiguous f16 KV cache: per layer, K and V slabs of [capacity x num_kv_heads x head_dim].
#include "iwb/engine/runtime/kv_cache.h"

#include "iwb/kernels/dequantize_fast.h"

#include <algorithm>
#include <new>
#include <string>
#include <vector>

namespace iwb {
namespace {

class ContiguousKvCache final : public KvCache {
 public:
  explicit ContiguousKvCache(const KvCacheShape& shape) : m_shape(shape) {}

  const KvCacheShape& shape() const override { return m_shape; }

  Status reserve(int64_t capacity) override {
    if (capacity <= 0) return make_error(ErrorCode::InvalidArgument, "a KV cache needs room for at least one position");
    const size_t k_elems = static_cast<size_t>(capacity * k_row());
    const size_t v_elems = static_cast<size_t>(capacity * v_row());
    try {
      m_k.assign(static_cast<size_t>(m_shape.num_layers), std::vector<uint16_t>(k_elems));
      m_v.assign(static_cast<size_t>(m_shape.num_layers), std::vector<uint16_t>(v_elems));
    } catch (const std::bad_alloc&) {
      m_k.clear();
      m_v.clear();
      m_capacity = 0;
      m_num_positions = 0;
      return make_error(ErrorCode::OutOfMemory, "not enough memory for a KV cache of " + std::to_string(capacity) +
                                                    " positions");
    }
    m_capacity = capacity;
    m_num_positions = 0;
    return {};
  }

  int64_t capacity() const override { return m_capacity; }
  int64_t num_positions() const override { return m_num_positions; }

  Status write(int64_t layer, int64_t first, int64_t count, const float* k, const float* v) override {
    if (layer < 0 || layer >= m_shape.num_layers) {
      return make_error(ErrorCode::InvalidArgument, "KV cache layer " + std::to_string(layer) + " does not exist");
    }
    if (first < 0 || count <= 0 || first > m_num_positions || first + count > m_capacity) {
      return make_error(ErrorCode::InvalidArgument,
                        "KV cache write of positions " + std::to_string(first) + ".." +
                            std::to_string(first + count - 1) + " does not fit (filled " +
                            std::to_string(m_num_positions) + ", capacity " + std::to_string(m_capacity) + ")");
    }
    convert_f32_to_f16(k, m_k[layer].data() + first * k_row(), count * k_row());
    convert_f32_to_f16(v, m_v[layer].data() + first * v_row(), count * v_row());
    return {};
  }

  void commit(int64_t num_positions) override { m_num_positions = std::clamp<int64_t>(num_positions, 0, m_capacity); }
  void truncate(int64_t num_positions) override { m_num_positions = std::clamp<int64_t>(num_positions, 0, m_num_positions); }
  void clear() override { m_num_positions = 0; }

  KvLayerView layer(int64_t layer) const override {
    if (layer < 0 || layer >= static_cast<int64_t>(m_k.size())) return {};
    return {m_k[layer].data(), m_v[layer].data(), k_row(), v_row(), m_capacity};
  }

  uint64_t num_bytes() const override {
    return static_cast<uint64_t>(m_capacity) * static_cast<uint64_t>(k_row() + v_row()) * 2u *
           static_cast<uint64_t>(m_shape.num_layers);
  }

 private:
  int64_t k_row() const { return m_shape.num_kv_heads * m_shape.head_dim_k; }
  int64_t v_row() const { return m_shape.num_kv_heads * m_shape.head_dim_v; }

  KvCacheShape m_shape;
  std::vector<std::vector<uint16_t>> m_k, m_v;  // [layer][capacity x row]
  int64_t m_capacity = 0;
  int64_t m_num_positions = 0;
};

}  // namespace

std::unique_ptr<KvCache> make_contiguous_kv_cache(const KvCacheShape& shape) {
  return std::make_unique<ContiguousKvCache>(shape);
}

}  // namespace iwb
