// Paged attention and the paged K/V write (see paged_attention.h). On AVX-512 and AVX2 the decode
// kernel (one query per sequence) or the tiled kernel (prompts; its products on AMX tiles where
// the CPU has AMX-BF16: paged_attention_amx.cpp) runs, a batch of both split between them;
// otherwise (no AVX2, or
// head sizes they decline) the fast path gives each (query token, head) pair to an OpenMP
// thread and walks the sequence's blocks run by run (no division per key); the reference maps
// every position through the block table in double.
#include "iwb/kernels/paged_attention.h"

#include "iwb/kernels/dequantize.h"
#include "iwb/kernels/softmax.h"
#include "paged_attention_amx.h"
#include "paged_attention_decode.h"
#include "paged_attention_quant.h"
#include "paged_attention_tiles.h"
#include "parallel.h"
#include "simd.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace iwb {
namespace {

bool valid(const PagedAttentionArgs& a) {
  if (a.q == nullptr || a.k_cache == nullptr || a.v_cache == nullptr || a.block_tables == nullptr ||
      a.sequence_lengths == nullptr || a.token_sequences == nullptr || a.positions == nullptr || a.output == nullptr) {
    return false;
  }
  if (a.num_tokens <= 0 || a.num_sequences <= 0 || a.num_heads <= 0 || a.num_kv_heads <= 0 || a.head_dim <= 0 ||
      a.head_dim_v <= 0 || a.num_blocks <= 0 || a.block_size <= 0 || a.max_blocks_per_sequence <= 0) {
    return false;
  }
  if (a.num_heads % a.num_kv_heads != 0 || a.sliding_window < 0) return false;
  if (!(a.k_scale > 0.0f && std::isfinite(a.k_scale)) || !(a.v_scale > 0.0f && std::isfinite(a.v_scale))) return false;
  if (kv_row_units(a.k_type, a.head_dim) == 0 || kv_row_units(a.v_type, a.head_dim_v) == 0) return false;
  // Values read from the key rows: one KV head, rows at least as long as the values.
  if (a.v_row_units < 0 ||
      (a.v_row_units > 0 && (a.num_kv_heads != 1 || a.v_row_units < kv_row_units(a.v_type, a.head_dim_v)))) {
    return false;
  }
  for (int64_t s = 0; s < a.num_sequences; ++s) {
    const int64_t len = a.sequence_lengths[s];
    if (len <= 0 || len > a.max_blocks_per_sequence * a.block_size) return false;
    const int32_t* table = a.block_tables + s * a.max_blocks_per_sequence;
    for (int64_t i = 0; i < (len + a.block_size - 1) / a.block_size; ++i) {
      if (table[i] < 0 || table[i] >= a.num_blocks) return false;
    }
  }
  for (int64_t t = 0; t < a.num_tokens; ++t) {
    const int32_t s = a.token_sequences[t];
    if (s < 0 || s >= a.num_sequences || a.positions[t] < 0 || a.positions[t] >= a.sequence_lengths[s]) return false;
  }
  return true;
}

int64_t first_visible(const PagedAttentionArgs& a, int64_t pos) {
  return a.sliding_window > 0 ? std::max<int64_t>(0, pos - a.sliding_window + 1) : 0;
}

// Calls fn(j, slot) for the keys first..last (j counts from 0), one block-sized run at a time.
template <typename Fn>
void for_each_slot(const PagedAttentionArgs& a, const int32_t* table, int64_t first, int64_t last, Fn&& fn) {
  int64_t j = 0;
  for (int64_t p = first; p <= last;) {
    const int64_t offset = p % a.block_size;
    const int64_t run = std::min(a.block_size - offset, last - p + 1);
    const int64_t base = static_cast<int64_t>(table[p / a.block_size]) * a.block_size + offset;
    for (int64_t r = 0; r < run; ++r) fn(j++, base + r);
    p += run;
  }
}

// softmax_row with a sink: the sink's exp joins the denominator (and the max), no value.
void softmax_row_with_sink(float* x, int64_t n, float sink) {
  const float max = std::max(sink, *std::max_element(x, x + n));
  float sum = std::exp(sink - max);
  for (int64_t i = 0; i < n; ++i) sum += (x[i] = std::exp(x[i] - max));
  const float inv = 1.0f / sum;
  for (int64_t i = 0; i < n; ++i) x[i] *= inv;
}

}  // namespace

int64_t paged_v_row_units(const PagedAttentionArgs& a) {
  return a.v_row_units > 0 ? a.v_row_units : kv_row_units(a.v_type, a.num_kv_heads * a.head_dim_v);
}

bool is_kv_cache_type(GgmlType type) {
  switch (type) {
    case GgmlType::F16:
    case GgmlType::Q8_0:
    case GgmlType::Q5_1:
    case GgmlType::Q5_0:
    case GgmlType::Q4_1:
    case GgmlType::Q4_0:
    case GgmlType::F8_E4M3: return true;
    default: return false;
  }
}

double kv_bytes_per_value(GgmlType type) {
  if (!is_kv_cache_type(type)) return 0;
  if (type == GgmlType::F8_E4M3) return 1.0;
  const GgmlTypeTraits& t = ggml_type_traits(type);
  return static_cast<double>(t.bytes_per_block) / static_cast<double>(t.block_size);
}

int64_t kv_row_units(GgmlType type, int64_t n) {
  if (n <= 0 || !is_kv_cache_type(type)) return 0;
  if (type == GgmlType::F16) return n;
  if (type == GgmlType::F8_E4M3) return n % 2 == 0 ? n / 2 : 0;  // two bytes per uint16 unit
  const GgmlTypeTraits& t = ggml_type_traits(type);              // 32-value blocks of an even number of bytes
  return n % t.block_size == 0 ? n / t.block_size * static_cast<int64_t>(t.bytes_per_block / 2) : 0;
}

namespace {

// Token t belongs to a run of consecutive positions of one sequence (a prompt or its chunk).
bool is_in_run(const PagedAttentionArgs& a, int64_t t) {
  auto continues = [&](int64_t u) {
    return a.token_sequences[u + 1] == a.token_sequences[u] && a.positions[u + 1] == a.positions[u] + 1;
  };
  return (t > 0 && continues(t - 1)) || (t + 1 < a.num_tokens && continues(t));
}

// Tokens first .. first + count - 1 of a batch as a batch of their own.
PagedAttentionArgs tokens_of(const PagedAttentionArgs& a, int64_t first, int64_t count) {
  PagedAttentionArgs s = a;
  s.q = a.q + first * a.num_heads * a.head_dim;
  s.token_sequences = a.token_sequences + first;
  s.positions = a.positions + first;
  s.output = a.output + first * a.num_heads * a.head_dim_v;
  s.num_tokens = count;
  return s;
}

// A batch of prompt runs beside lone tokens (a prefill chunk scheduled with other sequences'
// decodes): each stretch of lone tokens to the decode kernel, each stretch of runs to the
// prompt kernels. As one batch, every lone token went to the prompt kernels as an item of its
// own, which converts its whole key range into tiles for one token's query heads. False
// (nothing written) for a batch of one kind, or in batch-invariant mode (where a token's
// kernel must not depend on the rest of the batch).
bool attend_mixed_batch(const PagedAttentionArgs& a) {
  if (a.is_batch_invariant || a.num_tokens < 2) return false;
  bool has_lone = false, has_run = false;
  for (int64_t t = 0; t < a.num_tokens; ++t) (is_in_run(a, t) ? has_run : has_lone) = true;
  if (!has_lone || !has_run) return false;
  for (int64_t t = 0; t < a.num_tokens;) {
    const bool run = is_in_run(a, t);
    int64_t end = t + 1;
    while (end < a.num_tokens && is_in_run(a, end) == run) ++end;
    if (!paged_attention(tokens_of(a, t, end - t))) return false;  // valid as a part of a valid batch
    t = end;
  }
  return true;
}

}  // namespace

bool paged_attention(const PagedAttentionArgs& a) {
  if (!valid(a)) return false;
  if (detail::paged_attention_decode(a)) return true;  // one query per sequence run: decode
  if (attend_mixed_batch(a)) return true;              // decodes beside prompt runs: each its kernel
  if (detail::paged_attention_amx(a)) return true;     // the same tiles' products on AMX
  if (detail::paged_attention_tiled(a)) return true;   // key tiles, online softmax, any cache type
  if (a.k_type != GgmlType::F16 || a.v_type != GgmlType::F16) return detail::paged_attention_quant(a, false);
  const int64_t group = a.num_heads / a.num_kv_heads;
  const int64_t k_row = a.num_kv_heads * a.head_dim, v_row = paged_v_row_units(a);
  const int64_t num_pairs = a.num_tokens * a.num_heads;
  double work = 0;
  for (int64_t t = 0; t < a.num_tokens; ++t) work += static_cast<double>(a.positions[t] + 1);
  work *= static_cast<double>(a.num_heads * (a.head_dim + a.head_dim_v));
  const int num_threads = work >= detail::kMinParallelWork ? detail::resolve_threads(a.num_threads) : 1;

  detail::parallel_for_dynamic(num_threads, num_pairs, [&](int64_t pair) {
    const int64_t t = pair / a.num_heads, h = pair % a.num_heads, g = h / group;
    const int32_t* table = a.block_tables + a.token_sequences[t] * a.max_blocks_per_sequence;
    const int64_t pos = a.positions[t];
    const int64_t first = first_visible(a, pos);
    const int64_t count = pos - first + 1;
    thread_local std::vector<float> scores;
    if (scores.size() < static_cast<size_t>(count)) scores.resize(static_cast<size_t>(count));

    const float* q = a.q + (t * a.num_heads + h) * a.head_dim;
    for_each_slot(a, table, first, pos, [&](int64_t j, int64_t slot) {
      float s = simd::dot_f32_f16(q, a.k_cache + slot * k_row + g * a.head_dim, a.head_dim) * a.scale;
      if (a.softcap > 0.0f) s = a.softcap * std::tanh(s / a.softcap);
      scores[static_cast<size_t>(j)] = s;
    });
    if (a.sinks) {
      softmax_row_with_sink(scores.data(), count, a.sinks[h]);
    } else {
      softmax_row(scores.data(), count);
    }

    float* out = a.output + (t * a.num_heads + h) * a.head_dim_v;
    std::fill(out, out + a.head_dim_v, 0.0f);
    for_each_slot(a, table, first, pos, [&](int64_t j, int64_t slot) {
      simd::axpy_f16(scores[static_cast<size_t>(j)], a.v_cache + slot * v_row + g * a.head_dim_v, out, a.head_dim_v);
    });
  });
  return true;
}

bool paged_attention_ref(const PagedAttentionArgs& a) {
  if (!valid(a)) return false;
  if (a.k_type != GgmlType::F16 || a.v_type != GgmlType::F16) return detail::paged_attention_quant(a, true);
  const int64_t group = a.num_heads / a.num_kv_heads;
  const int64_t k_row = a.num_kv_heads * a.head_dim, v_row = paged_v_row_units(a);
  std::vector<double> scores, acc;
  for (int64_t t = 0; t < a.num_tokens; ++t) {
    const int32_t* table = a.block_tables + a.token_sequences[t] * a.max_blocks_per_sequence;
    const auto slot_of = [&](int64_t p) {
      return static_cast<int64_t>(table[p / a.block_size]) * a.block_size + p % a.block_size;
    };
    const int64_t pos = a.positions[t];
    const int64_t first = first_visible(a, pos);
    for (int64_t h = 0; h < a.num_heads; ++h) {
      const int64_t g = h / group;
      const float* q = a.q + (t * a.num_heads + h) * a.head_dim;
      scores.assign(static_cast<size_t>(pos - first + 1), 0.0);
      double max = -INFINITY;
      for (int64_t p = first; p <= pos; ++p) {
        const uint16_t* k = a.k_cache + slot_of(p) * k_row + g * a.head_dim;
        double s = 0;
        for (int64_t i = 0; i < a.head_dim; ++i) s += static_cast<double>(q[i]) * fp16_to_f32(k[i]);
        s *= a.scale;
        if (a.softcap > 0.0f) s = a.softcap * std::tanh(s / a.softcap);
        scores[static_cast<size_t>(p - first)] = s;
        max = std::max(max, s);
      }
      if (a.sinks) max = std::max(max, static_cast<double>(a.sinks[h]));
      double sum = a.sinks ? std::exp(static_cast<double>(a.sinks[h]) - max) : 0.0;
      for (double& s : scores) sum += (s = std::exp(s - max));
      acc.assign(static_cast<size_t>(a.head_dim_v), 0.0);
      for (int64_t p = first; p <= pos; ++p) {
        const uint16_t* v = a.v_cache + slot_of(p) * v_row + g * a.head_dim_v;
        const double w = scores[static_cast<size_t>(p - first)] / sum;
        for (int64_t i = 0; i < a.head_dim_v; ++i) acc[static_cast<size_t>(i)] += w * fp16_to_f32(v[i]);
      }
      float* out = a.output + (t * a.num_heads + h) * a.head_dim_v;
      for (int64_t i = 0; i < a.head_dim_v; ++i) out[i] = static_cast<float>(acc[static_cast<size_t>(i)]);
    }
  }
  return true;
}

OpCost paged_attention_cost(const PagedAttentionArgs& a) {
  OpCost cost;
  if (!valid(a)) return cost;
  for (int64_t t = 0; t < a.num_tokens; ++t) {
    const double visible = static_cast<double>(a.positions[t] - first_visible(a, a.positions[t]) + 1);
    cost.flops +=
        static_cast<double>(a.num_heads) * visible * (2.0 * static_cast<double>(a.head_dim + a.head_dim_v) + 5.0);
    // Keys and values once per KV head, plus the block-table entry of each block visited.
    cost.bytes += static_cast<double>(a.num_kv_heads) * visible *
                  (kv_bytes_per_value(a.k_type) * static_cast<double>(a.head_dim) +
                   kv_bytes_per_value(a.v_type) * static_cast<double>(a.head_dim_v));
    cost.bytes += 4.0 * std::ceil(visible / static_cast<double>(a.block_size));
  }
  cost.bytes += 4.0 * static_cast<double>(a.num_tokens * a.num_heads) * static_cast<double>(a.head_dim + a.head_dim_v);
  return cost;
}

namespace {

bool valid(const WriteKvPagedArgs& a) {
  if (a.k == nullptr || a.slot_mapping == nullptr || a.k_cache == nullptr ||
      (a.has_values && (a.v == nullptr || a.v_cache == nullptr))) {
    return false;
  }
  if (a.num_tokens <= 0 || a.num_slots <= 0 || a.k_row <= 0 || a.v_row <= 0) return false;
  if (a.num_kv_heads <= 0 || a.k_row % a.num_kv_heads != 0 || a.v_row % a.num_kv_heads != 0) return false;
  if (!(a.k_scale > 0.0f && std::isfinite(a.k_scale)) || !(a.v_scale > 0.0f && std::isfinite(a.v_scale))) return false;
  if (kv_row_units(a.k_type, a.k_row) == 0 || kv_row_units(a.v_type, a.v_row) == 0) return false;
  for (int64_t t = 0; t < a.num_tokens; ++t) {
    if (a.slot_mapping[t] >= a.num_slots) return false;
  }
  return true;
}

}  // namespace

bool write_kv_paged(const WriteKvPagedArgs& a) {
  if (!valid(a)) return false;
  if (a.k_type != GgmlType::F16 || a.v_type != GgmlType::F16) return detail::write_kv_paged_quant(a);
  for (int64_t t = 0; t < a.num_tokens; ++t) {
    const int64_t slot = a.slot_mapping[t];
    if (slot < 0) continue;
    simd::f32_to_f16_row(a.k + t * a.k_row, a.k_cache + slot * a.k_row, a.k_row);
    if (a.has_values) simd::f32_to_f16_row(a.v + t * a.v_row, a.v_cache + slot * a.v_row, a.v_row);
  }
  return true;
}

bool write_kv_paged_ref(const WriteKvPagedArgs& a) {
  if (!valid(a)) return false;
  // One rounding rule for the block types: ggml's reference quantizers.
  if (a.k_type != GgmlType::F16 || a.v_type != GgmlType::F16) return detail::write_kv_paged_quant(a);
  for (int64_t t = 0; t < a.num_tokens; ++t) {
    const int64_t slot = a.slot_mapping[t];
    if (slot < 0) continue;
    for (int64_t i = 0; i < a.k_row; ++i) a.k_cache[slot * a.k_row + i] = f32_to_fp16(a.k[t * a.k_row + i]);
    if (!a.has_values) continue;
    for (int64_t i = 0; i < a.v_row; ++i) a.v_cache[slot * a.v_row + i] = f32_to_fp16(a.v[t * a.v_row + i]);
  }
  return true;
}

OpCost write_kv_paged_cost(const WriteKvPagedArgs& a) {
  OpCost cost;
  if (!valid(a)) return cost;
  int64_t num_written = 0;
  for (int64_t t = 0; t < a.num_tokens; ++t) num_written += a.slot_mapping[t] >= 0 ? 1 : 0;
  // Reads f32, writes f16 (or a block type), reads the slot index; the conversion is not counted as flops.
  cost.bytes = static_cast<double>(num_written) *
               ((4.0 + kv_bytes_per_value(a.k_type)) * static_cast<double>(a.k_row) +
                (a.has_values ? (4.0 + kv_bytes_per_value(a.v_type)) * static_cast<double>(a.v_row) : 0.0) + 8.0);
  return cost;
}

}  // namespace iwb
