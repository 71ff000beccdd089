// Microbenchmark of decode attention over a deep paged KV cache: one query token per call at
// the last of N positions, one cache per layer (so the layers' keys and values come from
// memory, as in a decode step), its blocks in order (one sequence in a fresh cache) or
// shuffled (as a cache that served many sequences holds them: --shuffled 1). Prints the time per layer and the cache
// bytes read per second. A plain program, not a test (docs/benchmarks.md).
//
//   bench_paged_attention [--keys 8192] [--layers 28] [--heads 12] [--kv-heads 2] [--dim 128]
//                         [--block 16] [--threads 2] [--reps 5] [--type f16|q8_0|q4_0|...]
//                         [--tokens 1] [--lone 0] [--huge 0|1] [--shuffled 0|1]
// Defaults: the default model (Qwen2.5-Coder-1.5B) at a depth of 8,192. --tokens N > 1 makes a
// prompt chunk of N tokens ending at the last position; --lone M adds M lone tokens after it at
// earlier, spaced-out positions (as decodes of other sequences scheduled beside a prefill chunk).
#include "huge_page_buffer.h"
#include "iwb/kernels/paged_attention.h"
#include "random_tensors.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

using namespace iwb;

namespace {

GgmlType parse_type(const std::string& name) {
  for (GgmlType t : {GgmlType::F16, GgmlType::Q8_0, GgmlType::Q5_1, GgmlType::Q5_0, GgmlType::Q4_1, GgmlType::Q4_0,
                     GgmlType::F8_E4M3}) {
    std::string n(ggml_type_name(t));
    std::transform(n.begin(), n.end(), n.begin(), [](unsigned char c) { return std::tolower(c); });
    if (n == name) return t;
  }
  std::fprintf(stderr, "unknown cache type '%s'\n", name.c_str());
  std::exit(2);
}

}  // namespace

int main(int argc, char** argv) {
  int64_t keys = 8192, layers = 28, heads = 12, kv_heads = 2, dim = 128, block = 16, tokens = 1, lone = 0;
  int threads = 2, reps = 5, huge = 0, shuffled = 0;
  GgmlType type = GgmlType::F16;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string o = argv[i];
    const char* v = argv[i + 1];
    if (o == "--keys")
      keys = std::atoll(v);
    else if (o == "--layers")
      layers = std::atoll(v);
    else if (o == "--heads")
      heads = std::atoll(v);
    else if (o == "--kv-heads")
      kv_heads = std::atoll(v);
    else if (o == "--dim")
      dim = std::atoll(v);
    else if (o == "--block")
      block = std::atoll(v);
    else if (o == "--threads")
      threads = std::atoi(v);
    else if (o == "--reps")
      reps = std::atoi(v);
    else if (o == "--type")
      type = parse_type(v);
    else if (o == "--tokens")
      tokens = std::atoll(v);
    else if (o == "--lone")
      lone = std::atoll(v);
    else if (o == "--huge")
      huge = std::atoi(v);
    else if (o == "--shuffled")
      shuffled = std::atoi(v);
    else {
      std::fprintf(stderr, "unknown option %s\n", o.c_str());
      return 2;
    }
  }
  if (keys < tokens + 2 * lone + 1 || tokens < 1 || lone < 0 || layers < 1 || heads % kv_heads != 0 || dim % 64 != 0) {
    std::fprintf(stderr, "bad sizes\n");
    return 2;
  }
  const int64_t num_blocks = (keys + block - 1) / block;
  const int64_t row_units = kv_row_units(type, kv_heads * dim);
  const size_t cache_units = static_cast<size_t>(num_blocks * block * row_units);
  // Cache contents do not change the time; random bits would hold NaNs, so small f16 values
  // (or, for the block types, whatever bytes the writes below produce).
  // --huge 1: the caches in 2 MiB pages (madvise), as the engine's KV pool asks for.
  std::vector<test::HugePageBuffer<uint16_t>> k_caches, v_caches;
  auto allocate = [&] { return test::huge_page_buffer<uint16_t>(cache_units, huge != 0); };
  std::mt19937 rng(7);
  std::vector<int32_t> table(static_cast<size_t>(num_blocks));
  std::iota(table.begin(), table.end(), 0);
  if (shuffled) std::shuffle(table.begin(), table.end(), rng);
  const std::vector<float> rows = test::random_floats(static_cast<size_t>(keys * kv_heads * dim), rng);
  std::vector<int64_t> slots(static_cast<size_t>(keys));
  for (int64_t p = 0; p < keys; ++p) slots[p] = static_cast<int64_t>(table[p / block]) * block + p % block;
  for (int64_t l = 0; l < layers; ++l) {
    k_caches.push_back(allocate());
    v_caches.push_back(allocate());
    WriteKvPagedArgs w;
    w.k = w.v = rows.data();
    w.k_cache = k_caches[l].get();
    w.v_cache = v_caches[l].get();
    w.num_slots = num_blocks * block;
    w.num_kv_heads = kv_heads;
    w.slot_mapping = slots.data();
    w.num_tokens = keys;
    w.k_row = w.v_row = kv_heads * dim;
    w.k_type = w.v_type = type;
    if (!write_kv_paged(w)) {
      std::fprintf(stderr, "write_kv_paged refused the sizes\n");
      return 1;
    }
  }
  const std::vector<float> q = test::random_floats(static_cast<size_t>((tokens + lone) * heads * dim), rng);
  std::vector<float> out(q.size());
  const int32_t length = static_cast<int32_t>(keys);
  std::vector<int32_t> token_sequences(static_cast<size_t>(tokens + lone), 0),
      positions(static_cast<size_t>(tokens + lone));
  for (int64_t t = 0; t < tokens; ++t) positions[t] = static_cast<int32_t>(keys - tokens + t);
  for (int64_t i = 0; i < lone; ++i) positions[tokens + i] = static_cast<int32_t>(keys - tokens - 2 - 2 * i);
  PagedAttentionArgs a;
  a.q = q.data();
  a.num_blocks = num_blocks;
  a.block_size = block;
  a.block_tables = table.data();
  a.max_blocks_per_sequence = num_blocks;
  a.sequence_lengths = &length;
  a.num_sequences = 1;
  a.token_sequences = token_sequences.data();
  a.positions = positions.data();
  a.num_tokens = tokens + lone;
  a.num_heads = heads;
  a.num_kv_heads = kv_heads;
  a.head_dim = a.head_dim_v = dim;
  a.scale = 1.0f / std::sqrt(static_cast<float>(dim));
  a.output = out.data();
  a.num_threads = threads;
  a.k_type = a.v_type = type;

  const double bytes_per_layer = 2.0 * static_cast<double>(keys * row_units) * 2.0;  // K and V, all heads
  std::printf(
      "%lld keys, %lld layers, %lld heads / %lld KV heads of %lld, blocks of %lld, %s cache, %d threads, "
      "%lld query tokens + %lld lone: %.1f MB of cache per pass\n",
      static_cast<long long>(keys), static_cast<long long>(layers), static_cast<long long>(heads),
      static_cast<long long>(kv_heads), static_cast<long long>(dim), static_cast<long long>(block),
      std::string(ggml_type_name(type)).c_str(), threads, static_cast<long long>(tokens), static_cast<long long>(lone),
      1e-6 * bytes_per_layer * layers);
  double best = 1e30;
  for (int r = 0; r < reps + 1; ++r) {  // the first pass warms up (page faults, thread start)
    const auto t0 = std::chrono::steady_clock::now();
    for (int64_t l = 0; l < layers; ++l) {
      a.k_cache = k_caches[l].get();
      a.v_cache = v_caches[l].get();
      if (!paged_attention(a)) {
        std::fprintf(stderr, "paged_attention refused the arguments\n");
        return 1;
      }
    }
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (r > 0) {
      std::printf("pass %d: %.3f ms (%.1f us a layer), %.1f GB/s of cache\n", r, 1e3 * s, 1e6 * s / layers,
                  1e-9 * bytes_per_layer * layers / s);
      best = std::min(best, s);
    }
  }
  std::printf("best: %.3f ms a pass, %.1f GB/s of cache\n", 1e3 * best, 1e-9 * bytes_per_layer * layers / best);
  return 0;
}
