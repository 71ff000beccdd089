// Microbenchmark of paged_attention_cuda on the llama-3-8b attention shape (32 query heads, 8 KV
// heads of 128): decode batches of 1..64 sequences (KV bytes read per second, and that rate as a
// share of --peak-gbs) and a causal prefill of one prompt on tensor cores and on the f32 kernel
// (TFLOP/s against --peak-tflops).
// Times come from CUDA events over repeated calls. Prints a message and exits 0 without a GPU.
//   bench_cuda_attention [--peak-gbs 3350] [--peak-tflops 989] [--context 4096] [--min-ms 20]
#include "iwb/kernels/cuda/paged_attention_cuda.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

using namespace iwb;

namespace {

constexpr int64_t kHeads = 32, kKvHeads = 8, kHeadDim = 128, kBlockSize = 16;

bool check(cudaError_t error, const char* what) {
  if (error == cudaSuccess) return true;
  std::fprintf(stderr, "bench_cuda_attention: %s: %s\n", what, cudaGetErrorString(error));
  return false;
}

// Device memory released at scope exit.
struct DeviceMemory {
  void* ptr = nullptr;
  explicit DeviceMemory(size_t bytes) {
    if (cudaMalloc(&ptr, std::max<size_t>(bytes, 256)) != cudaSuccess) ptr = nullptr;
  }
  ~DeviceMemory() {
    if (ptr != nullptr) cudaFree(ptr);
  }
  template <typename T>
  T* as() const { return static_cast<T*>(ptr); }
};

template <typename T>
bool upload(const DeviceMemory& d, const std::vector<T>& host) {
  return check(cudaMemcpy(d.ptr, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice), "upload");
}

struct Timing {
  double ms_per_call = 0;
  bool ok = false;
};

// num_sequences sequences of `length` positions each, `queries` queries per sequence (its last
// positions), blocks scattered over a pool shared by all of them.
Timing run(int64_t num_sequences, int64_t length, int64_t queries, int64_t max_context, double min_ms,
           bool allow_tensor_cores = true) {
  const int64_t max_blocks = (max_context + kBlockSize - 1) / kBlockSize;
  const int64_t blocks_per_sequence = (length + kBlockSize - 1) / kBlockSize;
  const int64_t num_blocks = num_sequences * blocks_per_sequence;
  std::vector<int32_t> pool(static_cast<size_t>(num_blocks));
  std::iota(pool.begin(), pool.end(), 0);
  std::mt19937 rng(1);
  std::shuffle(pool.begin(), pool.end(), rng);
  std::vector<int32_t> tables(static_cast<size_t>(num_sequences * max_blocks), -1), lengths, token_sequences, positions;
  for (int64_t s = 0; s < num_sequences; ++s) {
    for (int64_t b = 0; b < blocks_per_sequence; ++b) tables[s * max_blocks + b] = pool[s * blocks_per_sequence + b];
    lengths.push_back(static_cast<int32_t>(length));
    for (int64_t p = length - queries; p < length; ++p) {
      token_sequences.push_back(static_cast<int32_t>(s));
      positions.push_back(static_cast<int32_t>(p));
    }
  }
  const auto num_tokens = static_cast<int64_t>(positions.size());
  const size_t cache_bytes = static_cast<size_t>(num_blocks * kBlockSize * kKvHeads * kHeadDim) * 2;
  DeviceMemory k_cache(cache_bytes), v_cache(cache_bytes);
  DeviceMemory q(static_cast<size_t>(num_tokens * kHeads * kHeadDim) * 4), out(static_cast<size_t>(num_tokens * kHeads * kHeadDim) * 4);
  DeviceMemory d_tables(tables.size() * 4), d_lengths(lengths.size() * 4), d_seqs(token_sequences.size() * 4),
      d_positions(positions.size() * 4);
  if (!k_cache.ptr || !v_cache.ptr || !q.ptr || !out.ptr || !d_tables.ptr || !d_lengths.ptr || !d_seqs.ptr ||
      !d_positions.ptr) {
    std::fprintf(stderr, "bench_cuda_attention: out of device memory\n");
    return {};
  }
  // Small values (0x2000 is f16 ~0.0078): no inf or NaN in the scores.
  if (!check(cudaMemset(k_cache.ptr, 0x20, cache_bytes), "memset") || !check(cudaMemset(v_cache.ptr, 0x20, cache_bytes), "memset") ||
      !check(cudaMemset(q.ptr, 0, static_cast<size_t>(num_tokens * kHeads * kHeadDim) * 4), "memset") ||
      !upload(d_tables, tables) || !upload(d_lengths, lengths) || !upload(d_seqs, token_sequences) ||
      !upload(d_positions, positions)) {
    return {};
  }
  PagedAttentionCudaArgs a;
  a.q = q.as<float>();
  a.k_cache = k_cache.as<uint16_t>();
  a.v_cache = v_cache.as<uint16_t>();
  a.num_blocks = num_blocks;
  a.block_size = kBlockSize;
  a.block_tables = d_tables.as<int32_t>();
  a.max_blocks_per_sequence = max_blocks;
  a.sequence_lengths = d_lengths.as<int32_t>();
  a.num_sequences = num_sequences;
  a.token_sequences = d_seqs.as<int32_t>();
  a.positions = d_positions.as<int32_t>();
  a.num_tokens = num_tokens;
  a.num_heads = kHeads;
  a.num_kv_heads = kKvHeads;
  a.head_dim = a.head_dim_v = kHeadDim;
  a.scale = 0.088f;
  a.output = out.as<float>();
  a.allow_tensor_cores = allow_tensor_cores;
  DeviceMemory workspace(paged_attention_cuda_workspace_bytes(a));
  a.workspace = workspace.ptr;
  a.workspace_bytes = paged_attention_cuda_workspace_bytes(a);
  if (!check(paged_attention_cuda(a, nullptr), "warm-up launch") || !check(cudaDeviceSynchronize(), "warm-up")) return {};

  cudaEvent_t start, stop;
  if (!check(cudaEventCreate(&start), "event") || !check(cudaEventCreate(&stop), "event")) return {};
  int64_t calls = 1;
  Timing t;
  for (;;) {
    cudaEventRecord(start);
    for (int64_t i = 0; i < calls; ++i) {
      if (!check(paged_attention_cuda(a, nullptr), "launch")) return {};
    }
    cudaEventRecord(stop);
    if (!check(cudaEventSynchronize(stop), "timing")) return {};
    float ms = 0;
    cudaEventElapsedTime(&ms, start, stop);
    if (ms >= min_ms || calls >= (int64_t{1} << 20)) {
      t.ms_per_call = ms / static_cast<double>(calls);
      t.ok = true;
      break;
    }
    calls *= 2;
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return t;
}

double arg_value(int argc, char** argv, const char* name, double fallback) {
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], name) == 0) return std::atof(argv[i + 1]);
  }
  return fallback;
}

}  // namespace

int main(int argc, char** argv) {
  const double peak_gbs = arg_value(argc, argv, "--peak-gbs", 3350.0);
  const double peak_tflops = arg_value(argc, argv, "--peak-tflops", 989.0);
  const auto context = static_cast<int64_t>(arg_value(argc, argv, "--context", 4096));
  const double min_ms = arg_value(argc, argv, "--min-ms", 20.0);
  int count = 0;
  if (const cudaError_t e = cudaGetDeviceCount(&count); e != cudaSuccess || count == 0) {
    std::printf("bench_cuda_attention: no usable CUDA device (%s); nothing measured\n",
                e != cudaSuccess ? cudaGetErrorString(e) : "none present");
    return 0;
  }
  cudaDeviceProp prop{};
  cudaGetDeviceProperties(&prop, 0);
  std::printf("paged attention, llama-3-8b shape (%lld q heads, %lld kv heads, head %lld, block %lld) on %s\n",
              static_cast<long long>(kHeads), static_cast<long long>(kKvHeads), static_cast<long long>(kHeadDim),
              static_cast<long long>(kBlockSize), prop.name);
  std::printf("(decodes whose keys and values fit the L2 cache read faster than DRAM allows)\n");
  std::printf("%-28s %10s %10s %8s\n", "case", "us/call", "GB/s", "% peak");
  for (const int64_t batch : {1, 8, 32, 64}) {
    for (const int64_t length : {int64_t{1024}, context}) {
      const Timing t = run(batch, length, 1, context, min_ms);
      if (!t.ok) return 1;
      // Keys and values each sequence reads once per KV head (f16).
      const double bytes = static_cast<double>(batch * length * kKvHeads * kHeadDim) * 2.0 * 2.0;
      const double gbs = bytes / (t.ms_per_call * 1e-3) / 1e9;
      std::printf("decode b%-3lld ctx %-14lld %10.1f %10.1f %7.1f%%\n", static_cast<long long>(batch),
                  static_cast<long long>(length), t.ms_per_call * 1e3, gbs, 100.0 * gbs / peak_gbs);
    }
  }
  std::printf("%-28s %10s %10s %8s\n", "case", "us/call", "TFLOP/s", "% peak");
  for (const int64_t prompt : {int64_t{512}, int64_t{2048}}) {
    for (const bool tensor_cores : {true, false}) {
      const Timing t = run(1, prompt, prompt, std::max(context, prompt), min_ms, tensor_cores);
      if (!t.ok) return 1;
      // Causal: query p sees p + 1 keys; q.k and p.v are 2 flops per multiply-add each.
      const double flops = 4.0 * static_cast<double>(kHeads * kHeadDim) * static_cast<double>(prompt) *
                           static_cast<double>(prompt + 1) / 2.0;
      const double tflops = flops / (t.ms_per_call * 1e-3) / 1e12;
      std::printf("prefill %-5lld %-14s %10.1f %10.2f %7.1f%%\n", static_cast<long long>(prompt),
                  tensor_cores ? "tensor cores" : "f32", t.ms_per_call * 1e3, tflops, 100.0 * tflops / peak_tflops);
    }
  }
  return 0;
}
