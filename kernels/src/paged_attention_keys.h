// What the AVX-512 attention kernels (paged_attention_tiles.cpp, paged_attention_decode.cpp)
// share (private to kernels/src): the slots of a run of keys through the block table, software
// prefetch of one KV head's rows, and a query row in and an output row out.
#pragma once

#include "dequantize_avx2.h"
#include "iwb/kernels/paged_attention.h"
#include "paged_attention_quant.h"

#include <algorithm>
#include <cstdint>
#include <cstdlib>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace iwb::detail {

// The cache slots of keys first .. first + n - 1 of a sequence, through its block table.
inline void slots_of(const PagedAttentionArgs& a, const int32_t* table, int64_t first, int64_t n, int64_t* slots) {
  for (int64_t j = 0; j < n;) {
    const int64_t p = first + j, offset = p % a.block_size;
    const int64_t run = std::min(a.block_size - offset, n - j);
    const int64_t base = static_cast<int64_t>(table[p / a.block_size]) * a.block_size + offset;
    for (int64_t r = 0; r < run; ++r) slots[j + r] = base + r;
    j += run;
  }
}

// How many keys ahead of the ones being read their head's K and V rows are prefetched. One
// KV head's row is a few hundred bytes of a slot that holds every head's, and a cache block
// ends every block_size keys, so the hardware's stream prefetchers (which stop at 4 KiB pages)
// fetch little of it ahead. IWB_ATTENTION_PREFETCH sets it (0: none); otherwise each kernel's
// own default (`fallback`).
inline int64_t attention_prefetch_keys(int64_t fallback) {
  static const int64_t kKeys = [] {
    const char* v = std::getenv("IWB_ATTENTION_PREFETCH");
    return v != nullptr && std::atoi(v) >= 0 ? static_cast<int64_t>(std::atoi(v)) : int64_t{-1};
  }();
  return kKeys >= 0 ? kKeys : fallback;
}

// Prefetches the lines the `bytes` bytes at p touch (a head's row), into L1 (kL2: into L2).
// Always inlined: GCC judges a function made of prefetches free of effects and drops calls to
// it that it has not inlined yet (the decode kernel's were gone).
template <bool kL2 = false>
__attribute__((always_inline)) inline void prefetch_row(const void* p, int64_t bytes) {
#if defined(__x86_64__) || defined(__i386__)
  const auto begin = reinterpret_cast<uintptr_t>(p);
  for (uintptr_t line = begin & ~uintptr_t{63}; line < begin + static_cast<uintptr_t>(bytes); line += 64) {
    _mm_prefetch(reinterpret_cast<const char*>(line), kL2 ? _MM_HINT_T1 : _MM_HINT_T0);
  }
#else
  (void)p;
  (void)bytes;
#endif
}

// A cache row of n values (one KV head's keys or values) as f32, for the attention kernels
// (which run on CPUs with AVX2): the AVX2 conversions for F16, Q8_0 and Q4_0 (the same values
// as expand_kv_row's scalar loops: d * q and d * (q - 8) rounded once), expand_kv_row for the
// other types. (Q8_0 cache, bench_paged_attention --tokens 512 at depth 8192, AMX kernel:
// 133 -> 103 ms a pass; Q4_0 129 -> 101; F16 95.)
inline void cache_row_to_f32(GgmlType type, const uint16_t* src, float* dst, int64_t n, float fp8_scale) {
#if defined(__x86_64__) || defined(__i386__)
  switch (type) {
    case GgmlType::F16: dequantize_f16_avx2(src, dst, n); return;
    case GgmlType::Q8_0: dequantize_q8_0_avx2(reinterpret_cast<const BlockQ8_0*>(src), dst, n / 32); return;
    case GgmlType::Q4_0: dequantize_q4_0_avx2(reinterpret_cast<const BlockQ4_0*>(src), dst, n / 32); return;
    default: break;
  }
#endif
  expand_kv_row(type, src, dst, n, fp8_scale);
}

// Query head h of token t times the attention scale into dst, rotated when the keys are stored
// rotated (rot_k > 0: then (Hq).(Hk) = q.k).
inline void prepare_query(const PagedAttentionArgs& a, int64_t t, int64_t h, int64_t rot_k, float* dst) {
  const float* q = a.q + (t * a.num_heads + h) * a.head_dim;
  for (int64_t d = 0; d < a.head_dim; ++d) dst[d] = q[d] * a.scale;
  if (rot_k > 0) hadamard_rotate(dst, a.head_dim, rot_k);
}

// The output of token t, head h: o / l, rotated back when the values are stored rotated
// (rot_v > 0). o may be that output row itself.
inline void write_output(const PagedAttentionArgs& a, int64_t t, int64_t h, const float* o, float l, int64_t rot_v) {
  float* out = a.output + (t * a.num_heads + h) * a.head_dim_v;
  const float inv = 1.0f / l;
  for (int64_t d = 0; d < a.head_dim_v; ++d) out[d] = o[d] * inv;
  if (rot_v > 0) hadamard_rotate(out, a.head_dim_v, rot_v);
}

}  // namespace iwb::detail
