// Attention over an f16 KV cache. Each (query token, head) pair is independent: the fast path
// gives pairs to OpenMP threads, scores the visible keys into a per-thread buffer, applies the
// softmax and accumulates the values in f32. The reference does the same in double.
#include "iwb/kernels/attention.h"

#include "iwb/kernels/dequantize.h"
#include "iwb/kernels/softmax.h"
#include "parallel.h"
#include "simd.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace iwb {
namespace {

bool valid(const AttentionArgs& a) {
  if (a.q == nullptr || a.k == nullptr || a.v == nullptr || a.positions == nullptr || a.output == nullptr) return false;
  if (a.num_tokens <= 0 || a.num_heads <= 0 || a.num_kv_heads <= 0 || a.head_dim <= 0 || a.head_dim_v <= 0)
    return false;
  if (a.num_heads % a.num_kv_heads != 0 || a.num_kv <= 0 || a.sliding_window < 0) return false;
  if (a.k_row_stride < a.num_kv_heads * a.head_dim || a.v_row_stride < a.num_kv_heads * a.head_dim_v) return false;
  for (int64_t t = 0; t < a.num_tokens; ++t) {
    if (a.positions[t] < 0 || a.positions[t] >= a.num_kv) return false;
  }
  return true;
}

// The keys query position `pos` may see: [first, pos].
int64_t first_visible(const AttentionArgs& a, int64_t pos) {
  return a.sliding_window > 0 ? std::max<int64_t>(0, pos - a.sliding_window + 1) : 0;
}

}  // namespace

bool attention(const AttentionArgs& a) {
  if (!valid(a)) return false;
  const int64_t group = a.num_heads / a.num_kv_heads;
  const int64_t num_pairs = a.num_tokens * a.num_heads;
  const int64_t work = num_pairs * a.num_kv * (a.head_dim + a.head_dim_v);
  const int num_threads = work >= detail::kMinParallelWork ? detail::resolve_threads(a.num_threads) : 1;

  detail::parallel_for_dynamic(num_threads, num_pairs, [&](int64_t pair) {
    const int64_t t = pair / a.num_heads, h = pair % a.num_heads, g = h / group;
    const int64_t pos = a.positions[t];
    const int64_t first = first_visible(a, pos);
    const int64_t count = pos - first + 1;
    thread_local std::vector<float> scores;
    if (scores.size() < static_cast<size_t>(count)) scores.resize(static_cast<size_t>(count));

    const float* q = a.q + (t * a.num_heads + h) * a.head_dim;
    for (int64_t j = 0; j < count; ++j) {
      const uint16_t* k = a.k + (first + j) * a.k_row_stride + g * a.head_dim;
      float s = simd::dot_f32_f16(q, k, a.head_dim) * a.scale;
      if (a.softcap > 0.0f) s = a.softcap * std::tanh(s / a.softcap);
      scores[j] = s;
    }
    softmax_row(scores.data(), count);

    float* out = a.output + (t * a.num_heads + h) * a.head_dim_v;
    std::fill(out, out + a.head_dim_v, 0.0f);
    for (int64_t j = 0; j < count; ++j) {
      simd::axpy_f16(scores[j], a.v + (first + j) * a.v_row_stride + g * a.head_dim_v, out, a.head_dim_v);
    }
  });
  return true;
}

bool attention_ref(const AttentionArgs& a) {
  if (!valid(a)) return false;
  const int64_t group = a.num_heads / a.num_kv_heads;
  std::vector<double> scores, acc;
  for (int64_t t = 0; t < a.num_tokens; ++t) {
    const int64_t pos = a.positions[t];
    const int64_t first = first_visible(a, pos);
    for (int64_t h = 0; h < a.num_heads; ++h) {
      const int64_t g = h / group;
      const float* q = a.q + (t * a.num_heads + h) * a.head_dim;
      scores.assign(static_cast<size_t>(pos - first + 1), 0.0);
      double max = -INFINITY;
      for (int64_t p = first; p <= pos; ++p) {
        const uint16_t* k = a.k + p * a.k_row_stride + g * a.head_dim;
        double s = 0;
        for (int64_t i = 0; i < a.head_dim; ++i) s += static_cast<double>(q[i]) * fp16_to_f32(k[i]);
        s *= a.scale;
        if (a.softcap > 0.0f) s = a.softcap * std::tanh(s / a.softcap);
        scores[p - first] = s;
        max = std::max(max, s);
      }
      double sum = 0;
      for (double& s : scores) sum += (s = std::exp(s - max));
      acc.assign(static_cast<size_t>(a.head_dim_v), 0.0);
      for (int64_t p = first; p <= pos; ++p) {
        const uint16_t* v = a.v + p * a.v_row_stride + g * a.head_dim_v;
        for (int64_t i = 0; i < a.head_dim_v; ++i) acc[i] += scores[p - first] / sum * fp16_to_f32(v[i]);
      }
      float* out = a.output + (t * a.num_heads + h) * a.head_dim_v;
      for (int64_t i = 0; i < a.head_dim_v; ++i) out[i] = static_cast<float>(acc[i]);
    }
  }
  return true;
}

OpCost attention_cost(const AttentionArgs& a) {
  OpCost cost;
  if (!valid(a)) return cost;
  const int64_t group = a.num_heads / a.num_kv_heads;
  for (int64_t t = 0; t < a.num_tokens; ++t) {
    const double visible = static_cast<double>(a.positions[t] - first_visible(a, a.positions[t]) + 1);
    // Per head: q.k and p*v multiply-adds plus ~5 softmax operations per score.
    cost.flops += static_cast<double>(a.num_heads) * visible * (2.0 * (a.head_dim + a.head_dim_v) + 5.0);
    // Keys and values are read once per KV head (the heads of a group share them in cache).
    cost.bytes += static_cast<double>(a.num_heads / group) * visible * 2.0 * (a.head_dim + a.head_dim_v);
  }
  cost.bytes += 4.0 * static_cast<double>(a.num_tokens * a.num_heads) * static_cast<double>(a.head_dim + a.head_dim_v);
  return cost;
}

}  // namespace iwb
