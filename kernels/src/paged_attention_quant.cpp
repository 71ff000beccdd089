// Quantized KV cache: keys and values stored per head row as f16 or as 32-value blocks (Q8_0,
// Q5_1, Q5_0, Q4_1, Q4_0), each side its own type, a quantized side Hadamard-rotated first (see
// paged_attention_quant.h). A quantized row is expanded to f32 once per (query token, KV head)
// and meets every query head of the group in f32: the query is never rounded (llama.cpp rounds
// it to the key type's dot-product partner, e.g. 8 bits for Q8_0), and the softmax and the
// weighted value sum stay in f32 (the reference: double).
#include "paged_attention_quant.h"

#include "dequantize_rows.h"
#include "iwb/kernels/dequantize.h"
#include "iwb/kernels/quant_blocks.h"
#include "iwb/kernels/quantize.h"
#include "parallel.h"
#include "simd.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <vector>

namespace iwb::detail {
namespace {

// The 256 values of an FP8 E4M3 byte (0x7F and 0xFF, NaN, are never written: read as 448).
struct E4m3Table {
  float value[256];
  E4m3Table() {
    for (int b = 0; b < 256; ++b) {
      const int e = (b >> 3) & 15, m = b & 7;
      const float magnitude =
          e == 0 ? std::ldexp(static_cast<float>(m), -9) : std::ldexp(1.0f + static_cast<float>(m) / 8.0f, e - 7);
      value[b] = (b & 0x80 ? -1.0f : 1.0f) * ((b & 0x7F) == 0x7F ? 448.0f : magnitude);
    }
  }
};
const E4m3Table kE4m3;

}  // namespace

void expand_kv_row(GgmlType type, const uint16_t* src, float* dst, int64_t n, float fp8_scale) {
  const int64_t num_blocks = n / 32;
  if (type == GgmlType::F8_E4M3) {
    const auto* bytes = reinterpret_cast<const uint8_t*>(src);
    for (int64_t i = 0; i < n; ++i) dst[i] = kE4m3.value[bytes[i]] * fp8_scale;
    return;
  }
  switch (type) {
    case GgmlType::Q8_0: dequantize_q8_0(reinterpret_cast<const BlockQ8_0*>(src), dst, num_blocks); return;
    case GgmlType::Q5_1: dequantize_q5_1(reinterpret_cast<const BlockQ5_1*>(src), dst, num_blocks); return;
    case GgmlType::Q5_0: dequantize_q5_0(reinterpret_cast<const BlockQ5_0*>(src), dst, num_blocks); return;
    case GgmlType::Q4_1: dequantize_q4_1(reinterpret_cast<const BlockQ4_1*>(src), dst, num_blocks); return;
    case GgmlType::Q4_0: dequantize_q4_0(reinterpret_cast<const BlockQ4_0*>(src), dst, num_blocks); return;
    default: dequantize_f16(src, dst, n); return;
  }
}

}  // namespace iwb::detail

namespace iwb {

int64_t kv_rotation_size(GgmlType type, int64_t head_dim, bool is_key) {
  // FP8 keeps an exponent per value: a large channel costs its neighbours nothing.
  if (type == GgmlType::F16 || type == GgmlType::F8_E4M3 || !is_kv_cache_type(type) || head_dim % 32 != 0) return 0;
  // Values: pieces of 64 (llama.cpp found smaller rotations better for V); keys: the largest
  // power of two dividing the head size.
  if (!is_key) return head_dim % 64 == 0 ? 64 : 32;
  int64_t size = 32;
  while (head_dim % (size * 2) == 0) size *= 2;
  return size;
}

}  // namespace iwb

namespace iwb::detail {

namespace {

template <typename T>
void rotate(T* x, int64_t n, int64_t size) {
  const T norm = T(1) / std::sqrt(static_cast<T>(size));
  for (T* y = x; y < x + n; y += size) {
    for (int64_t h = 1; h < size; h *= 2) {
      for (int64_t i = 0; i < size; i += 2 * h) {
        for (int64_t j = i; j < i + h; ++j) {
          const T a = y[j], b = y[j + h];
          y[j] = a + b;
          y[j + h] = a - b;
        }
      }
    }
    for (int64_t j = 0; j < size; ++j) y[j] *= norm;
  }
}

}  // namespace

void hadamard_rotate(float* x, int64_t n, int64_t size) { rotate(x, n, size); }
void hadamard_rotate(double* x, int64_t n, int64_t size) { rotate(x, n, size); }

namespace {

template <typename Acc>
Acc dot(const float* q, const float* k, int64_t n) {
  if constexpr (sizeof(Acc) == sizeof(float)) {
    return simd::dot_f32(q, k, n);
  } else {
    Acc s = 0;
    for (int64_t i = 0; i < n; ++i) s += static_cast<Acc>(q[i]) * static_cast<Acc>(k[i]);
    return s;
  }
}

template <typename Acc>
struct Scratch {
  std::vector<Acc> scores;  // [group x visible keys]
  std::vector<Acc> acc;     // [group x head_dim_v]
  std::vector<float> row;   // one expanded key or value row
  std::vector<float> q;     // [group x head_dim] the group's queries, rotated like the keys
};

// Attention of one query token over one KV head, for the `group` query heads that share it.
// Acc is float (fast) or double (reference).
template <typename Acc>
void attend_group(const PagedAttentionArgs& a, int64_t t, int64_t g, bool is_reference, Scratch<Acc>& s) {
  const int64_t group = a.num_heads / a.num_kv_heads;
  const int64_t k_units = kv_row_units(a.k_type, a.num_kv_heads * a.head_dim);
  const int64_t v_units = paged_v_row_units(a);
  const int64_t k_head = kv_row_units(a.k_type, a.head_dim), v_head = kv_row_units(a.v_type, a.head_dim_v);
  const int32_t* table = a.block_tables + a.token_sequences[t] * a.max_blocks_per_sequence;
  auto slot_of = [&](int64_t p) {
    return static_cast<int64_t>(table[p / a.block_size]) * a.block_size + p % a.block_size;
  };
  const int64_t pos = a.positions[t];
  const int64_t first = a.sliding_window > 0 ? std::max<int64_t>(0, pos - a.sliding_window + 1) : 0;
  const int64_t count = pos - first + 1;
  const bool is_f16_k = a.k_type == GgmlType::F16 && !is_reference;
  const bool is_f16_v = a.v_type == GgmlType::F16 && !is_reference;
  s.scores.assign(static_cast<size_t>(group * count), 0);
  s.row.resize(static_cast<size_t>(std::max(a.head_dim, a.head_dim_v)));
  const float* q0 = a.q + (t * a.num_heads + g * group) * a.head_dim;
  if (const int64_t rot = a.is_rotated ? kv_rotation_size(a.k_type, a.head_dim, true) : 0; rot > 0) {
    s.q.assign(q0, q0 + group * a.head_dim);
    hadamard_rotate(s.q.data(), group * a.head_dim, rot);
    q0 = s.q.data();
  }

  for (int64_t p = first; p <= pos; ++p) {
    const uint16_t* k = a.k_cache + slot_of(p) * k_units + g * k_head;
    if (!is_f16_k) expand_kv_row(a.k_type, k, s.row.data(), a.head_dim, a.k_scale);
    for (int64_t j = 0; j < group; ++j) {
      const float* q = q0 + j * a.head_dim;
      Acc x = is_f16_k ? static_cast<Acc>(simd::dot_f32_f16(q, k, a.head_dim)) : dot<Acc>(q, s.row.data(), a.head_dim);
      x *= static_cast<Acc>(a.scale);
      if (a.softcap > 0.0f) x = static_cast<Acc>(a.softcap) * std::tanh(x / static_cast<Acc>(a.softcap));
      s.scores[static_cast<size_t>(j * count + p - first)] = x;
    }
  }
  for (int64_t j = 0; j < group; ++j) {
    Acc* row = s.scores.data() + j * count;
    // A sink (gpt-oss) joins the max and the denominator, with no value.
    const Acc sink = a.sinks ? static_cast<Acc>(a.sinks[g * group + j]) : static_cast<Acc>(-INFINITY);
    const Acc max = std::max(sink, *std::max_element(row, row + count));
    Acc sum = a.sinks ? std::exp(sink - max) : 0;
    for (int64_t i = 0; i < count; ++i) sum += (row[i] = std::exp(row[i] - max));
    for (int64_t i = 0; i < count; ++i) row[i] /= sum;
  }

  s.acc.assign(static_cast<size_t>(group * a.head_dim_v), 0);
  for (int64_t p = first; p <= pos; ++p) {
    const uint16_t* v = a.v_cache + slot_of(p) * v_units + g * v_head;
    if (!is_f16_v) expand_kv_row(a.v_type, v, s.row.data(), a.head_dim_v, a.v_scale);
    for (int64_t j = 0; j < group; ++j) {
      const Acc w = s.scores[static_cast<size_t>(j * count + p - first)];
      Acc* out = s.acc.data() + j * a.head_dim_v;
      if constexpr (sizeof(Acc) == sizeof(float)) {
        if (is_f16_v) {
          simd::axpy_f16(w, v, out, a.head_dim_v);
          continue;
        }
      }
      const float* x = s.row.data();
      for (int64_t i = 0; i < a.head_dim_v; ++i) out[i] += w * static_cast<Acc>(x[i]);
    }
  }
  if (const int64_t rot = a.is_rotated ? kv_rotation_size(a.v_type, a.head_dim_v, false) : 0; rot > 0) {
    hadamard_rotate(s.acc.data(), group * a.head_dim_v, rot);  // back from the values' rotation
  }
  float* out = a.output + (t * a.num_heads + g * group) * a.head_dim_v;
  for (int64_t i = 0; i < group * a.head_dim_v; ++i) out[i] = static_cast<float>(s.acc[static_cast<size_t>(i)]);
}

// Largest |x| a cache type stores (f16's own range for F16; FP8 saturates, any finite value).
float max_abs_input(GgmlType type) {
  if (type == GgmlType::F8_E4M3) return std::numeric_limits<float>::max();
  return type == GgmlType::F16 ? 65504.0f : quantize_max_abs_input(type);
}

bool rows_convert(const float* x, int64_t n, GgmlType type) {
  const float limit = max_abs_input(type);
  for (int64_t i = 0; i < n; ++i) {
    if (!(std::fabs(x[i]) <= limit)) return false;  // also NaN
  }
  return true;
}

// One slot's row of n values (heads of head_dim) as `type` stores it: f16, or rotated then
// quantized (`rotated` is scratch of n floats); FP8 divides by its scale first (vLLM's
// x / k_scale, a division as vLLM's kernels do, so the GPU twin rounds alike).
bool store_row(GgmlType type, const float* src, int64_t n, int64_t rot, std::vector<float>& rotated, uint16_t* dst,
               bool is_checked, float fp8_scale) {
  if (type == GgmlType::F16) {
    if (is_checked && !rows_convert(src, n, type)) return false;
    if (dst != nullptr) simd::f32_to_f16_row(src, dst, n);
    return true;
  }
  rotated.assign(src, src + n);
  // Rotation pieces and 32-value blocks fall within heads (head sizes are multiples of 32), so
  // the slot's whole row is rotated and quantized at once.
  if (rot > 0) hadamard_rotate(rotated.data(), n, rot);
  if (is_checked && !rows_convert(rotated.data(), n, type)) return false;
  if (dst == nullptr) return true;
  if (type == GgmlType::F8_E4M3) {
    auto* bytes = reinterpret_cast<uint8_t*>(dst);
    for (int64_t i = 0; i < n; ++i) bytes[i] = f32_to_e4m3(rotated[static_cast<size_t>(i)] / fp8_scale);
  } else {
    quantize_row_ref(type, rotated.data(), dst, n, nullptr);
  }
  return true;
}

}  // namespace

bool paged_attention_quant(const PagedAttentionArgs& a, bool is_reference) {
  const int64_t num_pairs = a.num_tokens * a.num_kv_heads;
  if (is_reference) {
    Scratch<double> s;
    for (int64_t pair = 0; pair < num_pairs; ++pair)
      attend_group<double>(a, pair / a.num_kv_heads, pair % a.num_kv_heads, true, s);
    return true;
  }
  double work = 0;
  for (int64_t t = 0; t < a.num_tokens; ++t) work += static_cast<double>(a.positions[t] + 1);
  work *= static_cast<double>(a.num_heads * (a.head_dim + a.head_dim_v));
  const int num_threads = work >= kMinParallelWork ? resolve_threads(a.num_threads) : 1;
  std::atomic<int64_t> next_pair{0};
  parallel_region(num_threads, [&](int, int) {
    Scratch<float> s;
    for (int64_t pair = next_pair.fetch_add(1, std::memory_order_relaxed); pair < num_pairs;
         pair = next_pair.fetch_add(1, std::memory_order_relaxed)) {
      attend_group<float>(a, pair / a.num_kv_heads, pair % a.num_kv_heads, false, s);
    }
  });
  return true;
}

bool write_kv_paged_quant(const WriteKvPagedArgs& a) {
  const int64_t k_units = kv_row_units(a.k_type, a.k_row), v_units = kv_row_units(a.v_type, a.v_row);
  const int64_t rot_k = a.is_rotated ? kv_rotation_size(a.k_type, a.k_row / a.num_kv_heads, true) : 0;
  const int64_t rot_v = a.is_rotated ? kv_rotation_size(a.v_type, a.v_row / a.num_kv_heads, false) : 0;
  std::vector<float> rotated;
  // Check every row converts before writing any (an inf or NaN has no quantized form).
  for (int64_t t = 0; t < a.num_tokens; ++t) {
    if (a.slot_mapping[t] < 0) continue;
    if (!store_row(a.k_type, a.k + t * a.k_row, a.k_row, rot_k, rotated, nullptr, true, a.k_scale) ||
        (a.has_values && !store_row(a.v_type, a.v + t * a.v_row, a.v_row, rot_v, rotated, nullptr, true, a.v_scale))) {
      return false;
    }
  }
  for (int64_t t = 0; t < a.num_tokens; ++t) {
    const int64_t slot = a.slot_mapping[t];
    if (slot < 0) continue;
    store_row(a.k_type, a.k + t * a.k_row, a.k_row, rot_k, rotated, a.k_cache + slot * k_units, false, a.k_scale);
    if (a.has_values) {
      store_row(a.v_type, a.v + t * a.v_row, a.v_row, rot_v, rotated, a.v_cache + slot * v_units, false, a.v_scale);
    }
  }
  return true;
}

}  // namespace iwb::detail

namespace iwb {

uint8_t f32_to_e4m3(float x) {
  const uint8_t sign = std::signbit(x) ? 0x80 : 0;
  const float a = std::min(std::fabs(x), 448.0f);
  if (!(a >= 0.0f)) return 0x7E | sign;  // NaN: not written (refused before), saturate anyway
  if (a < 0.015625f) {  // below the smallest normal 2^-6: multiples of 2^-9 (8 rounds up to 2^-6, code 8)
    return static_cast<uint8_t>(sign | static_cast<int>(std::nearbyint(std::ldexp(a, 9))));
  }
  int e2 = 0;
  const float f = std::frexp(a, &e2);                                  // a = f * 2^e2, f in [0.5, 1)
  int m = static_cast<int>(std::nearbyint((f * 2.0f - 1.0f) * 8.0f));  // ties to even
  int e = e2 - 1 + 7;
  if (m == 8) m = 0, ++e;
  const int code = std::min((e << 3) | m, 0x7E);  // 448 at most
  return static_cast<uint8_t>(sign | code);
}

float e4m3_to_f32(uint8_t b) { return detail::kE4m3.value[b]; }

float kv_calibrated_scale(const float* x, int64_t n, float constant) {
  float amax = 0.0f;
  for (int64_t i = 0; i < n; ++i) amax = std::max(amax, std::fabs(x[i]));  // a NaN is skipped
  const float scale = amax / constant;
  return scale > 0.0f && std::isfinite(scale) ? scale : 1.0f;
}

}  // namespace iwb
