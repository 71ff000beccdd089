// Mixture-of-experts kernels (iwb/kernels/cuda/experts_cuda.h): top-k routing, one product per
// routed row through matvec_quant.cuh's staged kernel body, and the weighted sum.
#include "cuda_common.cuh"
#include "iwb/kernels/cuda/experts_cuda.h"
#include "iwb/kernels/cuda/matvec_cuda.h"
#include "matvec_quant.cuh"

#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>

namespace iwb {
namespace cuda_experts {

using cuda_matvec::kTileBytes;
using cuda_matvec::smem_u16;

// ---- Routing: one warp per token, its scores in shared memory.

inline constexpr int kRouteWarps = 4;

// The better of two candidates (score, expert; expert -1: none): the higher score, ties to the
// lower expert, as CpuExperts' sort. A NaN score never wins over a candidate.
__device__ __forceinline__ bool is_better(float score, int expert, float best, int best_expert) {
  if (expert < 0) return false;
  if (best_expert < 0) return true;
  return score > best || (score == best && expert < best_expert);
}

__global__ void __launch_bounds__(32 * kRouteWarps) route_experts_kernel(RouteExpertsCudaArgs a) {
  __shared__ float scores[kRouteWarps][kCudaMaxExperts];     // what the weights are taken from
  __shared__ float selection[kRouteWarps][kCudaMaxExperts];  // what the choice is made by
  __shared__ unsigned char taken[kRouteWarps][kCudaMaxExperts];
  cuda_detail::wait_for_prior_grids();
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  const int64_t t = static_cast<int64_t>(blockIdx.x) * kRouteWarps + warp;
  if (t >= a.num_tokens) return;  // the whole warp: no block-wide barrier follows
  const int num_experts = static_cast<int>(a.num_experts), k = static_cast<int>(a.num_used);
  const float* row = a.logits + t * a.num_experts;
  float* s = scores[warp];
  float* sel = selection[warp];
  int finite = 1;
  float top = -INFINITY;
  for (int e = lane; e < num_experts; e += 32) {
    const float v = row[e];
    finite &= isfinite(v) ? 1 : 0;
    top = fmaxf(top, v);
    s[e] = v;
    taken[warp][e] = 0;
  }
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) {
    finite &= __shfl_xor_sync(cuda_detail::kFullMask, finite, offset);
    top = fmaxf(top, __shfl_xor_sync(cuda_detail::kFullMask, top, offset));
  }
  if (a.gating == ExpertGating::Softmax) {
    float sum = 0.0f;
    for (int e = lane; e < num_experts; e += 32) sum += (s[e] = expf(s[e] - top));
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) sum += __shfl_xor_sync(cuda_detail::kFullMask, sum, offset);
    for (int e = lane; e < num_experts; e += 32) s[e] /= sum;
  } else if (a.gating == ExpertGating::Sigmoid) {
    for (int e = lane; e < num_experts; e += 32) s[e] = 1.0f / (1.0f + expf(-s[e]));
  }  // SoftmaxOverTopK: chosen by logit, the softmax over the k below
  for (int e = lane; e < num_experts; e += 32)
    sel[e] = s[e] + (a.selection_bias != nullptr ? a.selection_bias[e] : 0.0f);
  __syncwarp();
  int32_t* choice = a.choice + t * k;
  for (int j = 0; j < k; ++j) {
    float best = 0.0f;
    int best_expert = -1;
    for (int e = lane; e < num_experts; e += 32) {
      if (!taken[warp][e] && is_better(sel[e], e, best, best_expert)) {
        best = sel[e];
        best_expert = e;
      }
    }
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) {
      const float other = __shfl_xor_sync(cuda_detail::kFullMask, best, offset);
      const int other_expert = __shfl_xor_sync(cuda_detail::kFullMask, best_expert, offset);
      if (is_better(other, other_expert, best, best_expert)) {
        best = other;
        best_expert = other_expert;
      }
    }
    if (lane == 0) {
      choice[j] = best_expert;
      taken[warp][best_expert] = 1;
      if (a.counts != nullptr) atomicAdd(&a.counts[best_expert], 1);
    }
    __syncwarp();
  }
  if (lane != 0) return;
  // The weights, serially in the CPU's order.
  float* w = a.weight + t * k;
  float chosen_sum = 0.0f;
  for (int j = 0; j < k; ++j) chosen_sum += (w[j] = s[choice[j]]);
  if (a.gating == ExpertGating::SoftmaxOverTopK) {
    float most = w[0];
    for (int j = 1; j < k; ++j) most = fmaxf(most, w[j]);
    float sum = 0.0f;
    for (int j = 0; j < k; ++j) sum += (w[j] = expf(w[j] - most));
    for (int j = 0; j < k; ++j) w[j] *= 1.0f / sum;
  }
  if (a.is_normalized) {
    const float divisor = fmaxf(chosen_sum, 6.103515625e-5f);
    for (int j = 0; j < k; ++j) w[j] /= divisor;
  }
  if (a.weights_scale != 1.0f) {
    for (int j = 0; j < k; ++j) w[j] *= a.weights_scale;
  }
  if (!finite) {
    for (int j = 0; j < k; ++j) w[j] = NAN;
  }
}

// ---- Products: the float types as 8-value "blocks" of matvec_quant.cuh's staged kernel.

template <int kElementBytes>
struct UnitFloat8 {
  static constexpr int kBlockBytes = 8 * kElementBytes, kBlockValues = 8, kPiecesPerBlock = 1;
  static constexpr bool kSplitHalves = false;
  __device__ static void decode(const uint8_t* block, int, float w[8]) {
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      if constexpr (kElementBytes == 4) {
        w[i] = *reinterpret_cast<const float*>(block + 4 * i);
      } else {
        w[i] = cuda_matvec::fp16_bits_to_float(smem_u16(block + 2 * i));
      }
    }
  }
};
struct UnitBF16x8 {
  static constexpr int kBlockBytes = 16, kBlockValues = 8, kPiecesPerBlock = 1;
  static constexpr bool kSplitHalves = false;
  __device__ static void decode(const uint8_t* block, int, float w[8]) {
#pragma unroll
    for (int i = 0; i < 8; ++i) w[i] = __uint_as_float(smem_u16(block + 2 * i) << 16);
  }
};

// MXFP4 (gpt-oss's experts): 17-byte blocks, an E8M0 exponent then 16 bytes of E2M1 codes
// in Q4_0's nibble order; value = kMxfp4Values[code] * e8m0_to_f32_half(e), as the CPU's
// dequantize_mxfp4. The blocks are byte aligned, so the codes are read byte by byte.
struct UnitMxfp4 {
  static constexpr int kBlockBytes = sizeof(BlockMxfp4), kBlockValues = kQKMxfp4, kPiecesPerBlock = 4;
  static constexpr bool kSplitHalves = true;
  // kMxfp4Values (0, 1, 2, 3, 4, 6, 8, 12, then the same negated) without a table in device memory.
  __device__ static float value(uint32_t code) {
    const uint32_t m = code & 7u;
    const int magnitude = m < 4 ? static_cast<int>(m) : (4 + 2 * static_cast<int>(m & 1u)) << ((m >> 1) - 2);
    return static_cast<float>((code & 8u) != 0 ? -magnitude : magnitude);
  }
  __device__ static void decode(const uint8_t* block, int p, float w[8]) {
    const float d = e8m0_to_f32_half(block[0]);
#pragma unroll
    for (int b = 0; b < 4; ++b) {
      const uint32_t q = block[1 + 4 * p + b];
      w[b] = value(q & 0x0Fu) * d;
      w[4 + b] = value(q >> 4) * d;
    }
  }
};

inline constexpr int kRows = kMatvecRowsPerBlock;

// Thread block (x, y): output rows 2x, 2x + 1 of routed row first_routed + y, whose expert is
// choice[that row] (read after the routing kernel's writes are visible).
template <typename Unit, int kLoadBytes>
__global__ void __launch_bounds__(kMatvecThreads)
    expert_matvec_kernel(const uint8_t* __restrict__ weights, uint64_t expert_stride, int64_t num_experts,
                         int64_t row_bytes, int64_t in_features, int64_t out_features,
                         const int32_t* __restrict__ choice, int64_t first_routed, const float* __restrict__ x,
                         int64_t x_row_divisor, float* __restrict__ y, const float* __restrict__ bias) {
  __shared__ __align__(16) uint8_t tile[kRows * kTileBytes<Unit>];
  cuda_detail::wait_for_prior_grids();
  const int64_t r = first_routed + blockIdx.y;
  int64_t e = choice[r];
  if (e < 0 || e >= num_experts) e = 0;  // never from route_experts_cuda; keeps a bad id inside the weights
  const int64_t row0 = static_cast<int64_t>(blockIdx.x) * kRows;
  cuda_matvec::matvec_quant_rows<Unit, kLoadBytes, 1, kRows>(
      tile, weights + static_cast<uint64_t>(e) * expert_stride, row_bytes, in_features, out_features, row0,
      x + (r / x_row_divisor) * in_features, 1, y + r * out_features,
      bias != nullptr ? bias + e * out_features : nullptr);
}

// Thread block (x, y): output rows 2x, 2x + 1 of group first_group + y (past the step's groups:
// nothing), up to kCudaExpertGroupRows contiguous rows of one expert.
template <typename Unit, int kLoadBytes>
__global__ void __launch_bounds__(kMatvecThreads)
    expert_group_matvec_kernel(const uint8_t* __restrict__ weights, uint64_t expert_stride, int64_t num_experts,
                               int64_t row_bytes, int64_t in_features, int64_t out_features,
                               const int32_t* __restrict__ groups, const int32_t* __restrict__ num_groups,
                               int64_t first_group, const float* __restrict__ x, float* __restrict__ y,
                               const float* __restrict__ bias) {
  constexpr int kGroupRows = static_cast<int>(kCudaExpertGroupRows);
  static_assert(kGroupRows == kCudaMatvecMaxTokens, "a group is one several-token product");
  __shared__ __align__(16) uint8_t tile[kRows * kTileBytes<Unit>];
  cuda_detail::wait_for_prior_grids();
  const int64_t g = first_group + blockIdx.y;
  if (g >= *num_groups) return;  // the whole block
  int64_t e = groups[3 * g];
  if (e < 0 || e >= num_experts) e = 0;
  const int64_t first = groups[3 * g + 1];
  const int count = groups[3 * g + 2];
  const int64_t row0 = static_cast<int64_t>(blockIdx.x) * kRows;
  cuda_matvec::matvec_quant_rows<Unit, kLoadBytes, kGroupRows, kRows>(
      tile, weights + static_cast<uint64_t>(e) * expert_stride, row_bytes, in_features, out_features, row0,
      x + first * in_features, count, y + first * out_features, bias != nullptr ? bias + e * out_features : nullptr);
}

template <typename Unit, int kLoadBytes>
cudaError_t launch_expert_group_variant(const ExpertMatvecCudaArgs& a, int64_t row_bytes, cudaStream_t stream) {
  const auto kernel = expert_group_matvec_kernel<Unit, kLoadBytes>;
  const auto row_blocks = static_cast<unsigned>((a.out_features + kRows - 1) / kRows);
  for (int64_t first = 0; first < a.max_groups; first += cuda_detail::kMaxGridYZ) {
    const auto count = static_cast<unsigned>(std::min<int64_t>(cuda_detail::kMaxGridYZ, a.max_groups - first));
    IWB_LAUNCH(kernel, dim3(row_blocks, count), dim3(kMatvecThreads), 0, stream, static_cast<const uint8_t*>(a.weights),
               a.expert_stride, a.num_experts, row_bytes, a.in_features, a.out_features, a.groups, a.num_groups, first,
               a.x, a.y, a.bias);
    if (const cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
  }
  return cudaSuccess;
}

template <typename Unit, int kLoadBytes>
cudaError_t launch_expert_variant(const ExpertMatvecCudaArgs& a, int64_t row_bytes, cudaStream_t stream) {
  if (a.groups != nullptr) return launch_expert_group_variant<Unit, kLoadBytes>(a, row_bytes, stream);
  const auto kernel = expert_matvec_kernel<Unit, kLoadBytes>;
  const auto row_blocks = static_cast<unsigned>((a.out_features + kRows - 1) / kRows);
  for (int64_t first = 0; first < a.num_routed; first += cuda_detail::kMaxGridYZ) {
    const auto count = static_cast<unsigned>(std::min<int64_t>(cuda_detail::kMaxGridYZ, a.num_routed - first));
    IWB_LAUNCH(kernel, dim3(row_blocks, count), dim3(kMatvecThreads), 0, stream, static_cast<const uint8_t*>(a.weights),
               a.expert_stride, a.num_experts, row_bytes, a.in_features, a.out_features, a.choice, first, a.x,
               a.x_row_divisor, a.y, a.bias);
    if (const cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
  }
  return cudaSuccess;
}

template <typename Unit>
cudaError_t launch_expert_matvec(const ExpertMatvecCudaArgs& a, int64_t row_bytes, int load_bytes,
                                 cudaStream_t stream) {
  switch (load_bytes) {
    case 16: return launch_expert_variant<Unit, 16>(a, row_bytes, stream);
    case 4: return launch_expert_variant<Unit, 4>(a, row_bytes, stream);
    case 2: return launch_expert_variant<Unit, 2>(a, row_bytes, stream);
    case 1: return launch_expert_variant<Unit, 1>(a, row_bytes, stream);
    default: return cudaErrorInvalidValue;
  }
}

// ---- Grouping: counts per expert, the group table, then each expert's rows in token order.

inline constexpr int kGroupThreads = static_cast<int>(kCudaMaxExperts);  // a thread per expert

__global__ void __launch_bounds__(kGroupThreads) group_expert_rows_kernel(ExpertGroupsCudaArgs a) {
  __shared__ int counts[kCudaMaxExperts];
  __shared__ int next_row[kCudaMaxExperts];
  __shared__ int chunk[kGroupThreads];
  cuda_detail::wait_for_prior_grids();
  const int tid = static_cast<int>(threadIdx.x);
  const int num_experts = static_cast<int>(a.num_experts);
  const auto expert_of = [&](int64_t r) {
    const int e = a.choice[r];
    return e >= 0 && e < num_experts ? e : 0;  // as the products read it
  };
  if (tid < num_experts) counts[tid] = 0;
  __syncthreads();
  for (int64_t r = tid; r < a.num_routed; r += kGroupThreads) atomicAdd(&counts[expert_of(r)], 1);
  __syncthreads();
  if (tid == 0) {
    int row = 0, g = 0;
    for (int e = 0; e < num_experts; ++e) {
      next_row[e] = row;
      for (int s = 0; s < counts[e]; s += static_cast<int>(kCudaExpertGroupRows)) {
        a.groups[3 * g] = e;
        a.groups[3 * g + 1] = row + s;
        const int rows = counts[e] - s;
        a.groups[3 * g + 2] =
            rows < static_cast<int>(kCudaExpertGroupRows) ? rows : static_cast<int>(kCudaExpertGroupRows);
        ++g;
      }
      row += counts[e];
    }
    *a.num_groups = g;
  }
  // Thread e places expert e's rows, a chunk of routed rows at a time through shared memory.
  for (int64_t base = 0; base < a.num_routed; base += kGroupThreads) {
    __syncthreads();
    if (base + tid < a.num_routed) chunk[tid] = expert_of(base + tid);
    __syncthreads();
    if (tid < num_experts) {
      const int n = static_cast<int>(a.num_routed - base < kGroupThreads ? a.num_routed - base : kGroupThreads);
      for (int i = 0; i < n; ++i) {
        if (chunk[i] != tid) continue;
        const int p = next_row[tid]++;
        a.position[base + i] = p;
        a.source_row[p] = static_cast<int32_t>((base + i) / a.x_row_divisor);
      }
    }
  }
}

// ---- The weighted sum: a thread per output value, the experts in their order.

inline constexpr int kCombineThreads = 128;

__global__ void __launch_bounds__(kCombineThreads)
    combine_experts_kernel(CombineExpertsCudaArgs a, int64_t width_blocks) {
  cuda_detail::wait_for_prior_grids();
  const int64_t t = static_cast<int64_t>(blockIdx.x) / width_blocks;
  const int64_t i = (static_cast<int64_t>(blockIdx.x) % width_blocks) * kCombineThreads + threadIdx.x;
  if (i >= a.width) return;
  float* y = a.y + t * a.width + i;
  float sum = a.is_accumulating ? *y : 0.0f;
  for (int64_t j = 0; j < a.num_used; ++j) {
    const int64_t r = t * a.num_used + j;
    const float w = a.weight[r] * (a.expert_scales != nullptr ? a.expert_scales[a.choice[r]] : 1.0f);
    const int64_t row = a.expert_rows != nullptr ? a.expert_rows[r] : r;
    sum += w * a.expert_out[row * a.width + i];
  }
  *y = sum;
}

// Every pointer 4-byte aligned (null counts as aligned: an optional argument left out).
template <typename... Pointers>
bool are_aligned_4(const Pointers*... pointers) {
  return (cuda_detail::is_aligned(pointers, 4) && ...);
}

}  // namespace cuda_experts

cudaError_t route_experts_cuda_check(const RouteExpertsCudaArgs& a) {
  if (a.logits == nullptr || a.choice == nullptr || a.weight == nullptr) return cudaErrorInvalidValue;
  if (a.num_tokens < 0 || a.num_tokens > (int64_t{1} << 31) / 2) return cudaErrorInvalidValue;
  if (a.num_experts < 1 || a.num_experts > kCudaMaxExperts) return cudaErrorInvalidValue;
  if (a.num_used < 1 || a.num_used > std::min(a.num_experts, kCudaMaxExpertsUsed)) return cudaErrorInvalidValue;
  if (!cuda_experts::are_aligned_4(a.logits, a.choice, a.weight, a.selection_bias, a.counts)) {
    return cudaErrorInvalidValue;
  }
  return cudaSuccess;
}

cudaError_t route_experts_cuda(const RouteExpertsCudaArgs& a, cudaStream_t stream) {
  if (const cudaError_t e = route_experts_cuda_check(a); e != cudaSuccess) return e;
  if (a.num_tokens == 0) return cudaSuccess;
  const auto blocks = static_cast<unsigned>((a.num_tokens + cuda_experts::kRouteWarps - 1) / cuda_experts::kRouteWarps);
  IWB_LAUNCH(cuda_experts::route_experts_kernel, dim3(blocks), dim3(32 * cuda_experts::kRouteWarps), 0, stream, a);
  return cudaGetLastError();
}

cudaError_t group_expert_rows_cuda_check(const ExpertGroupsCudaArgs& a) {
  if (a.choice == nullptr || a.position == nullptr || a.source_row == nullptr || a.groups == nullptr ||
      a.num_groups == nullptr) {
    return cudaErrorInvalidValue;
  }
  if (a.num_routed < 0 || a.num_routed > (int64_t{1} << 30) || a.num_experts < 1 || a.num_experts > kCudaMaxExperts ||
      a.x_row_divisor < 1 || a.max_groups < cuda_expert_max_groups(a.num_routed, a.num_experts)) {
    return cudaErrorInvalidValue;
  }
  if (!cuda_experts::are_aligned_4(a.choice, a.position, a.source_row, a.groups, a.num_groups)) {
    return cudaErrorInvalidValue;
  }
  return cudaSuccess;
}

cudaError_t group_expert_rows_cuda(const ExpertGroupsCudaArgs& a, cudaStream_t stream) {
  if (const cudaError_t e = group_expert_rows_cuda_check(a); e != cudaSuccess) return e;
  IWB_LAUNCH(cuda_experts::group_expert_rows_kernel, dim3(1), dim3(cuda_experts::kGroupThreads), 0, stream, a);
  return cudaGetLastError();
}

bool cuda_expert_matvec_supports(GgmlType type) { return cuda_matvec_supports(type) || type == GgmlType::MXFP4; }

namespace {

// The widest load (16, 4, 2 bytes; MXFP4's byte-aligned blocks also 1) that divides the
// weights' base, every expert's offset and the row length, so every staged tile starts aligned;
// 0 if none does.
int expert_load_bytes(const ExpertMatvecCudaArgs& a, int64_t row_bytes) {
  const auto base = reinterpret_cast<uintptr_t>(a.weights);
  for (const int width : {16, 4, 2, 1}) {
    if (width == 1 && a.type != GgmlType::MXFP4) break;
    const auto w = static_cast<uint64_t>(width);
    if (base % w == 0 && a.expert_stride % w == 0 && static_cast<uint64_t>(row_bytes) % w == 0) return width;
  }
  return 0;
}

}  // namespace

cudaError_t expert_matvec_cuda_check(const ExpertMatvecCudaArgs& a) {
  if (!cuda_expert_matvec_supports(a.type)) return cudaErrorInvalidValue;
  constexpr int64_t kMaxDim = int64_t{1} << 30;
  if (a.in_features <= 0 || a.out_features <= 0 || a.in_features > kMaxDim || a.out_features > kMaxDim ||
      a.in_features % 8 != 0 || a.in_features % ggml_type_traits(a.type).block_size != 0) {
    return cudaErrorInvalidValue;
  }
  if (a.num_experts < 1 || a.num_routed < 0 || a.num_routed > kMaxDim || a.x_row_divisor < 1) {
    return cudaErrorInvalidValue;
  }
  const bool is_grouped = a.groups != nullptr;
  if (a.weights == nullptr || (!is_grouped && a.choice == nullptr) || a.x == nullptr || a.y == nullptr) {
    return cudaErrorInvalidValue;
  }
  if (is_grouped && (a.num_groups == nullptr || a.x_row_divisor != 1 || a.max_groups < 0 || a.max_groups > kMaxDim)) {
    return cudaErrorInvalidValue;
  }
  const auto row_bytes = static_cast<int64_t>(ggml_row_bytes(a.type, a.in_features).value_or(0));
  if (a.expert_stride < static_cast<uint64_t>(row_bytes * a.out_features)) return cudaErrorInvalidValue;
  if (expert_load_bytes(a, row_bytes) == 0 || !cuda_detail::is_aligned(a.x, 16) ||
      !cuda_experts::are_aligned_4(a.y, a.choice, a.bias, a.groups, a.num_groups)) {
    return cudaErrorInvalidValue;
  }
  // x rows read and y rows written must not share a byte.
  const auto x_begin = reinterpret_cast<uintptr_t>(a.x), y_begin = reinterpret_cast<uintptr_t>(a.y);
  const uintptr_t x_end =
      x_begin + static_cast<uintptr_t>((a.num_routed + a.x_row_divisor - 1) / a.x_row_divisor * a.in_features * 4);
  const uintptr_t y_end = y_begin + static_cast<uintptr_t>(a.num_routed * a.out_features * 4);
  if (a.num_routed > 0 && x_begin < y_end && y_begin < x_end) return cudaErrorInvalidValue;
  return cudaSuccess;
}

cudaError_t expert_matvec_cuda(const ExpertMatvecCudaArgs& a, cudaStream_t stream) {
  if (const cudaError_t e = expert_matvec_cuda_check(a); e != cudaSuccess) return e;
  if (a.num_routed == 0) return cudaSuccess;
  const auto row_bytes = static_cast<int64_t>(ggml_row_bytes(a.type, a.in_features).value_or(0));
  const int load = expert_load_bytes(a, row_bytes);
  using namespace cuda_matvec;
  using cuda_experts::launch_expert_matvec;
  switch (a.type) {
    case GgmlType::F32: return launch_expert_matvec<cuda_experts::UnitFloat8<4>>(a, row_bytes, load, stream);
    case GgmlType::F16: return launch_expert_matvec<cuda_experts::UnitFloat8<2>>(a, row_bytes, load, stream);
    case GgmlType::BF16: return launch_expert_matvec<cuda_experts::UnitBF16x8>(a, row_bytes, load, stream);
    case GgmlType::Q4_0: return launch_expert_matvec<UnitQ4_0>(a, row_bytes, load, stream);
    case GgmlType::Q4_1: return launch_expert_matvec<UnitQ4_1>(a, row_bytes, load, stream);
    case GgmlType::Q5_0: return launch_expert_matvec<UnitQ5<false>>(a, row_bytes, load, stream);
    case GgmlType::Q5_1: return launch_expert_matvec<UnitQ5<true>>(a, row_bytes, load, stream);
    case GgmlType::Q8_0: return launch_expert_matvec<UnitQ8_0>(a, row_bytes, load, stream);
    case GgmlType::Q4_K: return launch_expert_matvec<UnitK45<false>>(a, row_bytes, load, stream);
    case GgmlType::Q5_K: return launch_expert_matvec<UnitK45<true>>(a, row_bytes, load, stream);
    case GgmlType::Q6_K: return launch_expert_matvec<UnitQ6_K>(a, row_bytes, load, stream);
    case GgmlType::MXFP4: return launch_expert_matvec<cuda_experts::UnitMxfp4>(a, row_bytes, load, stream);
    default: return cudaErrorInvalidValue;
  }
}

cudaError_t combine_experts_cuda_check(const CombineExpertsCudaArgs& a) {
  if (a.expert_out == nullptr || a.choice == nullptr || a.weight == nullptr || a.y == nullptr) {
    return cudaErrorInvalidValue;
  }
  if (a.num_tokens < 0 || a.num_used < 1 || a.width < 1 || a.num_used > kCudaMaxExpertsUsed) {
    return cudaErrorInvalidValue;
  }
  const int64_t width_blocks = (a.width + cuda_experts::kCombineThreads - 1) / cuda_experts::kCombineThreads;
  if (a.num_tokens * width_blocks > cuda_detail::kMaxGridX) return cudaErrorInvalidValue;
  if (!cuda_experts::are_aligned_4(a.expert_out, a.choice, a.weight, a.expert_scales, a.expert_rows, a.y)) {
    return cudaErrorInvalidValue;
  }
  return cudaSuccess;
}

cudaError_t combine_experts_cuda(const CombineExpertsCudaArgs& a, cudaStream_t stream) {
  if (const cudaError_t e = combine_experts_cuda_check(a); e != cudaSuccess) return e;
  if (a.num_tokens == 0) return cudaSuccess;
  const int64_t width_blocks = (a.width + cuda_experts::kCombineThreads - 1) / cuda_experts::kCombineThreads;
  IWB_LAUNCH(cuda_experts::combine_experts_kernel, dim3(static_cast<unsigned>(a.num_tokens * width_blocks)),
             dim3(cuda_experts::kCombineThreads), 0, stream, a, width_blocks);
  return cudaGetLastError();
}

}  // namespace iwb
