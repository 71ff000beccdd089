// The plan of one product of the dot-kernel matmul driver and the chunks its rows are cut into
// (private to kernels/src: matmul_driver.cpp makes them, matmul_decode.cpp runs decode rows by them).
#pragma once

#include "iwb/kernels/matmul.h"
#include "quant_dot.h"

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>

namespace iwb::detail {

// Quantized products of a few tokens (decode_token_limit in matmul_driver.cpp: 2, or up to
// kMaxDecodeTokens where the layout taken has a kernel that dots several tokens at once:
// sequences decoding together, a draft verified) run as decode does, each weight row streamed
// once and dotted against every token while it is in L1, instead of in 4 x 4 tiles, whose four
// interleaved rows defeat the prefetchers (see decode_rows). A token's result is then the same
// as when it runs alone. Xeon model 207, 2 threads, `iwb bench -p N -n 0` tokens/s, tiles ->
// decode steps: Q4_0 pp2 27.6 -> 39.2, pp3 35.3 -> 44.0, pp4 41.3 -> 47.3; Q4_K_M pp2 36.2 ->
// 39.4, pp3 45.2 -> 40.9, pp4 54.7 -> 42.5; Q8_0 pp2 21.3 -> 23.7, pp3 28.9 -> 27.6, pp4 34.4 ->
// 28.8. Past two tokens the one- and two-token kernels' work per token (each unpacks the row
// again) outweighs the streaming; the several-token kernels unpack it once.

struct Plan {
  const DotKernels* k;
  bool use_gemm;
  bool use_lanes;
  bool is_prepared;         // the GEMM reads activation groups made by k->gemm_prepare
  bool use_decode;          // decode rows on the kernel's own activation layout (k->decode_dot)
  bool is_rows_decode;      // rows in decode steps (decode_rows): one token, or a few quantized
  bool is_one_token_tiled;  // one token in 4-row tiles (DecodeStreaming::tile_activation_bytes)
  const uint8_t* weight;
  size_t weight_stride;
  const uint8_t* act;
  size_t act_stride;
  int64_t token_block;
};

inline int64_t tile_rows_of(const Plan& p) { return p.use_gemm ? p.k->gemm_rows : p.use_lanes ? kLaneRows : kTileRows; }

// The products' tiles cut into chunks of about equal weight bytes, several per thread, that
// threads claim in turn from a shared counter: a thread the OS holds back (a busy machine, or
// a pool worker that was asleep) leaves its chunks to the others instead
// of making them wait at the join. Chunks are whole tiles, so results never depend on who ran
// what.
constexpr int kChunksPerThread = 4;
constexpr size_t kMaxGroup = 8;
// Threads up to which decode products share their ends step by step (DecodeSteal).
constexpr int kMaxStealThreads = 16;

// A prompt's GEMM spends milliseconds on every panel, so its chunks can be much finer at no
// cost: one every 8 tokens' worth, up to 64 a thread. With 4 a thread, one chunk of a 512-token
// product is a quarter of a thread's share, and a thread held back near the end (a shared
// machine's other guests) left the other waiting for it (Zen 3, 2 threads, pp512 three runs
// each, alternating: F16 55-62 -> 62-63 tokens/s, Q4_K_M 88-104 -> 101-108).
//
// Decode rows: one chunk a thread, its end shared out by DecodeSteal, which balances the threads
// to a batch of steps. Every chunk restarts its streams, so fewer is faster (Xeon model 207, 2
// threads, paired MBU, 2-3 alternated rounds of `iwb bench -p 0 -n 64 -r 6`, 4 -> 2 -> 1 chunks
// a thread: Q4_K_M 87.0 / 86.2 -> 87.5 / 87.5 -> 88.7 / 88.8%, Q4_0 84.5 / 84.3 -> 86.2 / 85.6 ->
// 86.7 / 87.2%).
inline int chunks_per_thread(const Plan& p, const MatmulArgs& a, int num_threads) {
  if (p.is_rows_decode && num_threads <= kMaxStealThreads) return 1;
  if (!p.use_gemm) return kChunksPerThread;
  return static_cast<int>(std::clamp<int64_t>(a.num_tokens / 8, kChunksPerThread, 64));
}

struct Chunks {
  std::array<int64_t, kMaxGroup> num_tiles{}, tiles_per_chunk{};
  std::array<int64_t, kMaxGroup + 1> first{};  // first[i]: the first chunk of product i; first[count]: all
  size_t count = 0;

  Chunks(const Plan* plans, const MatmulArgs* args, size_t n, int num_threads) : count(n) {
    double total = 0;
    for (size_t i = 0; i < n; ++i)
      total += static_cast<double>(plans[i].weight_stride) * static_cast<double>(args[i].out_features);
    const double target = total / (num_threads * chunks_per_thread(plans[0], args[0], num_threads));
    for (size_t i = 0; i < n; ++i) {
      const int64_t rows = tile_rows_of(plans[i]);
      num_tiles[i] = (args[i].out_features + rows - 1) / rows;
      const double tile_bytes = static_cast<double>(plans[i].weight_stride) * static_cast<double>(rows);
      tiles_per_chunk[i] = std::max<int64_t>(1, static_cast<int64_t>(target / tile_bytes));
      first[i + 1] = first[i] + (num_tiles[i] + tiles_per_chunk[i] - 1) / tiles_per_chunk[i];
    }
  }
  int64_t size() const { return first[count]; }
  // Chunk c as rows [begin, end) of product `product`.
  struct Rows {
    size_t product;
    int64_t begin, end;
  };
  Rows rows_of(int64_t c, const Plan* plans, const MatmulArgs* args) const {
    Rows r;
    int64_t tile_begin, tile_end;
    locate(c, &r.product, &tile_begin, &tile_end);
    const int64_t rows = tile_rows_of(plans[r.product]), out = args[r.product].out_features;
    r.begin = std::min(out, tile_begin * rows);
    r.end = std::min(out, tile_end * rows);
    return r;
  }
  // Chunk c as product *product's tiles [*tile_begin, *tile_end).
  void locate(int64_t c, size_t* product, int64_t* tile_begin, int64_t* tile_end) const {
    size_t i = 0;
    while (c >= first[i + 1]) ++i;
    *product = i;
    *tile_begin = (c - first[i]) * tiles_per_chunk[i];
    *tile_end = std::min(num_tiles[i], *tile_begin + tiles_per_chunk[i]);
  }
};

}  // namespace iwb::detail
