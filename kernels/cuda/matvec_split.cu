// Q4_0, Q8_0 and Q6_K in the split layout (split_blocks_cuda.h): the one-to-eight-token product on
// int8 activations and the f16 dequantization for cuBLAS.
//
// The product gives each output row to one warp. Lane l takes blocks l, l + 32, ...: 16-byte
// loads of its quants (a warp reads 512 or 1024 contiguous bytes), one 2-byte load of the scale
// (64 contiguous bytes), and per token the block's 32 int8 activations as two 16-byte loads
// that the rows share through L1. The dot product is 8 dp4a (Q4_0: on the masked nibbles, and
// the -8 offset through 8 more on the activations, or their sums when given: on an H200 the
// extra load of a given sum made 8 tokens slower, 59 against 43 us for 4096 x 14336, and one
// token no faster, so the engine lets the kernel sum): one to two instructions per weight,
// where the GGUF-layout kernels (matvec_quant.cuh) spend two to five and stage through shared
// memory behind block-wide barriers. No shared memory, no barrier: a warp's loads of its next
// blocks do not wait for the products of the last ones, and #pragma unroll keeps four in flight.
// Q6_K takes the same shape in 32-value units (split_q6_k_row_product): in GGUF's layout its
// 210-byte blocks are only 2-byte aligned and went through the staged kernel at 1.1-1.5 TB/s
// on an H200 (2026-12-04), the slowest of the large weights.
#include "cuda_common.cuh"
#include "iwb/kernels/cuda/split_blocks_cuda.h"
#include "matvec_parts.cuh"
#include "split_q6_k.cuh"

#include <type_traits>

#include <cuda_fp16.h>

namespace iwb {
namespace {

using namespace cuda_detail;

constexpr int kRowsPerBlock = 4;  // one row per warp
constexpr int kSplitThreads = kRowsPerBlock * 32;

// One 32-value block's quants, held as the 8 words dp4a takes: lanes of value 4k..4k+3 in
// word k for the activation word k (x ints 0..7 are values 0..31).
struct SplitQ4_0 {
  static constexpr int kQuantBytes = 16;
  static constexpr int kSecondBytes = 2;  // per block in the second region: the f16 scale
  __device__ static void load(const uint8_t* __restrict__ quants, int64_t block, int (&w)[8]) {
    // Byte j of the 16 holds values j (low nibble) and j + 16 (high nibble).
    const uint4 q = __ldcs(reinterpret_cast<const uint4*>(quants) + block);
    const uint32_t words[4] = {q.x, q.y, q.z, q.w};
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      w[k] = static_cast<int>(words[k] & 0x0F0F0F0Fu);
      w[4 + k] = static_cast<int>((words[k] >> 4) & 0x0F0F0F0Fu);
    }
  }
  // sum_j (q_j - 8) x_j from sum_j q_j x_j and the activations' ints (their sum given, or summed here).
  template <bool kHasSums>
  __device__ static int offset_sum(int dot, const int (&x)[8], const int32_t* __restrict__ sum) {
    if constexpr (kHasSums) {
      return dot - 8 * __ldg(sum);
    } else {
      int sum_x = 0;
#pragma unroll
      for (int k = 0; k < 8; ++k) sum_x = __dp4a(0x01010101, x[k], sum_x);
      return dot - 8 * sum_x;
    }
  }
};

struct SplitQ8_0 {
  static constexpr int kQuantBytes = 32;
  static constexpr int kSecondBytes = 2;
  __device__ static void load(const uint8_t* __restrict__ quants, int64_t block, int (&w)[8]) {
    const uint4* q = reinterpret_cast<const uint4*>(quants) + 2 * block;
    const uint4 a = __ldcs(q), b = __ldcs(q + 1);
    w[0] = static_cast<int>(a.x), w[1] = static_cast<int>(a.y), w[2] = static_cast<int>(a.z),
    w[3] = static_cast<int>(a.w);
    w[4] = static_cast<int>(b.x), w[5] = static_cast<int>(b.y), w[6] = static_cast<int>(b.z),
    w[7] = static_cast<int>(b.w);
  }
  template <bool kHasSums>
  __device__ static int offset_sum(int dot, const int (&)[8], const int32_t*) {
    return dot;
  }
};

// Q6_K's 32-value units (split_q6_k.cuh): 16 bytes of low nibbles a unit, as Q4_0's quants, then
// the high bit pairs, the 16-value scales and the super-blocks' d's in regions of their own; its
// product is split_q6_k_row_product.
struct SplitQ6_K {
  static constexpr int kQuantBytes = 16;
  static constexpr int kSecondBytes = 8;  // per unit: the high bit pairs
};

// Each token's sum over the row's lanes, stored by lane 0 (with the bias).
template <int kMaxTokens>
__device__ __forceinline__ void store_row(const float (&acc)[kMaxTokens], int64_t out_features, int64_t row,
                                          int num_tokens, float* __restrict__ y, const float* __restrict__ bias) {
#pragma unroll
  for (int t = 0; t < kMaxTokens; ++t) {
    if (t < num_tokens) {
      const float total = warp_sum(acc[t]);
      if (threadIdx.x % 32 == 0) y[t * out_features + row] = bias != nullptr ? total + bias[row] : total;
    }
  }
}

// One output row per warp (row < out_features): the product for up to kMaxTokens tokens.
// kMaxTokens: 1 (one sequence decoding) or kSplitMaxTokens (num_tokens at run time); kHasSums:
// the activation blocks' sums are given (xs).
template <typename Unit, int kMaxTokens, bool kHasSums>
__device__ __forceinline__ void split_row_product(const uint8_t* __restrict__ weight, int64_t in_features,
                                                  int64_t out_features, int64_t row, const int8_t* __restrict__ xq,
                                                  const float* __restrict__ xd, const int32_t* __restrict__ xs,
                                                  int num_tokens, float* __restrict__ y,
                                                  const float* __restrict__ bias) {
  const int lane = static_cast<int>(threadIdx.x % 32);
  const int64_t blocks = in_features / 32;
  const uint8_t* __restrict__ quants = weight + row * blocks * Unit::kQuantBytes;
  const auto* __restrict__ scales =
      reinterpret_cast<const unsigned short*>(weight + out_features * blocks * Unit::kQuantBytes) + row * blocks;

  float acc[kMaxTokens];
#pragma unroll
  for (int t = 0; t < kMaxTokens; ++t) acc[t] = 0.0f;

#pragma unroll 4
  for (int64_t b = lane; b < blocks; b += 32) {
    int w[8];
    Unit::load(quants, b, w);
    const float dw = __half2float(__ushort_as_half(__ldcs(scales + b)));
#pragma unroll
    for (int t = 0; t < kMaxTokens; ++t) {
      if (t < num_tokens) {
        const int4* xb = reinterpret_cast<const int4*>(xq + t * in_features + b * 32);
        const int4 lo = __ldg(xb), hi = __ldg(xb + 1);  // values 0..15 and 16..31
        const int x[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
        int dot = 0;
#pragma unroll
        for (int k = 0; k < 8; ++k) dot = __dp4a(w[k], x[k], dot);
        const int sum = Unit::template offset_sum<kHasSums>(dot, x, xs + t * blocks + b);
        acc[t] += dw * __ldg(xd + t * blocks + b) * static_cast<float>(sum);
      }
    }
  }
  store_row<kMaxTokens>(acc, out_features, row, num_tokens, y, bias);
}

// split_row_product for Q6_K: lane l takes units l, l + 32, ... of the row. A unit is a 16-byte
// and an 8-byte load of its quants, a 2-byte load of its two scales and its super-block's d
// (shared by 8 lanes through L1); per token its two 16-value halves' dp4a sums, less 32 times
// the activations' sums (the values are stored + 32), each times its scale:
// d d_x (sc_0 (sum q x - 32 sum x) + sc_1 (...)), exact integers up to the float products.
template <int kMaxTokens>
__device__ __forceinline__ void split_q6_k_row_product(const uint8_t* __restrict__ weight, int64_t in_features,
                                                       int64_t out_features, int64_t row, const int8_t* __restrict__ xq,
                                                       const float* __restrict__ xd, int num_tokens,
                                                       float* __restrict__ y, const float* __restrict__ bias) {
  const int lane = static_cast<int>(threadIdx.x % 32);
  const int64_t units = in_features / 32;
  const SplitQ6KMatrix m = split_q6_k_matrix(weight, out_features, in_features);
  const int64_t first = row * units;

  float acc[kMaxTokens];
#pragma unroll
  for (int t = 0; t < kMaxTokens; ++t) acc[t] = 0.0f;

#pragma unroll 4
  for (int64_t u = lane; u < units; u += 32) {
    const int64_t unit = first + u;
    int w[8];
    q6_k_split_words(__ldcs(reinterpret_cast<const uint4*>(m.low) + unit),
                     __ldcs(reinterpret_cast<const uint2*>(m.high) + unit), w);
    const auto scale_pair = static_cast<unsigned>(__ldcs(reinterpret_cast<const unsigned short*>(m.scales) + unit));
    const int scale_low = static_cast<int8_t>(scale_pair & 0xFFu), scale_high = static_cast<int8_t>(scale_pair >> 8);
    const float d = __half2float(__ushort_as_half(__ldg(m.d + unit / 8)));
#pragma unroll
    for (int t = 0; t < kMaxTokens; ++t) {
      if (t < num_tokens) {
        const int4* xb = reinterpret_cast<const int4*>(xq + t * in_features + u * 32);
        const int4 lo = __ldg(xb), hi = __ldg(xb + 1);  // values 0..15 and 16..31
        constexpr int kOnes = 0x01010101;
        const int dot_low = __dp4a(w[0], lo.x, __dp4a(w[1], lo.y, __dp4a(w[2], lo.z, __dp4a(w[3], lo.w, 0))));
        const int dot_high = __dp4a(w[4], hi.x, __dp4a(w[5], hi.y, __dp4a(w[6], hi.z, __dp4a(w[7], hi.w, 0))));
        const int sum_low = __dp4a(kOnes, lo.x, __dp4a(kOnes, lo.y, __dp4a(kOnes, lo.z, __dp4a(kOnes, lo.w, 0))));
        const int sum_high = __dp4a(kOnes, hi.x, __dp4a(kOnes, hi.y, __dp4a(kOnes, hi.z, __dp4a(kOnes, hi.w, 0))));
        const int sum = scale_low * (dot_low - 32 * sum_low) + scale_high * (dot_high - 32 * sum_high);
        acc[t] += d * __ldg(xd + t * units + u) * static_cast<float>(sum);
      }
    }
  }
  store_row<kMaxTokens>(acc, out_features, row, num_tokens, y, bias);
}

// The row product of Unit's layout.
template <typename Unit, int kMaxTokens, bool kHasSums>
__device__ __forceinline__ void split_product(const uint8_t* __restrict__ weight, int64_t in_features,
                                              int64_t out_features, int64_t row, const int8_t* __restrict__ xq,
                                              const float* __restrict__ xd, const int32_t* __restrict__ xs,
                                              int num_tokens, float* __restrict__ y, const float* __restrict__ bias) {
  if constexpr (std::is_same_v<Unit, SplitQ6_K>) {
    split_q6_k_row_product<kMaxTokens>(weight, in_features, out_features, row, xq, xd, num_tokens, y, bias);
  } else {
    split_row_product<Unit, kMaxTokens, kHasSums>(weight, in_features, out_features, row, xq, xd, xs, num_tokens, y,
                                                  bias);
  }
}

// A thread block's rows from row0 toward L2 before the prior grid ends: the first region's bytes
// (quants; Q6_K's low nibbles), then the second's (scales; Q6_K's high bit pairs, its scales and
// d's, a thirteenth of the bytes, left to the loads).
template <typename Unit>
__device__ __forceinline__ void prefetch_split_rows(const uint8_t* __restrict__ weight, int64_t in_features,
                                                    int64_t out_features, int64_t row0) {
  const int64_t blocks = in_features / 32;
  prefetch_rows_l2(weight, blocks * Unit::kQuantBytes, row0, kRowsPerBlock, out_features);
  const uint8_t* second = weight + out_features * blocks * Unit::kQuantBytes;
  prefetch_rows_l2(second, blocks * Unit::kSecondBytes, row0, kRowsPerBlock, out_features);
}

template <typename Unit, int kMaxTokens, bool kHasSums>
__global__ void __launch_bounds__(kSplitThreads)
    matvec_split_kernel(const uint8_t* __restrict__ weight, int64_t in_features, int64_t out_features,
                        const int8_t* __restrict__ xq, const float* __restrict__ xd, const int32_t* __restrict__ xs,
                        int num_tokens, float* __restrict__ y, const float* __restrict__ bias) {
  prefetch_split_rows<Unit>(weight, in_features, out_features, static_cast<int64_t>(blockIdx.x) * kRowsPerBlock);
  cuda_detail::wait_for_prior_grids();
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + static_cast<int>(threadIdx.x / 32);
  if (row >= out_features) return;  // the whole warp: nothing below synchronises the block
  split_product<Unit, kMaxTokens, kHasSums>(weight, in_features, out_features, row, xq, xd, xs, num_tokens, y, bias);
}

// The grouped launch: each thread block finds its part (matvec_parts.cuh), then computes its
// rows as the one-matrix kernel does.
template <typename Unit, int kMaxTokens, bool kHasSums>
__global__ void __launch_bounds__(kSplitThreads)
    matvec_split_group_kernel(MatvecParts parts, int64_t in_features, const int8_t* __restrict__ xq,
                              const float* __restrict__ xd, const int32_t* __restrict__ xs, int num_tokens) {
  const MatvecPart part = select_matvec_part(parts, blockIdx.x);
  const int64_t row0 = static_cast<int64_t>(blockIdx.x - part.first_block) * kRowsPerBlock;
  prefetch_split_rows<Unit>(part.weight, in_features, part.out_features, row0);
  cuda_detail::wait_for_prior_grids();
  const int64_t row = row0 + static_cast<int>(threadIdx.x / 32);
  if (row >= part.out_features) return;  // the whole warp: nothing below synchronises the block
  split_product<Unit, kMaxTokens, kHasSums>(part.weight, in_features, part.out_features, row, xq, xd, xs, num_tokens,
                                            part.y, part.bias);
}

// One thread per 32-value block: its quants and scale to 32 f16 values (4 stores of 16 bytes).
template <typename Unit>
__global__ void dequantize_split_kernel(const uint8_t* __restrict__ weight, __half* __restrict__ out, int64_t rows,
                                        int64_t in_features) {
  cuda_detail::wait_for_prior_grids();
  const int64_t num_blocks = rows * (in_features / 32);
  const auto* scales = reinterpret_cast<const unsigned short*>(weight + num_blocks * Unit::kQuantBytes);
  const int64_t stride = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t b = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; b < num_blocks; b += stride) {
    int w[8];
    Unit::load(weight, b, w);
    const float d = __half2float(__ushort_as_half(__ldg(scales + b)));
    const int offset = Unit::kQuantBytes == 16 ? 8 : 0;
    uint32_t packed[16];
#pragma unroll
    for (int k = 0; k < 8; ++k) {  // word k: values 4k..4k+3, two f16 pairs
      auto half_bits = [&](int byte) {
        const int q = static_cast<int>(static_cast<int8_t>(static_cast<uint32_t>(w[k]) >> (8 * byte)));
        return static_cast<uint32_t>(__half_as_ushort(__float2half_rn(static_cast<float>(q - offset) * d)));
      };
      packed[2 * k] = half_bits(0) | (half_bits(1) << 16);
      packed[2 * k + 1] = half_bits(2) | (half_bits(3) << 16);
    }
    uint4* dst = reinterpret_cast<uint4*>(out + b * 32);
#pragma unroll
    for (int k = 0; k < 4; ++k)
      dst[k] = make_uint4(packed[4 * k], packed[4 * k + 1], packed[4 * k + 2], packed[4 * k + 3]);
  }
}

// One thread per 32-value unit of a split Q6_K matrix: its quants, scales and d loaded once, 32 f16
// values (4 stores of 16 bytes), each d sc (q - 32) rounded once.
__global__ void dequantize_split_q6_k_kernel(const uint8_t* __restrict__ weight, __half* __restrict__ out, int64_t rows,
                                             int64_t in_features) {
  cuda_detail::wait_for_prior_grids();
  const int64_t num_units = rows * (in_features / 32);
  const SplitQ6KMatrix m = split_q6_k_matrix(weight, rows, in_features);
  const int64_t stride = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t unit = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; unit < num_units; unit += stride) {
    int w[8];  // word k: values 4k..4k+3 as bytes
    q6_k_split_words(reinterpret_cast<const uint4*>(m.low)[unit], reinterpret_cast<const uint2*>(m.high)[unit], w);
    const int scales[2] = {m.scales[2 * unit], m.scales[2 * unit + 1]};
    const float d = __half2float(__ushort_as_half(m.d[unit / 8]));
    auto half_bits = [&](int j) {
      const int q = static_cast<int>((static_cast<uint32_t>(w[j / 4]) >> (8 * (j % 4))) & 0xFFu);
      return static_cast<uint32_t>(__half_as_ushort(__float2half_rn(q6_k_split_dequant(d, scales[j / 16], q))));
    };
    uint32_t packed[16];
#pragma unroll
    for (int j = 0; j < 32; j += 2) packed[j / 2] = half_bits(j) | (half_bits(j + 1) << 16);
    uint4* dst = reinterpret_cast<uint4*>(out + unit * 32);
#pragma unroll
    for (int k = 0; k < 4; ++k)
      dst[k] = make_uint4(packed[4 * k], packed[4 * k + 1], packed[4 * k + 2], packed[4 * k + 3]);
  }
}

template <typename Unit, bool kHasSums>
cudaError_t launch_split(const SplitMatvecArgs& a, cudaStream_t stream) {
  const auto grid = static_cast<unsigned>((a.out_features + kRowsPerBlock - 1) / kRowsPerBlock);
  const auto* w = static_cast<const uint8_t*>(a.weight);
  const int n = static_cast<int>(a.num_tokens);
  auto* kernel = n == 1 ? matvec_split_kernel<Unit, 1, kHasSums>
                        : matvec_split_kernel<Unit, static_cast<int>(kSplitMaxTokens), kHasSums>;
  IWB_LAUNCH(kernel, grid, kSplitThreads, 0, stream, w, a.in_features, a.out_features, a.x_q8, a.x_q8_scale, a.x_q8_sum,
             n, a.y, a.bias);
  return cudaGetLastError();
}

template <typename Unit, bool kHasSums>
cudaError_t launch_split_group(const SplitMatvecArgs* args, int count, cudaStream_t stream) {
  MatvecParts parts{};
  unsigned blocks = 0;
  for (int p = 0; p < count; ++p) {
    const auto rows = static_cast<unsigned>((args[p].out_features + kRowsPerBlock - 1) / kRowsPerBlock);
    blocks = parts.add(args[p].weight, args[p].out_features, args[p].y, args[p].bias, rows, blocks);
  }
  const SplitMatvecArgs& a = args[0];
  const int n = static_cast<int>(a.num_tokens);
  auto* kernel = n == 1 ? matvec_split_group_kernel<Unit, 1, kHasSums>
                        : matvec_split_group_kernel<Unit, static_cast<int>(kSplitMaxTokens), kHasSums>;
  IWB_LAUNCH(kernel, blocks, kSplitThreads, 0, stream, parts, a.in_features, a.x_q8, a.x_q8_scale, a.x_q8_sum, n);
  return cudaGetLastError();
}

}  // namespace

cudaError_t matvec_split_check(const SplitMatvecArgs& a) {
  const bool is_ok = has_split_blocks(a.type) && a.weight != nullptr && a.x_q8 != nullptr && a.x_q8_scale != nullptr &&
                     a.y != nullptr && a.in_features > 0 && a.in_features % 32 == 0 && a.out_features > 0 &&
                     a.num_tokens >= 1 && a.num_tokens <= kSplitMaxTokens && is_aligned(a.weight, 16) &&
                     is_aligned(a.x_q8, 16) && is_aligned(a.x_q8_scale, 4) && is_aligned(a.x_q8_sum, 4) &&
                     is_aligned(a.y, 4) && (a.bias == nullptr || is_aligned(a.bias, 4)) &&
                     a.out_features <= kMaxGridX * kRowsPerBlock &&
                     (a.type != GgmlType::Q6_K || a.in_features % 256 == 0);
  return is_ok ? cudaSuccess : cudaErrorInvalidValue;
}

cudaError_t matvec_split_cuda(const SplitMatvecArgs& a, cudaStream_t stream) {
  if (const cudaError_t e = matvec_split_check(a); e != cudaSuccess) return e;
  if (a.type == GgmlType::Q8_0) return launch_split<SplitQ8_0, false>(a, stream);
  if (a.type == GgmlType::Q6_K) return launch_split<SplitQ6_K, false>(a, stream);
  return a.x_q8_sum != nullptr ? launch_split<SplitQ4_0, true>(a, stream) : launch_split<SplitQ4_0, false>(a, stream);
}

static_assert(kSplitMaxParts <= kMaxMatvecParts);

cudaError_t matvec_split_group_cuda(const SplitMatvecArgs* parts, int count, cudaStream_t stream) {
  if (parts == nullptr || count < 1 || count > kSplitMaxParts) return cudaErrorInvalidValue;
  const SplitMatvecArgs& first = parts[0];
  int64_t blocks = 0;
  for (int i = 0; i < count; ++i) {
    const SplitMatvecArgs& p = parts[i];
    if (const cudaError_t e = matvec_split_check(p); e != cudaSuccess) return e;
    if (p.type != first.type || p.in_features != first.in_features || p.x_q8 != first.x_q8 ||
        p.x_q8_scale != first.x_q8_scale || p.x_q8_sum != first.x_q8_sum || p.num_tokens != first.num_tokens) {
      return cudaErrorInvalidValue;
    }
    blocks += (p.out_features + kRowsPerBlock - 1) / kRowsPerBlock;
  }
  if (blocks > kMaxGridX) return cudaErrorInvalidValue;
  if (first.type == GgmlType::Q8_0) return launch_split_group<SplitQ8_0, false>(parts, count, stream);
  if (first.type == GgmlType::Q6_K) return launch_split_group<SplitQ6_K, false>(parts, count, stream);
  return first.x_q8_sum != nullptr ? launch_split_group<SplitQ4_0, true>(parts, count, stream)
                                   : launch_split_group<SplitQ4_0, false>(parts, count, stream);
}

cudaError_t dequantize_split_f16_cuda(GgmlType type, const void* weight, uint16_t* out, int64_t rows,
                                      int64_t in_features, cudaStream_t stream) {
  if (!has_split_blocks(type) || weight == nullptr || out == nullptr || rows <= 0 || in_features <= 0 ||
      in_features % (type == GgmlType::Q6_K ? 256 : 32) != 0 || !is_aligned(weight, 16) || !is_aligned(out, 16)) {
    return cudaErrorInvalidValue;
  }
  const int64_t num_blocks = rows * (in_features / 32);
  const auto* w = static_cast<const uint8_t*>(weight);
  auto* o = reinterpret_cast<__half*>(out);
  if (type == GgmlType::Q6_K) {
    IWB_LAUNCH(dequantize_split_q6_k_kernel, grid_for(num_blocks, 256), 256, 0, stream, w, o, rows, in_features);
  } else if (type == GgmlType::Q4_0) {
    auto* kernel = dequantize_split_kernel<SplitQ4_0>;
    IWB_LAUNCH(kernel, grid_for(num_blocks, 256), 256, 0, stream, w, o, rows, in_features);
  } else {
    auto* kernel = dequantize_split_kernel<SplitQ8_0>;
    IWB_LAUNCH(kernel, grid_for(num_blocks, 256), 256, 0, stream, w, o, rows, in_features);
  }
  return cudaGetLastError();
}

}  // namespace iwb
