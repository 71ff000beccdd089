// The matrices of one grouped matvec launch (matvec_split_group_cuda, matvec_group_cuda): up to
// three products of the same input, part p owning the thread blocks from first_block[p], so each
// part's rows are computed exactly as in a launch of its own.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace iwb::cuda_detail {

inline constexpr int kMaxMatvecParts = 3;

struct MatvecParts {
  const uint8_t* weight[kMaxMatvecParts];
  int64_t out_features[kMaxMatvecParts];
  float* y[kMaxMatvecParts];
  const float* bias[kMaxMatvecParts];
  unsigned first_block[kMaxMatvecParts];
  int count;

  // Host: appends a part of `blocks` thread blocks; returns the launch's blocks so far.
  unsigned add(const void* w, int64_t rows, float* out, const float* b, unsigned blocks, unsigned total) {
    weight[count] = static_cast<const uint8_t*>(w);
    out_features[count] = rows;
    y[count] = out;
    bias[count] = b;
    first_block[count] = total;
    ++count;
    return total + blocks;
  }
};

// The part of thread block `block`. Constant indices only: a kernel parameter indexed at run
// time is copied to local memory by every thread (120 bytes of stack frame), which made the
// one-matrix kernels up to twice as slow on an H200 when they shared this struct (2026-12-04;
// tests/kernels/check_stack_frames.cmake watches for it).
struct MatvecPart {
  const uint8_t* weight;
  int64_t out_features;
  float* y;
  const float* bias;
  unsigned first_block;
};

__device__ __forceinline__ MatvecPart select_matvec_part(const MatvecParts& parts, unsigned block) {
  static_assert(kMaxMatvecParts == 3, "the selects below name three parts");
  const bool is_third = parts.count > 2 && block >= parts.first_block[2];
  const bool is_second = !is_third && parts.count > 1 && block >= parts.first_block[1];
  MatvecPart p;
  p.weight = is_third ? parts.weight[2] : is_second ? parts.weight[1] : parts.weight[0];
  p.out_features = is_third ? parts.out_features[2] : is_second ? parts.out_features[1] : parts.out_features[0];
  p.y = is_third ? parts.y[2] : is_second ? parts.y[1] : parts.y[0];
  p.bias = is_third ? parts.bias[2] : is_second ? parts.bias[1] : parts.bias[0];
  p.first_block = is_third ? parts.first_block[2] : is_second ? parts.first_block[1] : 0u;
  return p;
}

}  // namespace iwb::cuda_detail
