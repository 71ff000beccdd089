// 8-bit KV cache: keys and values stored as Q8_0 blocks per head row. Scores take the dot
// product straight from the int8 values (q . k = sum over blocks of d * sum(q_i * qs_i)), and
// the weighted value sum adds w * d * qs, so nothing is dequantized into a buffer.
#include "paged_attention_q8.h"

#include "iwb/kernels/dequantize.h"
#include "iwb/kernels/quant_blocks.h"
#include "iwb/kernels/quantize.h"
#include "iwb/kernels/softmax.h"
#include "parallel.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace iwb::detail {
namespace {

const BlockQ8_0* blocks_at(const uint16_t* base, int64_t units) {
  return reinterpret_cast<const BlockQ8_0*>(base + units);
}

template <typename Acc>
Acc dot_q8(const float* q, const BlockQ8_0* k, int64_t n) {
  Acc total = 0;
  for (int64_t b = 0; b < n / 32; ++b) {
    Acc s = 0;
    for (int i = 0; i < 32; ++i) s += static_cast<Acc>(q[b * 32 + i]) * k[b].qs[i];
    total += s * static_cast<Acc>(fp16_to_f32(k[b].d));
  }
  return total;
}

template <typename Acc>
void axpy_q8(Acc w, const BlockQ8_0* v, Acc* out, int64_t n) {
  for (int64_t b = 0; b < n / 32; ++b) {
    const Acc scale = w * static_cast<Acc>(fp16_to_f32(v[b].d));
    for (int i = 0; i < 32; ++i) out[b * 32 + i] += scale * v[b].qs[i];
  }
}

// Attention of one (token, head) pair; Acc is float (fast) or double (reference).
template <typename Acc>
void attend(const PagedAttentionArgs& a, int64_t t, int64_t h, std::vector<Acc>& scores, std::vector<Acc>& acc) {
  const int64_t group = a.num_heads / a.num_kv_heads, g = h / group;
  const int64_t k_units = kv_row_units(GgmlType::Q8_0, a.num_kv_heads * a.head_dim);
  const int64_t v_units = kv_row_units(GgmlType::Q8_0, a.num_kv_heads * a.head_dim_v);
  const int64_t k_head = kv_row_units(GgmlType::Q8_0, a.head_dim), v_head = kv_row_units(GgmlType::Q8_0, a.head_dim_v);
  const int32_t* table = a.block_tables + a.token_sequences[t] * a.max_blocks_per_sequence;
  auto slot_of = [&](int64_t p) {
    return static_cast<int64_t>(table[p / a.block_size]) * a.block_size + p % a.block_size;
  };
  const int64_t pos = a.positions[t];
  const int64_t first = a.sliding_window > 0 ? std::max<int64_t>(0, pos - a.sliding_window + 1) : 0;
  const float* q = a.q + (t * a.num_heads + h) * a.head_dim;
  scores.assign(static_cast<size_t>(pos - first + 1), 0);
  Acc max = -INFINITY;
  for (int64_t p = first; p <= pos; ++p) {
    Acc s =
        dot_q8<Acc>(q, blocks_at(a.k_cache, slot_of(p) * k_units + g * k_head), a.head_dim) * static_cast<Acc>(a.scale);
    if (a.softcap > 0.0f) s = static_cast<Acc>(a.softcap) * std::tanh(s / static_cast<Acc>(a.softcap));
    scores[static_cast<size_t>(p - first)] = s;
    max = std::max(max, s);
  }
  Acc sum = 0;
  for (Acc& s : scores) sum += (s = std::exp(s - max));
  acc.assign(static_cast<size_t>(a.head_dim_v), 0);
  for (int64_t p = first; p <= pos; ++p) {
    axpy_q8<Acc>(scores[static_cast<size_t>(p - first)] / sum, blocks_at(a.v_cache, slot_of(p) * v_units + g * v_head),
                 acc.data(), a.head_dim_v);
  }
  float* out = a.output + (t * a.num_heads + h) * a.head_dim_v;
  for (int64_t i = 0; i < a.head_dim_v; ++i) out[i] = static_cast<float>(acc[static_cast<size_t>(i)]);
}

}  // namespace

bool paged_attention_q8(const PagedAttentionArgs& a, bool is_reference) {
  const int64_t num_pairs = a.num_tokens * a.num_heads;
  if (is_reference) {
    std::vector<double> scores, acc;
    for (int64_t pair = 0; pair < num_pairs; ++pair)
      attend<double>(a, pair / a.num_heads, pair % a.num_heads, scores, acc);
    return true;
  }
  double work = 0;
  for (int64_t t = 0; t < a.num_tokens; ++t) work += static_cast<double>(a.positions[t] + 1);
  work *= static_cast<double>(a.num_heads * (a.head_dim + a.head_dim_v));
  const int num_threads = work >= kMinParallelWork ? resolve_threads(a.num_threads) : 1;
  std::atomic<int64_t> next_pair{0};
  parallel_region(num_threads, [&](int, int) {
    std::vector<float> scores, acc;
    for (int64_t pair = next_pair.fetch_add(1, std::memory_order_relaxed); pair < num_pairs;
         pair = next_pair.fetch_add(1, std::memory_order_relaxed)) {
      attend<float>(a, pair / a.num_heads, pair % a.num_heads, scores, acc);
    }
  });
  return true;
}

bool write_kv_paged_q8(const WriteKvPagedArgs& a) {
  const int64_t k_units = kv_row_units(GgmlType::Q8_0, a.k_row), v_units = kv_row_units(GgmlType::Q8_0, a.v_row);
  // Check every row converts before writing any (an inf or NaN has no Q8_0 form).
  for (int64_t t = 0; t < a.num_tokens; ++t) {
    if (a.slot_mapping[t] < 0) continue;
    for (const float* row : {a.k + t * a.k_row, a.v + t * a.v_row}) {
      const int64_t n = row == a.k + t * a.k_row ? a.k_row : a.v_row;
      for (int64_t i = 0; i < n; ++i) {
        if (!std::isfinite(row[i]) || std::abs(row[i]) > quantize_max_abs_input(GgmlType::Q8_0)) return false;
      }
    }
  }
  for (int64_t t = 0; t < a.num_tokens; ++t) {
    const int64_t slot = a.slot_mapping[t];
    if (slot < 0) continue;
    // Block boundaries fall on head boundaries (head sizes are multiples of 32), so the slot's
    // whole row is quantized at once.
    quantize_row_q8_0_ref(a.k + t * a.k_row, reinterpret_cast<BlockQ8_0*>(a.k_cache + slot * k_units), a.k_row);
    quantize_row_q8_0_ref(a.v + t * a.v_row, reinterpret_cast<BlockQ8_0*>(a.v_cache + slot * v_units), a.v_row);
  }
  return true;
}

}  // namespace iwb::detail
