// The attention KV cache behind an interface: the forward pass writes each layer's keys and
// values for new positions and reads them back as strided f16 views. The contiguous cache is
// one sequence in one slab per layer; a paged cache (blocks, sharing) can replace it later.
#pragma once

#include "iwb/engine/status.h"

#include <cstdint>
#include <memory>

namespace iwb {

struct KvCacheShape {
  int64_t num_layers = 0;
  int64_t num_kv_heads = 0;
  int64_t head_dim_k = 0;
  int64_t head_dim_v = 0;
};

// One layer's keys and values: position p, KV head g at k + p*k_row_stride + g*head_dim_k.
struct KvLayerView {
  const uint16_t* k = nullptr;  // f16
  const uint16_t* v = nullptr;  // f16
  int64_t k_row_stride = 0;     // elements
  int64_t v_row_stride = 0;
  int64_t capacity = 0;         // positions with storage
};

class KvCache {
 public:
  virtual ~KvCache() = default;

  virtual const KvCacheShape& shape() const = 0;
  // Makes room for `capacity` positions in every layer (keeps nothing already stored).
  virtual Status reserve(int64_t capacity) = 0;
  virtual int64_t capacity() const = 0;
  // Positions whose keys and values are complete in every layer.
  virtual int64_t num_positions() const = 0;

  // Stores the keys [count x num_kv_heads*head_dim_k] and values [count x num_kv_heads*head_dim_v]
  // (f32, converted to f16) of positions first..first+count-1 in one layer. The range must start
  // at or before num_positions() and end within the capacity.
  virtual Status write(int64_t layer, int64_t first_position, int64_t count, const float* k, const float* v) = 0;
  // Declares positions [0, num_positions) complete in every layer, after their writes.
  virtual void commit(int64_t num_positions) = 0;
  // Forgets positions from num_positions on (a shorter shared prefix, a regenerated reply).
  virtual void truncate(int64_t num_positions) = 0;
  virtual void clear() = 0;

  virtual KvLayerView layer(int64_t layer) const = 0;
  virtual uint64_t num_bytes() const = 0;  // storage held
};

// One contiguous f16 slab per layer for K and one for V.
std::unique_ptr<KvCache> make_contiguous_kv_cache(const KvCacheShape& shape);

}  // namespace iwb
