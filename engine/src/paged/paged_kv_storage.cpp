// The paged K/V pools (see paged_kv_storage.h).
#include "iwb/engine/paged/paged_kv_storage.h"

#include "iwb/kernels/paged_attention.h"

#include <algorithm>
#include <cstddef>
#include <new>
#include <string>
#include <utility>
#include <vector>

namespace iwb {
namespace {

// Per-layer shapes may give a layer no KV heads (Gemma 4's shared KV layers store nothing), as
// long as some layer stores something.
bool shape_ok(const KvCacheShape& s) {
  if (s.num_layers <= 0 || (!s.layers.empty() && static_cast<int64_t>(s.layers.size()) != s.num_layers)) return false;
  bool stores_any = false;
  for (int64_t il = 0; il < s.num_layers; ++il) {
    const KvLayerShape l = s.layer(il);
    if (l.num_kv_heads < 0 || (l.num_kv_heads == 0 && s.layers.empty()) || l.head_dim_k <= 0 || l.head_dim_v <= 0) {
      return false;
    }
    stores_any = stores_any || l.num_kv_heads > 0;
  }
  return stores_any;
}

std::string mib(uint64_t bytes) { return std::to_string(bytes / (1024 * 1024)) + " MiB"; }

Status check_type(const KvCacheShape& shape, KvCacheTypes types) {
  for (const GgmlType type : {types.k, types.v}) {
    if (!is_kv_cache_type(type)) {
      return make_error(ErrorCode::Unsupported, "the KV cache stores " + std::string(kv_cache_type_choices()) +
                                                    ", not " + std::string(ggml_type_name(type)));
    }
  }
  for (int64_t il = 0; il < shape.num_layers; ++il) {
    const KvLayerShape l = shape.layer(il);
    if (kv_row_units(types.k, l.head_dim_k) == 0 || kv_row_units(types.v, l.head_dim_v) == 0) {
      return make_error(ErrorCode::InvalidArgument, "a " + kv_cache_types_name(types) +
                                                        " KV cache needs head sizes that are multiples of 32; "
                                                        "this model's are " +
                                                        std::to_string(l.head_dim_k) + " and " +
                                                        std::to_string(l.head_dim_v));
    }
  }
  return {};
}

}  // namespace

KvCacheShape kv_cache_shape(const ModelConfig& c) {
  KvCacheShape s{c.num_layers, c.num_kv_heads, c.head_dim_k, c.head_dim_v, c.has_latent_attention()};
  if (c.has_layer_attention_shapes()) {
    for (int64_t il = 0; il < c.num_layers; ++il) {  // a shared KV layer stores nothing
      s.layers.push_back(
          {c.has_own_kv(il) ? c.layer_num_kv_heads(il) : 0, c.layer_head_dim_k(il), c.layer_head_dim_v(il)});
    }
  }
  return s;
}

namespace {

// Units of one slot's key and value rows of a layer (values 0 where they live in the keys).
std::pair<int64_t, int64_t> layer_units(const KvCacheShape& shape, int64_t il, KvCacheTypes types, bool is_shared) {
  const KvLayerShape l = shape.layer(il);
  const int64_t k = l.num_kv_heads * kv_row_units(types.k, l.head_dim_k);
  const int64_t v = is_shared ? 0 : l.num_kv_heads * kv_row_units(types.v, l.head_dim_v);
  return {k, v};
}

}  // namespace

bool PagedKvStorage::shares_values(const KvCacheShape& shape, KvCacheTypes types) {
  // The value row must be a prefix of the key row as stored: the same type, whole blocks, and
  // for the rotated block types the same Hadamard pieces over the first head_dim_v values.
  return shape.is_value_in_key && shape.layers.empty() && shape.num_kv_heads == 1 && types.k == types.v &&
         shape.head_dim_v <= shape.head_dim_k && kv_row_units(types.v, shape.head_dim_v) > 0 &&
         kv_rotation_size(types.k, shape.head_dim_k, true) == kv_rotation_size(types.v, shape.head_dim_v, false);
}

uint64_t PagedKvStorage::bytes_per_block(const KvCacheShape& shape, int32_t block_size, KvCacheTypes types) {
  if (!shape_ok(shape) || block_size <= 0) return 0;
  const bool is_shared = shares_values(shape, types);
  uint64_t units = 0;
  for (int64_t il = 0; il < shape.num_layers; ++il) {
    const KvLayerShape l = shape.layer(il);
    if (kv_row_units(types.k, l.head_dim_k) == 0 || kv_row_units(types.v, l.head_dim_v) == 0) return 0;
    const auto [k, v] = layer_units(shape, il, types, is_shared);
    units += static_cast<uint64_t>(k + v);
  }
  return 2u * static_cast<uint64_t>(block_size) * units;
}

Result<int64_t> PagedKvStorage::num_blocks_for_budget(const KvCacheShape& shape, int32_t block_size,
                                                      uint64_t budget_bytes, KvCacheTypes types) {
  if (shape_ok(shape)) IWB_RETURN_IF_ERROR(check_type(shape, types));
  const uint64_t per_block = bytes_per_block(shape, block_size, types);
  if (per_block == 0)
    return make_error(ErrorCode::InvalidArgument, "a paged KV cache needs a model shape and a block size");
  const uint64_t n = budget_bytes / per_block;
  if (n == 0) {
    return make_error(ErrorCode::InvalidArgument, "a KV budget of " + std::to_string(budget_bytes) +
                                                      " bytes holds no block of " + std::to_string(block_size) +
                                                      " tokens (" + std::to_string(per_block) + " bytes)");
  }
  return static_cast<int64_t>(std::min<uint64_t>(n, 0x7fffffffu));
}

Result<std::unique_ptr<PagedKvStorage>> PagedKvStorage::create(const KvCacheShape& shape, int32_t block_size,
                                                               int64_t num_blocks, KvCacheTypes types) {
  if (!shape_ok(shape) || block_size <= 0 || num_blocks <= 0) {
    return make_error(ErrorCode::InvalidArgument,
                      "a paged KV cache needs layers, KV heads, head sizes, a block size "
                      "and at least one block");
  }
  IWB_RETURN_IF_ERROR(check_type(shape, types));
  std::unique_ptr<PagedKvStorage> s(new PagedKvStorage());
  s->m_types = types;
  s->m_shape = shape;
  s->m_block_size = block_size;
  s->m_num_blocks = num_blocks;
  s->m_is_value_shared = shares_values(shape, types);
  // Every layer's keys, then every layer's values, in one region of 2 MiB pages
  // (huge_page_region.h: whole pages, so one region wastes at most one page's rounding), touched
  // now (by several threads), so the pool's memory is had up front, as a zeroed vector's was.
  const auto too_little = [&] {
    return make_error(ErrorCode::OutOfMemory,
                      "not enough memory for a paged KV cache of " + std::to_string(num_blocks) + " blocks (" +
                          mib(bytes_per_block(shape, block_size, types) * static_cast<uint64_t>(num_blocks)) + ")");
  };
  const auto layers = static_cast<size_t>(shape.num_layers);
  int64_t units = 0;
  for (int64_t il = 0; il < shape.num_layers; ++il) {  // the keys of every layer, then the values
    s->m_k_offsets.push_back(units);
    units += s->num_slots() * layer_units(shape, il, types, s->m_is_value_shared).first;
  }
  for (int64_t il = 0; il < shape.num_layers; ++il) {
    s->m_v_offsets.push_back(units);
    units += s->num_slots() * layer_units(shape, il, types, s->m_is_value_shared).second;
  }
  s->m_pool = HugePageRegion::allocate(static_cast<size_t>(units) * sizeof(uint16_t));
  if (s->m_pool.empty()) return too_little();
  s->m_pool.touch_in_parallel();
  try {
    s->m_k_scales.assign(layers, 1.0f);
    s->m_v_scales.assign(layers, 1.0f);
    s->m_is_calibrated.assign(layers, false);
  } catch (const std::bad_alloc&) {
    return too_little();
  }
  return s;
}

uint64_t PagedKvStorage::num_bytes() const {
  return bytes_per_block(m_shape, m_block_size, m_types) * static_cast<uint64_t>(m_num_blocks);
}

int64_t PagedKvStorage::k_row(int64_t layer) const {
  const KvLayerShape l = m_shape.layer(layer);
  return l.num_kv_heads * l.head_dim_k;
}
int64_t PagedKvStorage::v_row(int64_t layer) const {
  const KvLayerShape l = m_shape.layer(layer);
  return l.num_kv_heads * l.head_dim_v;
}
int64_t PagedKvStorage::k_units(int64_t layer) const { return kv_row_units(m_types.k, k_row(layer)); }
int64_t PagedKvStorage::v_units(int64_t layer) const {
  return m_is_value_shared ? k_units(layer) : kv_row_units(m_types.v, v_row(layer));
}

const uint16_t* PagedKvStorage::k_data(int64_t layer) const {
  if (layer < 0 || layer >= m_shape.num_layers) return nullptr;
  return static_cast<const uint16_t*>(m_pool.data()) + m_k_offsets[static_cast<size_t>(layer)];
}
const uint16_t* PagedKvStorage::v_data(int64_t layer) const {
  if (layer < 0 || layer >= m_shape.num_layers) return nullptr;
  if (m_is_value_shared) return k_data(layer);
  return static_cast<const uint16_t*>(m_pool.data()) + m_v_offsets[static_cast<size_t>(layer)];
}
uint16_t* PagedKvStorage::k_data(int64_t layer) { return const_cast<uint16_t*>(std::as_const(*this).k_data(layer)); }
uint16_t* PagedKvStorage::v_data(int64_t layer) { return const_cast<uint16_t*>(std::as_const(*this).v_data(layer)); }

int64_t PagedKvStorage::slot_index(int64_t layer, BlockId block, int64_t offset) const {
  if (layer < 0 || layer >= m_shape.num_layers || block < 0 || block >= m_num_blocks || offset < 0 ||
      offset >= m_block_size) {
    return -1;
  }
  return static_cast<int64_t>(block) * m_block_size + offset;
}

const uint16_t* PagedKvStorage::k_slot(int64_t layer, BlockId block, int64_t offset) const {
  const int64_t s = slot_index(layer, block, offset);
  return s < 0 ? nullptr : k_data(layer) + s * k_units(layer);
}
const uint16_t* PagedKvStorage::v_slot(int64_t layer, BlockId block, int64_t offset) const {
  const int64_t s = slot_index(layer, block, offset);
  return s < 0 ? nullptr : v_data(layer) + s * v_units(layer);
}
uint16_t* PagedKvStorage::k_slot(int64_t layer, BlockId block, int64_t offset) {
  return const_cast<uint16_t*>(std::as_const(*this).k_slot(layer, block, offset));
}
uint16_t* PagedKvStorage::v_slot(int64_t layer, BlockId block, int64_t offset) {
  return const_cast<uint16_t*>(std::as_const(*this).v_slot(layer, block, offset));
}

float PagedKvStorage::k_scale(int64_t layer) const {
  return layer >= 0 && layer < m_shape.num_layers ? m_k_scales[static_cast<size_t>(layer)] : 1.0f;
}
float PagedKvStorage::v_scale(int64_t layer) const {
  if (m_is_value_shared) return k_scale(layer);  // the values are stored as keys
  return layer >= 0 && layer < m_shape.num_layers ? m_v_scales[static_cast<size_t>(layer)] : 1.0f;
}
bool PagedKvStorage::is_layer_calibrated(int64_t layer) const {
  return layer >= 0 && layer < m_shape.num_layers && m_is_calibrated[static_cast<size_t>(layer)];
}

void PagedKvStorage::calibrate(int64_t layer, std::span<const int64_t> slot_mapping, const float* k, const float* v) {
  // Only the tokens written count (padding rows may hold anything); one scale per layer and side.
  std::vector<float> rows_k, rows_v;
  for (size_t t = 0; t < slot_mapping.size(); ++t) {
    if (slot_mapping[t] < 0) continue;
    const int64_t kr = k_row(layer), vr = v_row(layer);
    rows_k.insert(rows_k.end(), k + static_cast<int64_t>(t) * kr, k + static_cast<int64_t>(t + 1) * kr);
    if (!m_is_value_shared) {
      rows_v.insert(rows_v.end(), v + static_cast<int64_t>(t) * vr, v + static_cast<int64_t>(t + 1) * vr);
    }
  }
  if (rows_k.empty()) return;  // nothing written: calibrate on the next write
  const auto l = static_cast<size_t>(layer);
  if (m_types.k == GgmlType::F8_E4M3) {
    m_k_scales[l] = kv_calibrated_scale(rows_k.data(), static_cast<int64_t>(rows_k.size()), kKScaleConstant);
  }
  if (m_types.v == GgmlType::F8_E4M3 && !m_is_value_shared) {
    m_v_scales[l] = kv_calibrated_scale(rows_v.data(), static_cast<int64_t>(rows_v.size()), kVScaleConstant);
  }
  m_is_calibrated[l] = true;
}

Status PagedKvStorage::write(int64_t layer, std::span<const int64_t> slot_mapping, const float* k, const float* v) {
  if (layer < 0 || layer >= m_shape.num_layers) {
    return make_error(ErrorCode::InvalidArgument, "paged KV cache layer " + std::to_string(layer) + " does not exist");
  }
  if (slot_mapping.empty()) return {};
  if (m_types.calculate_scales && !m_is_calibrated[static_cast<size_t>(layer)]) calibrate(layer, slot_mapping, k, v);
  WriteKvPagedArgs args;
  args.k = k;
  args.v = v;
  args.slot_mapping = slot_mapping.data();
  args.num_tokens = static_cast<int64_t>(slot_mapping.size());
  args.k_cache = k_data(layer);
  args.v_cache = v_data(layer);
  args.num_slots = num_slots();
  args.k_row = k_row(layer);
  args.v_row = v_row(layer);
  args.num_kv_heads = m_shape.layer(layer).num_kv_heads;
  args.k_type = m_types.k;
  args.v_type = m_types.v;
  args.k_scale = k_scale(layer);
  args.v_scale = v_scale(layer);
  args.has_values = !m_is_value_shared;  // shared: the keys' rows hold the values already
  if (!write_kv_paged(args)) {
    return make_error(ErrorCode::InvalidArgument, "paged KV write refused: a slot is outside the " +
                                                      std::to_string(num_slots()) + " slots, or K/V data is missing");
  }
  return {};
}

Status PagedKvStorage::copy_block(BlockId src, BlockId dst) {
  if (src < 0 || src >= m_num_blocks || dst < 0 || dst >= m_num_blocks) {
    return make_error(ErrorCode::InvalidArgument, "block copy " + std::to_string(src) + " -> " + std::to_string(dst) +
                                                      " is outside the " + std::to_string(m_num_blocks) + " blocks");
  }
  if (src == dst) return {};
  for (int64_t layer = 0; layer < m_shape.num_layers; ++layer) {
    const size_t k_block = static_cast<size_t>(m_block_size * k_units(layer)),
                 v_block = static_cast<size_t>(m_block_size * v_units(layer));
    uint16_t* k = k_data(layer);
    std::copy_n(k + src * k_block, k_block, k + dst * k_block);
    if (m_is_value_shared) continue;  // copied with the keys
    uint16_t* v = v_data(layer);
    std::copy_n(v + src * v_block, v_block, v + dst * v_block);
  }
  return {};
}

Status PagedKvStorage::copy_blocks(std::span<const BlockCopy> copies) {
  // Validated up front so a bad entry leaves the pools untouched.
  for (const BlockCopy& c : copies) {
    if (c.src < 0 || c.src >= m_num_blocks || c.dst < 0 || c.dst >= m_num_blocks) {
      return make_error(ErrorCode::InvalidArgument, "block copy " + std::to_string(c.src) + " -> " +
                                                        std::to_string(c.dst) + " is outside the pool");
    }
  }
  for (const BlockCopy& c : copies) IWB_RETURN_IF_ERROR(copy_block(c.src, c.dst));
  return {};
}

}  // namespace iwb
