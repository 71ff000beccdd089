// The K/V data of the paged cache: per layer, one f16 pool for keys and one for values of
// num_blocks x block_size slots (in 2 MiB pages), sized from the memory the user allows. The block manager
// decides which slots a token uses; this class only stores, copies and hands out pointers.
#pragma once

#include "iwb/engine/model/model_config.h"
#include "iwb/engine/paged/kv_cache_types.h"
#include "iwb/engine/paged/paged_types.h"
#include "iwb/engine/runtime/huge_page_region.h"
#include "iwb/engine/status.h"
#include "iwb/kernels/ggml_type.h"

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

namespace iwb {

// One layer's heads in the cache.
struct KvLayerShape {
  int64_t num_kv_heads = 0;
  int64_t head_dim_k = 0;
  int64_t head_dim_v = 0;
  bool operator==(const KvLayerShape&) const = default;
};

// What the cache stores per position: f16 keys and values of every layer's KV heads.
struct KvCacheShape {
  int64_t num_layers = 0;
  int64_t num_kv_heads = 0;
  int64_t head_dim_k = 0;
  int64_t head_dim_v = 0;
  // The values are each key row's first head_dim_v values (latent attention: K = [latent, roped
  // values], V = the latent). The cache then stores keys only, where the types allow it
  // (shares_values): one KV head, the same type on both sides, the same Hadamard pieces.
  bool is_value_in_key = false;
  // Each layer's heads where layers differ (Gemma 4's sliding and global layers); empty: every
  // layer is num_kv_heads x head_dim_k / head_dim_v.
  std::vector<KvLayerShape> layers = {};

  KvLayerShape layer(int64_t il) const {
    return static_cast<size_t>(il) < layers.size() ? layers[static_cast<size_t>(il)]
                                                   : KvLayerShape{num_kv_heads, head_dim_k, head_dim_v};
  }
};

// The cache shape of a model: its layers' KV heads and head sizes.
KvCacheShape kv_cache_shape(const ModelConfig& config);

class PagedKvStorage {
 public:
  // Whether a cache of this shape and types keeps its values inside its key rows (see KvCacheShape).
  static bool shares_values(const KvCacheShape& shape, KvCacheTypes types);
  bool shares_values() const { return m_is_value_shared; }
  // Bytes one block takes over all layers, K and V (f16; Q8_0: 34 bytes per 32 values, Q4_0: 18;
  // the block types need head sizes that are multiples of 32 — 0 otherwise).
  static uint64_t bytes_per_block(const KvCacheShape& shape, int32_t block_size, KvCacheTypes types = {});
  // How many blocks fit in `budget_bytes`; an error when not even one does.
  static Result<int64_t> num_blocks_for_budget(const KvCacheShape& shape, int32_t block_size, uint64_t budget_bytes,
                                               KvCacheTypes types = {});
  // An error names the problem when a type is not a KV cache type, or a block type does not fit the heads.
  static Result<std::unique_ptr<PagedKvStorage>> create(const KvCacheShape& shape, int32_t block_size,
                                                        int64_t num_blocks, KvCacheTypes types = {});

  const KvCacheShape& shape() const { return m_shape; }
  int32_t block_size() const { return m_block_size; }
  int64_t num_blocks() const { return m_num_blocks; }
  int64_t num_slots() const { return m_num_blocks * m_block_size; }
  // Values per slot of a layer's key (value) row.
  int64_t k_row(int64_t layer) const;
  int64_t v_row(int64_t layer) const;
  const KvCacheTypes& types() const { return m_types; }
  // uint16 units of one slot's key (value) row of a layer in the pools: k_row() for f16, 17 per
  // 32 for Q8_0. With shared values v_units() is the key row's: the distance between value rows
  // in v_data().
  int64_t k_units(int64_t layer) const;
  int64_t v_units(int64_t layer) const;
  uint64_t num_bytes() const;
  // How many bytes of the pools sit in 2 MiB pages now (HugePageRegion::huge_page_bytes: reads
  // /proc/self/smaps, a millisecond or so; the pools are touched at creation, so once is enough).
  uint64_t huge_page_bytes() const { return m_pool.huge_page_bytes(); }

  // A layer's pools, [num_blocks x block_size x num_kv_heads x head_dim]: what paged_attention reads.
  // Null for a layer that does not exist.
  const uint16_t* k_data(int64_t layer) const;
  const uint16_t* v_data(int64_t layer) const;
  uint16_t* k_data(int64_t layer);
  uint16_t* v_data(int64_t layer);
  // One slot's key (value) row of a layer; null for a layer, block or offset out of range.
  uint16_t* k_slot(int64_t layer, BlockId block, int64_t offset);
  uint16_t* v_slot(int64_t layer, BlockId block, int64_t offset);
  const uint16_t* k_slot(int64_t layer, BlockId block, int64_t offset) const;
  const uint16_t* v_slot(int64_t layer, BlockId block, int64_t offset) const;

  // An FP8 side's per-layer scale (vLLM's k_scale / v_scale: the cache holds x / scale); 1 for
  // other types, and until calibrated when types().calculate_scales is set, in which case the
  // first write of each layer sets them from its own keys and values (kv_calibrated_scale over
  // the tokens it writes), as vLLM's calc_kv_scales does on the first batch.
  float k_scale(int64_t layer) const;
  float v_scale(int64_t layer) const;
  bool is_layer_calibrated(int64_t layer) const;

  // Keys [n x k_row] and values [n x v_row] in f32 of n = slot_mapping.size() tokens into their
  // slots of one layer (a negative slot skips its token).
  Status write(int64_t layer, std::span<const int64_t> slot_mapping, const float* k, const float* v);
  // Copy-on-write: block src's slots into block dst, every layer, keys and values.
  Status copy_block(BlockId src, BlockId dst);
  Status copy_blocks(std::span<const BlockCopy> copies);

 private:
  PagedKvStorage() = default;
  int64_t slot_index(int64_t layer, BlockId block, int64_t offset) const;  // -1 when out of range
  void calibrate(int64_t layer, std::span<const int64_t> slot_mapping, const float* k, const float* v);

  KvCacheShape m_shape;
  int32_t m_block_size = 0;
  int64_t m_num_blocks = 0;
  KvCacheTypes m_types;
  // [layer][num_slots x k_units(layer)] keys, then [layer][num_slots x v_units(layer)] values
  // (uint16_t units); where each layer's pools start, in units.
  HugePageRegion m_pool;
  std::vector<int64_t> m_k_offsets, m_v_offsets;
  std::vector<float> m_k_scales, m_v_scales;  // [layer]: FP8 scales (1 for other types)
  std::vector<bool> m_is_calibrated;          // [layer]: scales set (only read with calculate_scales)
  bool m_is_value_shared = false;             // no value pool: v_data is k_data (shares_values)
};

}  // namespace iwb
