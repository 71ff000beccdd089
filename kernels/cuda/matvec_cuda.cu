// matvec_cuda: argument checks, launch planning (host only, tested without a GPU) and the
// dispatch to the per-family launchers of matvec_f16.cu, matvec_q4_0.cu, matvec_q8_0.cu and
// matvec_kquants.cu.
#include "iwb/kernels/cuda/matvec_cuda.h"
#include "iwb/kernels/cuda/matvec_plan.h"
#include "matvec_launch.h"

#include <cstdint>

namespace iwb {
namespace {

bool is_aligned_to(const void* p, uintptr_t alignment) { return reinterpret_cast<uintptr_t>(p) % alignment == 0; }

bool is_float_type(GgmlType type) { return type == GgmlType::F32 || type == GgmlType::F16 || type == GgmlType::BF16; }

// True when the byte ranges [a, a + a_bytes) and [b, b + b_bytes) share a byte.
bool overlaps(const void* a, uint64_t a_bytes, const void* b, uint64_t b_bytes) {
  const auto a0 = reinterpret_cast<uintptr_t>(a), b0 = reinterpret_cast<uintptr_t>(b);
  return a0 < b0 + b_bytes && b0 < a0 + a_bytes;
}

}  // namespace

bool cuda_matvec_supports(GgmlType type) {
  switch (type) {
    case GgmlType::F32: case GgmlType::F16: case GgmlType::BF16:
    case GgmlType::Q4_0: case GgmlType::Q4_1: case GgmlType::Q5_0: case GgmlType::Q5_1:
    case GgmlType::Q8_0: case GgmlType::Q4_K: case GgmlType::Q5_K: case GgmlType::Q6_K:
      return true;
    default:
      return false;
  }
}

int64_t cuda_matvec_q8_input_max_tokens(GgmlType type) {
  if (type == GgmlType::Q4_K) return kCudaMatvecMaxTokens;
  return cuda_matvec_takes_q8_input(type) ? 1 : 0;
}

bool cuda_matvec_takes_q8_input(GgmlType type) {
  return type == GgmlType::Q4_0 || type == GgmlType::Q8_0 || type == GgmlType::Q4_K || type == GgmlType::Q6_K;
}

cudaError_t quantize_x_q8_cuda(const float* x, int64_t n, int8_t* q, float* d, cudaStream_t stream, int32_t* sums) {
  if (x == nullptr || q == nullptr || d == nullptr || n <= 0 || n % 32 != 0 || n > (int64_t{1} << 30)) {
    return cudaErrorInvalidValue;
  }
  if (!is_aligned_to(x, 16) || !is_aligned_to(q, 16) || !is_aligned_to(d, 4) || !is_aligned_to(sums, 4)) {
    return cudaErrorInvalidValue;
  }
  return cuda_matvec::launch_quantize_x_q8(x, n, q, d, sums, stream);
}

cudaError_t matvec_cuda_check(const MatvecCudaArgs& args) {
  if (!cuda_matvec_supports(args.type)) return cudaErrorInvalidValue;
  // Sizes: int32 thread-block-local indices and a grid of at most 2^31 - 1 blocks stay far
  // inside these limits (every real model's matrices are below 2^20 x 2^18).
  constexpr int64_t kMaxDim = int64_t{1} << 30;
  if (args.in_features <= 0 || args.out_features <= 0 || args.in_features > kMaxDim || args.out_features > kMaxDim) {
    return cudaErrorInvalidValue;
  }
  if (args.num_tokens < 1 || args.num_tokens > kCudaMatvecMaxTokens) return cudaErrorInvalidValue;
  if (args.in_features % ggml_type_traits(args.type).block_size != 0) return cudaErrorInvalidValue;
  if (args.weight == nullptr || args.x == nullptr || args.y == nullptr) return cudaErrorInvalidValue;
  // A misaligned device load is a sticky error that would poison the whole context.
  if (!is_aligned_to(args.weight, args.type == GgmlType::F32 ? 4 : 2) || !is_aligned_to(args.x, 16) ||
      !is_aligned_to(args.y, 4) || (args.bias != nullptr && !is_aligned_to(args.bias, 4))) {
    return cudaErrorInvalidValue;
  }
  // int8 activations: a type that takes them, as many tokens as it takes (one; Q4_K up to 8),
  // both arrays given and aligned.
  if (args.x_q8 != nullptr || args.x_q8_scale != nullptr) {
    if (args.x_q8 == nullptr || args.x_q8_scale == nullptr ||
        args.num_tokens > cuda_matvec_q8_input_max_tokens(args.type) || !cuda_matvec_takes_q8_input(args.type) ||
        !is_aligned_to(args.x_q8, 16) || !is_aligned_to(args.x_q8_scale, 4)) {
      return cudaErrorInvalidValue;
    }
  }
  const auto x_bytes = static_cast<uint64_t>(args.num_tokens * args.in_features) * sizeof(float);
  const auto y_bytes = static_cast<uint64_t>(args.num_tokens * args.out_features) * sizeof(float);
  if (overlaps(args.x, x_bytes, args.y, y_bytes)) return cudaErrorInvalidValue;
  if (args.bias != nullptr && overlaps(args.bias, static_cast<uint64_t>(args.out_features) * sizeof(float), args.y, y_bytes)) {
    return cudaErrorInvalidValue;
  }
  return cudaSuccess;
}

MatvecPlan plan_matvec_cuda(const MatvecCudaArgs& args) {
  MatvecPlan plan;
  plan.row_bytes = static_cast<int64_t>(ggml_row_bytes(args.type, args.in_features).value_or(0));
  // The widest load that divides both the base address and the row length: then every row,
  // and every tile of whole blocks in it, starts on a multiple of the load width.
  const auto base = reinterpret_cast<uintptr_t>(args.weight);
  for (int width : {16, 4, 2}) {
    if (base % static_cast<uintptr_t>(width) == 0 && plan.row_bytes % width == 0) {
      plan.load_bytes = width;
      break;
    }
  }
  plan.is_vector_path = plan.load_bytes == 16;
  plan.is_many_tokens = args.num_tokens > 1;
  plan.uses_q8_input = args.x_q8 != nullptr;
  // Q4_K's int8 kernel reads its blocks with 16-byte loads straight from the rows, a thread block
  // or a warp a row; on narrower loads the product decodes to f32 as without x_q8.
  if (plan.uses_q8_input && args.type == GgmlType::Q4_K) {
    if (plan.load_bytes == 16) {
      plan.rows_per_block = args.in_features <= kQ4KWarpRowMaxInputs ? kMatvecQ4KWarpRows : 1;
    } else {
      plan.uses_q8_input = false;
    }
  }
  const bool is_float = args.type == GgmlType::F32 || args.type == GgmlType::F16 || args.type == GgmlType::BF16;
  // (Not for int8 activations: Q4_K's int8 kernel keeps its rows a block at any token count. On
  // the H200 this rule once overrode it, and every 2-8-token Q4_K product of 2,048 rows or more
  // was refused: test_cuda_matvec_args checks the plan at real shapes.)
  if (!is_float && !plan.uses_q8_input && plan.is_many_tokens && plan.load_bytes == 16 &&
      args.out_features >= kMatvecQuantWideMinRows)
    plan.rows_per_block = kMatvecQuantWideRowsManyTokens;
  plan.num_blocks = (args.out_features + plan.rows_per_block - 1) / plan.rows_per_block;
  return plan;
}

cudaError_t matvec_cuda(const MatvecCudaArgs& args, cudaStream_t stream) {
  if (const cudaError_t error = matvec_cuda_check(args); error != cudaSuccess) return error;
  const MatvecPlan plan = plan_matvec_cuda(args);
  if (plan.load_bytes == 0) return cudaErrorInvalidValue;  // unreachable: checks ensure 2-byte alignment
  if (plan.uses_q8_input) {
    switch (args.type) {
      case GgmlType::Q4_0: return cuda_matvec::launch_matvec_q4_0_q8_input(args, plan, stream);
      case GgmlType::Q8_0: return cuda_matvec::launch_matvec_q8_0_q8_input(args, plan, stream);
      case GgmlType::Q4_K: return cuda_matvec::launch_matvec_q4_k_q8_input(args, plan, stream);
      case GgmlType::Q6_K: return cuda_matvec::launch_matvec_q6_k_q8_input(args, plan, stream);
      default: return cudaErrorInvalidValue;
    }
  }
  switch (args.type) {
    case GgmlType::F32: case GgmlType::F16: case GgmlType::BF16:
      return cuda_matvec::launch_matvec_float(&args, &plan, 1, stream);
    case GgmlType::Q4_0: case GgmlType::Q4_1: case GgmlType::Q5_0: case GgmlType::Q5_1:
      return cuda_matvec::launch_matvec_q4_q5(args, plan, stream);
    case GgmlType::Q8_0:
      return cuda_matvec::launch_matvec_q8_0(args, plan, stream);
    case GgmlType::Q4_K: case GgmlType::Q5_K: case GgmlType::Q6_K:
      return cuda_matvec::launch_matvec_kquants(args, plan, stream);
    default:
      return cudaErrorInvalidValue;
  }
}

cudaError_t matvec_group_cuda_check(const MatvecCudaArgs* parts, int count) {
  if (parts == nullptr || count < 1 || count > kMatvecMaxParts) return cudaErrorInvalidValue;
  const MatvecCudaArgs& first = parts[0];
  const MatvecPlan first_plan = plan_matvec_cuda(first);
  int64_t blocks = 0;
  for (int i = 0; i < count; ++i) {
    const MatvecCudaArgs& p = parts[i];
    if (const cudaError_t e = matvec_cuda_check(p); e != cudaSuccess) return e;
    if (p.type != first.type || p.in_features != first.in_features || p.x != first.x ||
        p.num_tokens != first.num_tokens || p.x_q8 != first.x_q8 || p.x_q8_scale != first.x_q8_scale) {
      return cudaErrorInvalidValue;
    }
    const MatvecPlan plan = plan_matvec_cuda(p);
    if (p.x_q8 != nullptr) {
      // Q4_K on int8 activations, every part on the int8 kernel with the same rows a block.
      if (p.type != GgmlType::Q4_K || !plan.uses_q8_input || plan.rows_per_block != first_plan.rows_per_block) {
        return cudaErrorInvalidValue;
      }
    } else if (!is_float_type(p.type) || !plan.is_vector_path) {
      return cudaErrorInvalidValue;
    }
    blocks += plan.num_blocks;
  }
  return blocks <= 2147483647 ? cudaSuccess : cudaErrorInvalidValue;
}

cudaError_t matvec_group_cuda(const MatvecCudaArgs* parts, int count, cudaStream_t stream) {
  if (const cudaError_t error = matvec_group_cuda_check(parts, count); error != cudaSuccess) return error;
  MatvecPlan plans[kMatvecMaxParts];
  for (int i = 0; i < count; ++i) plans[i] = plan_matvec_cuda(parts[i]);
  if (parts[0].x_q8 != nullptr) return cuda_matvec::launch_matvec_q4_k_q8_group(parts, plans, count, stream);
  return cuda_matvec::launch_matvec_float(parts, plans, count, stream);
}

}  // namespace iwb
