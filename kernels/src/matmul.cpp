// matmul's entry points. The dot-kernel path (matmul_driver.cpp: integer dot products over
// 8-bit activations, AVX-512 float tiles) runs where this CPU has kernels for the weight type;
// otherwise the dequantizing path here: tiles of kTileRows rows walked in column chunks, each
// chunk of each row dequantized once into a per-thread buffer and dotted against every token,
// so the prefill of n tokens dequantizes the weights once, not n times. Threads own disjoint
// row tiles, so they never write the same output element.
#include "iwb/kernels/matmul.h"

#include "dequantize_avx2.h"
#include "iwb/kernels/dequantize.h"
#include "matmul_paths.h"
#include "parallel.h"
#include "simd.h"

#include <algorithm>
#include <vector>

namespace iwb {
namespace {

constexpr int kTileRows = 4;
constexpr int kTileTokens = 3;
// Columns dequantized at a time: 4 rows x 1024 floats = 16 KiB, inside L1 beside the input.
constexpr int64_t kChunkColumns = 1024;

size_t row_bytes(const MatmulArgs& a) { return *ggml_row_bytes(a.weight_type, a.in_features); }

// The per-thread dequantization buffer; grows once, then every call reuses it.
float* thread_buffer(size_t num_floats) {
  thread_local std::vector<float> buffer;
  if (buffer.size() < num_floats) buffer.resize(num_floats);
  return buffer.data();
}

// What every tile of one call shares, worked out once.
struct TilePlan {
  detail::DequantizeRowFn dequantize;
  size_t stride;  // bytes per weight row
  int64_t block;  // elements per block
  size_t block_bytes;
  int64_t chunk;  // columns dequantized at a time, whole blocks
};

void matmul_tile(const MatmulArgs& a, const TilePlan& plan, int64_t first_row, int num_rows, float* buffer) {
  const size_t stride = plan.stride;
  const int64_t chunk = plan.chunk;
  const auto* weights = static_cast<const uint8_t*>(a.weight);

  // Ask for the next tile's rows now: the hardware prefetcher does not follow the jumps
  // between rows and blocks, and decode is bound by how fast the weights stream in.
  const int64_t next_row = first_row + kTileRows;
  if (next_row < a.out_features) {
    const uint8_t* next = weights + next_row * stride;
    const size_t next_bytes = stride * static_cast<size_t>(std::min<int64_t>(kTileRows, a.out_features - next_row));
    for (size_t off = 0; off < next_bytes; off += 64) __builtin_prefetch(next + off);
  }
  for (int64_t t = 0; t < a.num_tokens; ++t) {
    float* out = a.output + t * a.out_features + first_row;
    for (int r = 0; r < num_rows; ++r) out[r] = a.bias ? a.bias[first_row + r] : 0.0f;
  }
  for (int64_t c0 = 0; c0 < a.in_features; c0 += chunk) {
    const int64_t len = std::min(chunk, a.in_features - c0);
    const float* rows[kTileRows];
    for (int r = 0; r < num_rows; ++r) {
      const uint8_t* src = weights + (first_row + r) * stride + (c0 / plan.block) * plan.block_bytes;
      float* dst = buffer + r * chunk;
      plan.dequantize(src, dst, len);
      rows[r] = dst;
    }
    int64_t t = 0;
    // Three tokens at a time share each weight load (prefill); what is left goes one by one.
    for (; t + kTileTokens <= a.num_tokens; t += kTileTokens) {
      float partial[kTileRows * kTileTokens];
      const float* xs[kTileTokens];
      for (int j = 0; j < kTileTokens; ++j) xs[j] = a.input + (t + j) * a.in_features + c0;
      simd::dot_tile_f32(rows, num_rows, xs, kTileTokens, len, partial, kTileTokens);
      for (int j = 0; j < kTileTokens; ++j) {
        float* out = a.output + (t + j) * a.out_features + first_row;
        for (int r = 0; r < num_rows; ++r) out[r] += partial[r * kTileTokens + j];
      }
    }
    for (; t < a.num_tokens; ++t) {
      float partial[kTileRows];
      simd::dot_rows_f32(rows, num_rows, a.input + t * a.in_features + c0, len, partial);
      float* out = a.output + t * a.out_features + first_row;
      for (int r = 0; r < num_rows; ++r) out[r] += partial[r];
    }
  }
}

}  // namespace

bool matmul_args_valid(const MatmulArgs& a) {
  if (a.weight == nullptr || a.input == nullptr || a.output == nullptr) return false;
  if (a.in_features <= 0 || a.out_features <= 0 || a.num_tokens <= 0) return false;
  if (!ggml_can_dequantize(a.weight_type)) return false;
  return ggml_row_bytes(a.weight_type, a.in_features).has_value();
}

bool matmul(const MatmulArgs& a) {
  if (!matmul_args_valid(a)) return false;
  if (detail::matmul_with_dot_kernels(a)) return true;
  return detail::matmul_dequantized(a);
}

bool matmul_group(std::span<const MatmulArgs> products) {
  if (products.empty() || products.size() > 8) return false;
  for (const MatmulArgs& a : products) {
    if (!matmul_args_valid(a) || a.input != products[0].input || a.in_features != products[0].in_features ||
        a.num_tokens != products[0].num_tokens) {
      return false;
    }
  }
  if (detail::matmul_group_with_dot_kernels(products)) return true;
  // Mixed activation formats or no dot kernels: one product at a time.
  for (MatmulArgs a : products) {
    a.num_threads = products[0].num_threads;
    a.scratch = products[0].scratch;
    a.scratch_bytes = products[0].scratch_bytes;
    if (!matmul(a)) return false;
  }
  return true;
}

size_t matmul_scratch_bytes(GgmlType weight_type, int64_t in_features, int64_t num_tokens) {
  return detail::dot_kernels_scratch_bytes(weight_type, in_features, num_tokens);
}

bool detail::matmul_dequantized(const MatmulArgs& a) {
  if (!matmul_args_valid(a)) return false;
  const GgmlTypeTraits& traits = ggml_type_traits(a.weight_type);
  const int64_t block = traits.block_size;
  TilePlan plan;
  plan.dequantize = detail::select_dequantizer(a.weight_type);
  if (plan.dequantize == nullptr) return false;
  plan.stride = row_bytes(a);
  plan.block = block;
  plan.block_bytes = traits.bytes_per_block;
  // A chunk is whole blocks; a block larger than the chunk (never, today) becomes the chunk.
  plan.chunk = std::min(a.in_features, std::max(block, kChunkColumns / block * block));
  // The weights must sit on 2-byte boundaries for the 16-bit fields of the block types.
  if (ggml_data_alignment(a.weight_type) == 2 && reinterpret_cast<uintptr_t>(a.weight) % 2 != 0) return false;
  const int64_t num_tiles = (a.out_features + kTileRows - 1) / kTileRows;
  const int64_t work = a.in_features * a.out_features * a.num_tokens;
  const int num_threads = work >= detail::kMinParallelWork ? detail::resolve_threads(a.num_threads) : 1;

  detail::parallel_for_static(num_threads, num_tiles, [&](int64_t tile) {
    const int64_t first_row = tile * kTileRows;
    const int num_rows = static_cast<int>(std::min<int64_t>(kTileRows, a.out_features - first_row));
    matmul_tile(a, plan, first_row, num_rows, thread_buffer(static_cast<size_t>(kTileRows * plan.chunk)));
  });
  return true;
}

bool matmul_ref(const MatmulArgs& a) {
  if (!matmul_args_valid(a)) return false;
  const size_t stride = row_bytes(a);
  std::vector<float> row(static_cast<size_t>(a.in_features));
  for (int64_t o = 0; o < a.out_features; ++o) {
    if (!dequantize_row_ref(a.weight_type, static_cast<const uint8_t*>(a.weight) + o * stride, row.data(),
                            a.in_features)) {
      return false;
    }
    for (int64_t t = 0; t < a.num_tokens; ++t) {
      const float* x = a.input + t * a.in_features;
      double sum = a.bias ? a.bias[o] : 0.0;
      for (int64_t i = 0; i < a.in_features; ++i) sum += static_cast<double>(row[i]) * x[i];
      a.output[t * a.out_features + o] = static_cast<float>(sum);
    }
  }
  return true;
}

OpCost matmul_cost(const MatmulArgs& a) {
  OpCost cost;
  if (!matmul_args_valid(a)) return cost;
  const double tokens = static_cast<double>(a.num_tokens);
  cost.flops = 2.0 * tokens * static_cast<double>(a.in_features) * static_cast<double>(a.out_features);
  cost.bytes = static_cast<double>(row_bytes(a)) * static_cast<double>(a.out_features) +
               4.0 * tokens * static_cast<double>(a.in_features + a.out_features);
  if (a.bias) {
    cost.flops += tokens * static_cast<double>(a.out_features);
    cost.bytes += 4.0 * static_cast<double>(a.out_features);
  }
  return cost;
}

}  // namespace iwb
