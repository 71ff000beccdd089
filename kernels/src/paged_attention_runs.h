// The prompt kernels' work plan (private to kernels/src), shared by the tiled kernels
// (paged_attention_tiles_driver.h) and the AMX kernel (paged_attention_amx.cpp): a batch's runs
// of consecutive positions of one sequence, cut every max_run tokens, one item per (run, KV
// head); and the threads the batch's work is worth.
#pragma once

#include "iwb/kernels/paged_attention.h"
#include "parallel.h"

#include <algorithm>
#include <cstdint>
#include <vector>

namespace iwb::detail {

struct PromptItem {
  int64_t first_token;
  int64_t num_tokens;
  int64_t kv_head;
};

// The batch's items, in token order (items is cleared first).
inline void prompt_items(const PagedAttentionArgs& a, int64_t max_run, std::vector<PromptItem>& items) {
  items.clear();
  for (int64_t t = 0; t < a.num_tokens;) {
    int64_t n = 1;
    while (t + n < a.num_tokens && n < max_run && a.token_sequences[t + n] == a.token_sequences[t] &&
           a.positions[t + n] == a.positions[t] + n) {
      ++n;
    }
    for (int64_t g = 0; g < a.num_kv_heads; ++g) items.push_back({t, n, g});
    t += n;
  }
}

// What an item's loop needs of its run: the sequence's block table, the run's first and last
// positions, the first key any of them sees (a sliding window's start), and the rotations of a
// quantized cache's keys and values (0: none).
struct PromptRun {
  const int32_t* table;
  int64_t first_pos, last_pos, k_begin, rot_k, rot_v;
};

inline PromptRun prompt_run(const PagedAttentionArgs& a, const PromptItem& w) {
  PromptRun r;
  r.table = a.block_tables + a.token_sequences[w.first_token] * a.max_blocks_per_sequence;
  r.first_pos = a.positions[w.first_token];
  r.last_pos = r.first_pos + w.num_tokens - 1;
  r.k_begin = a.sliding_window > 0 ? std::max<int64_t>(0, r.first_pos - a.sliding_window + 1) : 0;
  r.rot_k = a.is_rotated ? kv_rotation_size(a.k_type, a.head_dim, true) : 0;
  r.rot_v = a.is_rotated ? kv_rotation_size(a.v_type, a.head_dim_v, false) : 0;
  return r;
}

// args.num_threads (or the default), or 1 when the batch's work (visible keys x head sizes over
// all its query heads) is below kMinParallelWork.
inline int prompt_threads(const PagedAttentionArgs& a) {
  double work = 0;
  for (int64_t t = 0; t < a.num_tokens; ++t) work += static_cast<double>(a.positions[t] + 1);
  work *= static_cast<double>(a.num_heads * (a.head_dim + a.head_dim_v));
  return work >= kMinParallelWork ? resolve_threads(a.num_threads) : 1;
}

}  // namespace iwb::detail
