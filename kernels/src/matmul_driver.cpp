// The dot-kernel matmul driver: activations quantized to 8-bit blocks once per call (by all
// threads, one token each; F16/BF16/F32 weights read the f32 activations as they are), then
// each thread takes a contiguous share of the weight rows (of several matrices, for products
// of one input). Decode dots one row at a time, or runs the 4-row tile with one token where
// that is faster; a few tokens run tiles of 4 rows x 4 tokens over token blocks small enough
// to stay in L2; many tokens repack 16- or 32-row panels for the GEMM kernels.
#include "matmul_paths.h"
#include "parallel.h"
#include "quant_dot.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <memory>

namespace iwb::detail {
namespace {

constexpr size_t kAlign = 64;
// Quantized activations of one token block: kept under ~half of a 1 MiB L2.
constexpr size_t kTokenBlockBytes = 512 * 1024;

size_t round_up(size_t n, size_t a) { return (n + a - 1) / a * a; }

// Rows padded to cache lines so threads quantizing neighbouring tokens never share a line.
size_t activation_stride(const DotKernels& k, int64_t in_features) {
  return round_up(activation_row_bytes(k.format, in_features), kAlign);
}

// The kernels of every type on this CPU, looked up once.
const DotKernels* kernels_for(GgmlType type) {
  static const auto kTable = [] {
    std::array<DotKernels, 64> table{};
    for (uint32_t id = 0; id < table.size(); ++id) {
      if (ggml_type_traits(id).has_value()) select_dot_kernels(static_cast<GgmlType>(id), cpu_path(), &table[id]);
    }
    return table;
  }();
  const auto id = static_cast<uint32_t>(type);
  if (id >= kTable.size() || kTable[id].vec_dot == nullptr) return nullptr;
  return &kTable[id];
}

// Scratch owned by the calling thread when the caller passes none: grows to the largest
// request once, then every call reuses it.
uint8_t* thread_scratch(size_t bytes) {
  struct Buffer {
    std::unique_ptr<uint8_t[]> data;
    size_t size = 0;
  };
  thread_local Buffer buffer;
  if (buffer.size < bytes) {
    buffer.data.reset(new uint8_t[bytes + kAlign]);
    buffer.size = bytes;
  }
  const auto p = reinterpret_cast<uintptr_t>(buffer.data.get());
  return reinterpret_cast<uint8_t*>(round_up(p, kAlign));
}

// Without tile or GEMM kernels (AVX2, portable) the row dot products unpack every weight block
// once per token; past this many tokens the dequantizing path, which unpacks once per call,
// is faster (AVX2 on Zen 5, 64 tokens: 34-42 against 52 GMAC/s per core).
constexpr int64_t kMaxRowDotTokens = 4;

struct Plan {
  const DotKernels* k;
  bool use_gemm;
  const uint8_t* weight;
  size_t weight_stride;
  const uint8_t* act;
  size_t act_stride;
  int64_t token_block;
};

// The repacking buffer of the GEMM kernel, one per thread, grown once.
uint8_t* gemm_buffer(size_t bytes) {
  struct Buffer {
    std::unique_ptr<uint8_t[]> data;
    size_t size = 0;
  };
  thread_local Buffer buffer;
  if (buffer.size < bytes) {
    buffer.data.reset(new uint8_t[bytes + kAlign]);
    buffer.size = bytes;
  }
  return reinterpret_cast<uint8_t*>(round_up(reinterpret_cast<uintptr_t>(buffer.data.get()), kAlign));
}

void run_rows(const MatmulArgs& a, const Plan& p, int64_t row_begin, int64_t row_end) {
  const int64_t in = a.in_features, out_features = a.out_features;
  if (p.use_gemm) {
    uint8_t* buffer = gemm_buffer(quant_gemm_buffer_bytes(a.weight_type, in));
    for (int64_t r0 = row_begin; r0 < row_end; r0 += p.k->gemm_rows) {
      const int num_rows = static_cast<int>(std::min<int64_t>(p.k->gemm_rows, row_end - r0));
      p.k->gemm(p.weight + r0 * p.weight_stride, p.weight_stride, num_rows, p.act, p.act_stride, a.num_tokens, in,
                a.bias ? a.bias + r0 : nullptr, a.output + r0, out_features, buffer);
    }
    return;
  }
  if ((a.num_tokens == 1 && !p.k->is_tile_for_one_token) || p.k->tile == nullptr) {
    for (int64_t r = row_begin; r < row_end; ++r) {
      const uint8_t* w = p.weight + r * p.weight_stride;
      const float bias = a.bias ? a.bias[r] : 0.0f;
      for (int64_t t = 0; t < a.num_tokens; ++t) {
        a.output[t * out_features + r] = p.k->vec_dot(w, p.act + t * p.act_stride, in) + bias;
      }
    }
    return;
  }
  float tile[kTileRows * kTileTokens];
  for (int64_t t_block = 0; t_block < a.num_tokens; t_block += p.token_block) {
    const int64_t t_end = std::min(a.num_tokens, t_block + p.token_block);
    for (int64_t r0 = row_begin; r0 < row_end; r0 += kTileRows) {
      const int num_rows = static_cast<int>(std::min<int64_t>(kTileRows, row_end - r0));
      const uint8_t* w = p.weight + r0 * p.weight_stride;
      for (int64_t t0 = t_block; t0 < t_end; t0 += kTileTokens) {
        const int num_tokens = static_cast<int>(std::min<int64_t>(kTileTokens, t_end - t0));
        p.k->tile(w, p.weight_stride, num_rows, p.act + t0 * p.act_stride, p.act_stride, num_tokens, in, tile);
        for (int t = 0; t < num_tokens; ++t) {
          float* y = a.output + (t0 + t) * out_features + r0;
          for (int r = 0; r < num_rows; ++r) y[r] = tile[r * kTileTokens + t] + (a.bias ? a.bias[r0 + r] : 0.0f);
        }
      }
    }
  }
}

}  // namespace

bool has_dot_kernels(GgmlType type) { return kernels_for(type) != nullptr; }

size_t dot_kernels_scratch_bytes(GgmlType type, int64_t in_features, int64_t num_tokens) {
  const DotKernels* k = kernels_for(type);
  if (k == nullptr || k->quantize == nullptr || in_features <= 0 || num_tokens <= 0) return 0;
  return activation_stride(*k, in_features) * static_cast<size_t>(num_tokens) + kAlign;
}

namespace {

// The plan of one product: false when the dot kernels cannot take it (see matmul_paths.h).
bool make_plan(const MatmulArgs& a, Plan* p) {
  const DotKernels* k = kernels_for(a.weight_type);
  if (k == nullptr || !matmul_args_valid(a)) return false;
  const bool is_quantized = k->quantize != nullptr;
  if (is_quantized && (a.is_exact || is_matmul_exact_forced())) return false;  // f32 activations wanted
  if (k->tile == nullptr && k->gemm == nullptr && a.num_tokens > kMaxRowDotTokens) return false;
  if (a.in_features % ggml_type_traits(a.weight_type).block_size != 0) return false;
  const size_t alignment = a.weight_type == GgmlType::F32 ? 4 : 2;
  if (reinterpret_cast<uintptr_t>(a.weight) % alignment != 0) return false;
  p->k = k;
  p->weight = static_cast<const uint8_t*>(a.weight);
  p->weight_stride = *ggml_row_bytes(a.weight_type, a.in_features);
  if (is_quantized) {
    p->act = nullptr;  // the shared scratch, set by the caller
    p->act_stride = activation_stride(*k, a.in_features);
  } else {
    p->act = reinterpret_cast<const uint8_t*>(a.input);
    p->act_stride = static_cast<size_t>(a.in_features) * sizeof(float);
  }
  p->use_gemm = k->gemm != nullptr && a.num_tokens >= k->gemm_min_tokens;
  p->token_block = std::max<int64_t>(kTileTokens, static_cast<int64_t>(kTokenBlockBytes / p->act_stride) / kTileTokens * kTileTokens);
  return true;
}

int64_t tile_rows_of(const Plan& p) { return p.use_gemm ? p.k->gemm_rows : kTileRows; }

// The tiles of product i that thread id of nt runs: the products' tiles laid end to end and
// cut into nt ranges of (nearly) equal weight bytes, so each thread streams its own share.
void thread_tiles(const Plan* plans, const MatmulArgs* args, size_t count, size_t i, int64_t id, int64_t nt,
                  int64_t* tile_begin, int64_t* tile_end) {
  double total = 0, before = 0;
  for (size_t j = 0; j < count; ++j) {
    const double bytes = static_cast<double>(plans[j].weight_stride) * static_cast<double>(args[j].out_features);
    if (j < i) before += bytes;
    total += bytes;
  }
  const int64_t rows = tile_rows_of(plans[i]);
  const int64_t num_tiles = (args[i].out_features + rows - 1) / rows;
  const double tile_bytes = static_cast<double>(plans[i].weight_stride) * static_cast<double>(rows);
  // Tile t belongs to the thread whose byte range holds the tile's first byte.
  auto first_tile_at = [&](double offset) {
    const double t = std::ceil((offset - before) / tile_bytes);
    return std::clamp<int64_t>(static_cast<int64_t>(t), 0, num_tiles);
  };
  *tile_begin = id == 0 ? 0 : first_tile_at(total * static_cast<double>(id) / static_cast<double>(nt));
  *tile_end = id + 1 == nt ? num_tiles : first_tile_at(total * static_cast<double>(id + 1) / static_cast<double>(nt));
}

}  // namespace

bool matmul_group_with_dot_kernels(std::span<const MatmulArgs> group) {
  constexpr size_t kMaxGroup = 8;
  if (group.empty() || group.size() > kMaxGroup) return false;
  std::array<Plan, kMaxGroup> plans;
  const MatmulArgs& first = group[0];
  for (size_t i = 0; i < group.size(); ++i) {
    if (!make_plan(group[i], &plans[i])) return false;
    // One quantized input for all: the same input, shape and activation format.
    const MatmulArgs& a = group[i];
    if (a.input != first.input || a.in_features != first.in_features || a.num_tokens != first.num_tokens ||
        plans[i].k->format != plans[0].k->format) {
      return false;
    }
  }
  const DotKernels& k0 = *plans[0].k;
  const bool is_quantized = k0.quantize != nullptr;
  uint8_t* scratch = nullptr;
  if (is_quantized) {
    const size_t need = dot_kernels_scratch_bytes(first.weight_type, first.in_features, first.num_tokens);
    // The caller's scratch when it is big enough, otherwise the calling thread's own.
    scratch = first.scratch != nullptr && first.scratch_bytes >= need
                  ? reinterpret_cast<uint8_t*>(round_up(reinterpret_cast<uintptr_t>(first.scratch), kAlign))
                  : thread_scratch(need);
    for (size_t i = 0; i < group.size(); ++i) plans[i].act = scratch;
  }
  const size_t act_stride = plans[0].act_stride;
  auto quantize = [&](int64_t t) {
    if (is_quantized) k0.quantize(first.input + t * first.in_features, scratch + t * act_stride, first.in_features);
  };
  int64_t work = 0;
  for (const MatmulArgs& a : group) work += a.in_features * a.out_features * a.num_tokens;
  const int num_threads = work >= kMinParallelWork ? resolve_threads(first.num_threads) : 1;
  if (num_threads == 1) {
    for (int64_t t = 0; t < first.num_tokens; ++t) quantize(t);
    for (size_t i = 0; i < group.size(); ++i) run_rows(group[i], plans[i], 0, group[i].out_features);
    return true;
  }
#pragma omp parallel num_threads(num_threads)
  {
    if (is_quantized) {
#pragma omp for schedule(static)
      for (int64_t t = 0; t < first.num_tokens; ++t) quantize(t);
      // (the implicit barrier: every token is quantized before any row reads it)
    }
    const int64_t nt = omp_get_num_threads(), id = omp_get_thread_num();
    for (size_t i = 0; i < group.size(); ++i) {
      int64_t tile_begin, tile_end;
      thread_tiles(plans.data(), group.data(), group.size(), i, id, nt, &tile_begin, &tile_end);
      const int64_t rows = tile_rows_of(plans[i]), out = group[i].out_features;
      if (tile_end > tile_begin) run_rows(group[i], plans[i], std::min(out, tile_begin * rows), std::min(out, tile_end * rows));
    }
  }
  return true;
}

bool matmul_with_dot_kernels(const MatmulArgs& a) { return matmul_group_with_dot_kernels({&a, 1}); }

}  // namespace iwb::detail
