// Token selection on the GPU (sampling_cuda.h). One thread block per logits row.
// argmax: a strided scan per thread, then a (value, index) reduction that prefers the lower index.
// sampling: order-preserving 32-bit keys of the logits, a 4-pass radix select (8 bits a pass)
// finds the k-th largest key T; tokens above T and the lowest-index ties at T are gathered
// (at most 128), sorted in shared memory by (logit desc, id asc), and one thread applies top-p,
// min-p and the temperature and draws with the row's uniform number, as Sampler does on the CPU.
#include "iwb/kernels/cuda/sampling_cuda.h"

#include "cuda_common.cuh"

namespace iwb {
namespace {

using namespace cuda_detail;

constexpr int kThreads = 1024;
constexpr int kMaxK = kCudaSamplingMaxTopK;

struct Best {
  float value;
  int32_t index;  // -1: nothing yet
};

// a before b: larger value, then lower index; NaN never wins.
__device__ inline bool is_better(const Best& a, const Best& b) {
  if (a.index < 0) return false;
  if (b.index < 0) return true;
  return a.value > b.value || (a.value == b.value && a.index < b.index);
}

__device__ Best block_argmax(const float* row, int64_t n) {
  __shared__ Best warp_best[32];
  Best best{0.0f, -1};
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    const float v = row[i];
    const Best candidate{v, static_cast<int32_t>(i)};
    if (!isnan(v) && is_better(candidate, best)) best = candidate;
  }
  for (int offset = 16; offset > 0; offset >>= 1) {
    const Best other{__shfl_xor_sync(kFullMask, best.value, offset), __shfl_xor_sync(kFullMask, best.index, offset)};
    if (is_better(other, best)) best = other;
  }
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  __syncthreads();
  if (lane == 0) warp_best[warp] = best;
  __syncthreads();
  best = lane < static_cast<int>(blockDim.x / 32) ? warp_best[lane] : Best{0.0f, -1};
  for (int offset = 16; offset > 0; offset >>= 1) {
    const Best other{__shfl_xor_sync(kFullMask, best.value, offset), __shfl_xor_sync(kFullMask, best.index, offset)};
    if (is_better(other, best)) best = other;
  }
  return best;  // the same in every thread
}

__global__ void __launch_bounds__(kThreads) argmax_kernel(const float* __restrict__ logits, int64_t num_rows,
                                                          int64_t row_length, int32_t* __restrict__ tokens) {
  cuda_detail::wait_for_prior_grids();
  for (int64_t r = blockIdx.x; r < num_rows; r += gridDim.x) {
    const Best best = block_argmax(logits + r * row_length, row_length);
    if (threadIdx.x == 0) tokens[r] = best.index;
  }
}

// Larger float -> larger key; 0 for inf and NaN (the CPU drops non-finite logits), and -0 and
// +0 share a key (they compare equal on the CPU).
__device__ inline uint32_t order_key(float x) {
  if (!isfinite(x)) return 0u;
  const uint32_t bits = x == 0.0f ? 0u : __float_as_uint(x);
  return (bits & 0x80000000u) ? ~bits : (bits | 0x80000000u);
}

__device__ inline bool candidate_before(float va, int32_t ia, float vb, int32_t ib) {
  return va > vb || (va == vb && ia < ib);
}

__global__ void __launch_bounds__(kThreads)
    sample_kernel(const float* __restrict__ logits, int64_t num_rows, int64_t vocab_size,
                  const SamplingRowParams* __restrict__ params, const float* __restrict__ uniforms,
                  int32_t* __restrict__ tokens) {
  cuda_detail::wait_for_prior_grids();
  __shared__ uint32_t histogram[256];
  __shared__ int warp_totals[32];
  __shared__ float cand_value[kMaxK], sorted_value[kMaxK];
  __shared__ int32_t cand_index[kMaxK], sorted_index[kMaxK];
  __shared__ uint32_t threshold_prefix, threshold_mask;
  __shared__ int remaining_at_threshold, num_above;
  const int tid = static_cast<int>(threadIdx.x);

  for (int64_t r = blockIdx.x; r < num_rows; r += gridDim.x) {
    const float* row = logits + r * vocab_size;
    const SamplingRowParams sp = params[r];
    if (sp.temperature <= 0.0f) {
      const Best best = block_argmax(row, vocab_size);
      if (tid == 0) tokens[r] = best.index;
      __syncthreads();
      continue;
    }
    const int k_requested = sp.top_k >= 1 && sp.top_k <= kMaxK ? sp.top_k : kMaxK;

    // How many finite logits; with no more than k, every one is a candidate (threshold key 1).
    int my_finite = 0;
    for (int64_t i = tid; i < vocab_size; i += kThreads) my_finite += order_key(row[i]) != 0u ? 1 : 0;
    // A float sum of counts is exact below 2^24 (vocabularies are far smaller).
    const int num_finite = static_cast<int>(block_sum(static_cast<float>(my_finite)));
    if (num_finite == 0) {
      if (tid == 0) tokens[r] = -1;
      __syncthreads();
      continue;
    }
    const int k = min(k_requested, num_finite);

    // Radix select of the k-th largest key, most significant byte first.
    if (tid == 0) {
      threshold_prefix = 0u;
      threshold_mask = 0u;
      remaining_at_threshold = k;
    }
    if (k == num_finite) {
      if (tid == 0) {
        threshold_prefix = 1u;  // every finite key is >= 1
        threshold_mask = 0xFFFFFFFFu;
        remaining_at_threshold = -1;  // marker: take everything >= 1, no tie rule needed
      }
    } else {
      for (int shift = 24; shift >= 0; shift -= 8) {
        for (int i = tid; i < 256; i += kThreads) histogram[i] = 0u;
        __syncthreads();
        const uint32_t prefix = threshold_prefix, mask = threshold_mask;
        for (int64_t i = tid; i < vocab_size; i += kThreads) {
          const uint32_t key = order_key(row[i]);
          if (key != 0u && (key & mask) == prefix) atomicAdd(&histogram[(key >> shift) & 0xFFu], 1u);
        }
        __syncthreads();
        if (tid == 0) {
          int above = 0;
          for (int digit = 255; digit >= 0; --digit) {
            const int count = static_cast<int>(histogram[digit]);
            if (above + count >= remaining_at_threshold) {
              threshold_prefix |= static_cast<uint32_t>(digit) << shift;
              threshold_mask |= 0xFFu << shift;
              remaining_at_threshold -= above;
              break;
            }
            above += count;
          }
        }
        __syncthreads();
      }
    }
    __syncthreads();
    const bool is_take_all = remaining_at_threshold < 0;
    const uint32_t threshold = threshold_prefix;
    const int ties_needed = is_take_all ? 0 : remaining_at_threshold;
    const int num_strictly_above = k - ties_needed;

    // Gather: keys above the threshold in any order; ties in index order (contiguous ranges per
    // thread and a scan of the per-thread tie counts), so the lowest ids win as on the CPU.
    if (tid == 0) num_above = 0;
    __syncthreads();
    const int64_t per_thread = (vocab_size + kThreads - 1) / kThreads;
    const int64_t begin = min(vocab_size, tid * per_thread), end = min(vocab_size, begin + per_thread);
    int my_ties = 0;
    for (int64_t i = begin; i < end; ++i) {
      const float v = row[i];
      const uint32_t key = order_key(v);
      if (key == 0u) continue;
      if (is_take_all ? key >= threshold : key > threshold) {
        const int slot = atomicAdd(&num_above, 1);
        if (slot < kMaxK) {
          cand_value[slot] = v;
          cand_index[slot] = static_cast<int32_t>(i);
        }
      } else if (!is_take_all && key == threshold) {
        ++my_ties;
      }
    }
    const int tie_base = block_inclusive_scan<false>(my_ties, warp_totals) - my_ties;
    if (my_ties > 0 && tie_base < ties_needed) {
      int rank = tie_base;
      for (int64_t i = begin; i < end && rank < ties_needed; ++i) {
        const float v = row[i];
        if (order_key(v) == threshold) {
          cand_value[num_strictly_above + rank] = v;
          cand_index[num_strictly_above + rank] = static_cast<int32_t>(i);
          ++rank;
        }
      }
    }
    __syncthreads();

    // Sort the k candidates: each one's rank is how many come before it.
    if (tid < k) {
      const float v = cand_value[tid];
      const int32_t id = cand_index[tid];
      int rank = 0;
      for (int j = 0; j < k; ++j) rank += candidate_before(cand_value[j], cand_index[j], v, id) ? 1 : 0;
      sorted_value[rank] = v;
      sorted_index[rank] = id;
    }
    __syncthreads();

    if (tid == 0) {
      // Top-p and min-p on probabilities at temperature 1 (float terms, double sum, as the CPU).
      const float max_logit = sorted_value[0];
      double sum = 0.0;
      for (int i = 0; i < k; ++i) sum += expf(sorted_value[i] - max_logit);
      int keep = k;
      if (sp.top_p < 1.0f) {
        double cumulative = 0.0;
        for (int i = 0; i < k; ++i) {
          cumulative += static_cast<float>(expf(sorted_value[i] - max_logit) / sum);
          if (cumulative >= sp.top_p) {
            keep = i + 1;
            break;
          }
        }
      }
      if (sp.min_p > 0.0f) {
        const float first = static_cast<float>(1.0 / sum);  // exp(0) / sum
        const float min_prob = first * sp.min_p;
        int n = 1;
        while (n < keep && static_cast<float>(expf(sorted_value[n] - max_logit) / sum) >= min_prob) ++n;
        keep = n;
      }
      // The draw at the requested temperature over the survivors.
      double total = 0.0;
      for (int i = 0; i < keep; ++i) total += expf((sorted_value[i] - max_logit) / sp.temperature);
      const double u = static_cast<double>(uniforms[r]);
      double cumulative = 0.0;
      int32_t chosen = sorted_index[keep - 1];
      for (int i = 0; i < keep; ++i) {
        cumulative += static_cast<float>(expf((sorted_value[i] - max_logit) / sp.temperature) / total);
        if (u < cumulative) {
          chosen = sorted_index[i];
          break;
        }
      }
      tokens[r] = chosen;
    }
    __syncthreads();  // shared state is reset by the next row
  }
}

}  // namespace

cudaError_t argmax_rows_cuda(const float* logits, int64_t num_rows, int64_t row_length, int32_t* tokens,
                             cudaStream_t stream) {
  if (logits == nullptr || tokens == nullptr || num_rows < 0 || row_length <= 0 || row_length > INT32_MAX) {
    return cudaErrorInvalidValue;
  }
  if (!is_aligned(logits, 4) || !is_aligned(tokens, 4)) return cudaErrorInvalidValue;
  if (num_rows == 0) return cudaSuccess;
  IWB_LAUNCH(argmax_kernel, static_cast<unsigned>(std::min<int64_t>(num_rows, 65535)), kThreads, 0, stream, logits,
             num_rows, row_length, tokens);
  return cudaGetLastError();
}

cudaError_t sample_rows_cuda_check(const SampleCudaArgs& a) {
  if (a.logits == nullptr || a.params == nullptr || a.uniforms == nullptr || a.tokens == nullptr) {
    return cudaErrorInvalidValue;
  }
  if (a.num_rows < 0 || a.vocab_size <= 0 || a.vocab_size > INT32_MAX) return cudaErrorInvalidValue;
  if (!is_aligned(a.logits, 4) || !is_aligned(a.params, alignof(SamplingRowParams)) || !is_aligned(a.uniforms, 4) ||
      !is_aligned(a.tokens, 4)) {
    return cudaErrorInvalidValue;
  }
  return cudaSuccess;
}

cudaError_t sample_rows_cuda(const SampleCudaArgs& a, cudaStream_t stream) {
  if (const cudaError_t e = sample_rows_cuda_check(a); e != cudaSuccess) return e;
  if (a.num_rows == 0) return cudaSuccess;
  IWB_LAUNCH(sample_kernel, static_cast<unsigned>(std::min<int64_t>(a.num_rows, 65535)), kThreads, 0, stream, a.logits,
             a.num_rows, a.vocab_size, a.params, a.uniforms, a.tokens);
  return cudaGetLastError();
}

}  // namespace iwb
