// Attention over a paged f16 KV cache: the queries of several sequences in one batch, each
// sequence reading its keys and values through its block table (grouped-query sharing, causal
// within the sequence, optional sliding window and soft-capping, as in attention.h; optional
// attention sinks, gpt-oss's per-head logit that joins each softmax's denominator only, as
// ggml_soft_max_ext's sinks: p_j = exp(s_j) / (exp(sink) + sum_k exp(s_k))). Also the
// write of new keys and values into the slots a slot mapping names.
//
// Cache layout of one layer (vLLM's): slot s = block * block_size + offset holds the key of KV
// head g at k_cache + s * num_kv_heads * head_dim + g * head_dim (values likewise, head_dim_v).
//
// Quantized KV cache (k_type / v_type other than F16, chosen separately as llama.cpp's -ctk and
// -ctv): each head's row of head_dim values is head_dim / 32 blocks of a 32-value type (Q8_0:
// 34 bytes, Q5_1: 24, Q5_0: 22, Q4_1: 20, Q4_0: 18) in the same layout, so a slot of k_row
// values takes kv_row_units(type, k_row) = k_row / 32 * bytes / 2 uint16 units instead of k_row.
// Head sizes must be multiples of 32. F8_E4M3 (vLLM's fp8 cache) is one byte per value, head
// sizes even, with vLLM's per-tensor scales (k_scale / v_scale, one per layer: stored
// e4m3(x / scale), read e4m3 * scale; 1 by default, or calibrated: kv_calibrated_scale). A
// quantized block side stores each head row Hadamard-rotated (as llama.cpp's cache does): large
// channels no longer set their blocks' scales alone; the attention undoes it (rotated queries,
// rotated-back output), so callers see plain values.
#pragma once

#include "iwb/kernels/ggml_type.h"
#include "iwb/kernels/op_cost.h"

#include <cstdint>

namespace iwb {

struct PagedAttentionArgs {
  const float* q = nullptr;           // [num_tokens x num_heads x head_dim]
  const uint16_t* k_cache = nullptr;  // f16 [num_blocks x block_size x num_kv_heads x head_dim]
  const uint16_t* v_cache = nullptr;  // f16 [num_blocks x block_size x num_kv_heads x head_dim_v]
  int64_t num_blocks = 0;
  int64_t block_size = 0;
  const int32_t* block_tables = nullptr;  // [num_sequences x max_blocks_per_sequence], unused entries any value
  int64_t max_blocks_per_sequence = 0;
  const int32_t* sequence_lengths = nullptr;  // [num_sequences]: positions 0..len-1 hold keys and values
  int64_t num_sequences = 0;
  const int32_t* token_sequences = nullptr;  // [num_tokens]: the sequence (row of block_tables) of each query
  const int32_t* positions = nullptr;        // [num_tokens]: the query's position, < its sequence's length
  int64_t num_tokens = 0;
  int64_t num_heads = 0;
  int64_t num_kv_heads = 0;  // divides num_heads
  int64_t head_dim = 0;
  int64_t head_dim_v = 0;
  float scale = 1.0f;               // multiplies q.k
  int64_t sliding_window = 0;       // > 0: query at p sees keys p - window < key <= p
  float softcap = 0.0f;             // > 0: score = softcap * tanh(score / softcap)
  float* output = nullptr;          // [num_tokens x num_heads x head_dim_v]
  int num_threads = 0;              // 0: OpenMP's default
  GgmlType k_type = GgmlType::F16;  // the keys' cache type (see above)
  GgmlType v_type = GgmlType::F16;  // the values' cache type
  bool is_rotated = true;           // quantized sides stored rotated (false: as they are)
  float k_scale = 1.0f;             // F8_E4M3 keys: stored values are key / k_scale (other types: unused)
  float v_scale = 1.0f;             // F8_E4M3 values: stored values are value / v_scale
  const float* sinks = nullptr;     // [num_heads] sink logits (not scaled, not soft-capped), or null
  // uint16 units from one slot's value row to the next; 0: kv_row_units(v_type, num_kv_heads *
  // head_dim_v), a pool of its own. Latent attention's values are each key row's first head_dim_v
  // values (one KV head): v_cache = k_cache and this the key row's units (paged_v_row_units).
  int64_t v_row_units = 0;
  // A token's output bit for bit the same whatever else the batch holds (the engine's
  // batch-invariant mode): the AVX-512 decode kernel, whose key splits follow the batch and
  // whose sums run in another order than the tiled kernel's, is not used.
  bool is_batch_invariant = false;
};

// The units between value rows paged attention reads (PagedAttentionArgs::v_row_units, or its own pool's).
int64_t paged_v_row_units(const PagedAttentionArgs& args);

// uint16 units one slot row of `num_values` values takes in a cache of `type` (F16: one per
// value; Q8_0: 17 per 32 values, Q4_0: 9); 0 for a type or size the cache cannot hold.
int64_t kv_row_units(GgmlType type, int64_t num_values);
// True for the types a KV cache can hold: F16, Q8_0, Q5_1, Q5_0, Q4_1, Q4_0, F8_E4M3.
bool is_kv_cache_type(GgmlType type);
// The Hadamard rotation a cache type's head rows get before quantizing (pieces of this many
// values; 0: stored as they are — F16, F8_E4M3): keys the largest power of two dividing the head
// size, values 64 (32 when 64 does not divide it).
int64_t kv_rotation_size(GgmlType type, int64_t head_dim, bool is_key);
// Bytes per value of a cache type (Q8_0: 34 / 32); 0 for a type the cache cannot hold.
double kv_bytes_per_value(GgmlType type);
// FP8 E4M3 (OCP "FN": no infinities, max 448) of x, round to nearest even, saturating; and back.
uint8_t f32_to_e4m3(float x);
float e4m3_to_f32(uint8_t b);
// vLLM's --calculate-kv-scales (Attention.calc_kv_scales): from the first batch a layer writes,
// k_scale = max |key| / K_SCALE_CONSTANT (200) and v_scale = max |value| / V_SCALE_CONSTANT
// (100), so the largest key lands at 200 of E4M3's 448. 1 when the maximum is 0 or not finite.
inline constexpr float kKScaleConstant = 200.0f;
inline constexpr float kVScaleConstant = 100.0f;
float kv_calibrated_scale(const float* x, int64_t n, float constant);

// False (writing nothing) for inconsistent arguments: a block id outside the pool, a query past
// its sequence's length, a sequence longer than its table, sizes that do not divide.
bool paged_attention(const PagedAttentionArgs& args);
bool paged_attention_ref(const PagedAttentionArgs& args);  // f16 -> double, one thread
OpCost paged_attention_cost(const PagedAttentionArgs& args);

struct WriteKvPagedArgs {
  const float* k = nullptr;               // [num_tokens x k_row]
  const float* v = nullptr;               // [num_tokens x v_row]
  const int64_t* slot_mapping = nullptr;  // [num_tokens]: destination slot; < 0 skips the token (padding)
  int64_t num_tokens = 0;
  uint16_t* k_cache = nullptr;      // f16 [num_slots x k_row]
  uint16_t* v_cache = nullptr;      // f16 [num_slots x v_row]
  int64_t num_slots = 0;            // num_blocks * block_size
  int64_t k_row = 0;                // num_kv_heads * head_dim
  int64_t v_row = 0;                // num_kv_heads * head_dim_v
  int64_t num_kv_heads = 1;         // heads per row: a quantized side is rotated head by head
  GgmlType k_type = GgmlType::F16;  // F16, or a block type (rows quantized per 32 values)
  GgmlType v_type = GgmlType::F16;
  bool is_rotated = true;  // rotate quantized sides first (see above)
  // false: keys only (v and v_cache unused): a cache whose values are the keys' first values.
  bool has_values = true;
  float k_scale = 1.0f;  // F8_E4M3 keys stored as e4m3(key / k_scale) (> 0, finite)
  float v_scale = 1.0f;  // F8_E4M3 values stored as e4m3(value / v_scale)
};

// f32 -> f16 (round to nearest even) or the block type (ggml's reference rounding) into the
// named slots; false for a slot outside the cache or a value the type cannot hold (checked
// before anything is written).
bool write_kv_paged(const WriteKvPagedArgs& args);
bool write_kv_paged_ref(const WriteKvPagedArgs& args);  // scalar conversions
OpCost write_kv_paged_cost(const WriteKvPagedArgs& args);

}  // namespace iwb
