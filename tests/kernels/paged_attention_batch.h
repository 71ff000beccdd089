// Test helper: a batch of sequences over a randomly filled paged KV cache (F16 or Q8_0) in
// scattered blocks, and the PagedAttentionArgs of the CPU reference for it. Shared by the GPU
// and the emulated paged attention tests.
#pragma once

#include "random_tensors.h"

#include "iwb/kernels/dequantize.h"
#include "iwb/kernels/paged_attention.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

namespace iwb::test {

// One sequence of the batch: its length after the step and how many queries (its last ones) run.
struct SequenceSpec {
  int32_t length;
  int32_t num_queries;
};

// Host data of one batch over a randomly filled, randomly permuted block pool.
struct Batch {
  int64_t num_heads = 0, num_kv_heads = 0, head_dim = 0, block_size = 0, num_blocks = 0, max_blocks = 0;
  GgmlType kv_type = GgmlType::F16;
  std::vector<uint16_t> k_cache, v_cache;
  std::vector<int32_t> block_tables, lengths, token_sequences, positions;
  std::vector<float> q;

  int64_t num_tokens() const { return static_cast<int64_t>(positions.size()); }
  int64_t num_sequences() const { return static_cast<int64_t>(lengths.size()); }
};

inline Batch make_batch(const std::vector<SequenceSpec>& specs, int64_t heads, int64_t kv_heads, int64_t head_dim,
                        int64_t block_size, int64_t max_context, std::mt19937& rng, GgmlType kv_type = GgmlType::F16) {
  Batch b;
  b.kv_type = kv_type;
  b.num_heads = heads;
  b.num_kv_heads = kv_heads;
  b.head_dim = head_dim;
  b.block_size = block_size;
  b.max_blocks = (max_context + block_size - 1) / block_size;
  int64_t blocks_needed = 0;
  for (const SequenceSpec& s : specs) blocks_needed += (s.length + block_size - 1) / block_size;
  b.num_blocks = blocks_needed + 5;  // a few blocks nobody uses
  std::vector<int32_t> pool(static_cast<size_t>(b.num_blocks));
  std::iota(pool.begin(), pool.end(), 0);
  std::shuffle(pool.begin(), pool.end(), rng);
  b.block_tables.assign(static_cast<size_t>(specs.size() * b.max_blocks), -1);
  size_t next = 0;
  for (size_t s = 0; s < specs.size(); ++s) {
    for (int64_t i = 0; i < (specs[s].length + block_size - 1) / block_size; ++i) {
      b.block_tables[s * b.max_blocks + i] = pool[next++];
    }
    b.lengths.push_back(specs[s].length);
    for (int32_t p = specs[s].length - specs[s].num_queries; p < specs[s].length; ++p) {
      b.token_sequences.push_back(static_cast<int32_t>(s));
      b.positions.push_back(p);
    }
  }
  const size_t cache_units =
      static_cast<size_t>(b.num_blocks * block_size * kv_row_units(kv_type, kv_heads * head_dim));
  b.k_cache.resize(cache_units);
  b.v_cache.resize(cache_units);
  if (kv_type == GgmlType::F16) {
    std::normal_distribution<float> normal(0.0f, 1.0f);
    for (uint16_t& h : b.k_cache) h = f32_to_fp16(normal(rng));
    for (uint16_t& h : b.v_cache) h = f32_to_fp16(normal(rng));
  } else {
    // Q8_0 blocks of 17 units: an fp16 scale, then 32 int8 quants in byte pairs.
    std::uniform_real_distribution<float> scale(0.004f, 0.02f);
    std::uniform_int_distribution<int> quant(-127, 127);
    for (std::vector<uint16_t>* cache : {&b.k_cache, &b.v_cache}) {
      for (size_t i = 0; i < cache->size(); ++i) {
        if (i % 17 == 0) {
          (*cache)[i] = f32_to_fp16(scale(rng));
        } else {
          (*cache)[i] =
              static_cast<uint16_t>(static_cast<uint8_t>(quant(rng)) | (static_cast<uint8_t>(quant(rng)) << 8));
        }
      }
    }
  }
  b.q = iwb::test::random_floats(static_cast<size_t>(b.num_tokens() * heads * head_dim), rng);
  return b;
}

// gpt-oss-like attention sinks for `heads` heads, from below to well above the test batches'
// scores (the heads with high ones get outputs a fraction of the others').
inline std::vector<float> test_sinks(int64_t heads) {
  std::vector<float> sinks;
  for (int64_t h = 0; h < heads; ++h) sinks.push_back(-2.0f + 1.5f * static_cast<float>(h % 5));
  return sinks;
}

inline PagedAttentionArgs cpu_args(const Batch& b, int64_t window, float softcap, float* output) {
  PagedAttentionArgs a;
  a.q = b.q.data();
  a.k_cache = b.k_cache.data();
  a.v_cache = b.v_cache.data();
  a.num_blocks = b.num_blocks;
  a.block_size = b.block_size;
  a.block_tables = b.block_tables.data();
  a.max_blocks_per_sequence = b.max_blocks;
  a.sequence_lengths = b.lengths.data();
  a.num_sequences = b.num_sequences();
  a.token_sequences = b.token_sequences.data();
  a.positions = b.positions.data();
  a.num_tokens = b.num_tokens();
  a.num_heads = b.num_heads;
  a.num_kv_heads = b.num_kv_heads;
  a.head_dim = a.head_dim_v = b.head_dim;
  a.scale = 1.0f / std::sqrt(static_cast<float>(b.head_dim));
  a.sliding_window = window;
  a.softcap = softcap;
  a.output = output;
  a.num_threads = 1;
  a.k_type = a.v_type = b.kv_type;
  a.is_rotated = false;  // random blocks: nothing was rotated before quantizing
  return a;
}

}  // namespace iwb::test
