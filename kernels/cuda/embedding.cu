// Embedding gather on the GPU (embedding_cuda.h): grid y walks the tokens, grid x the row;
// each thread decodes its own element from the token's row of blocks (dequantize_blocks.cuh).
#include "iwb/kernels/cuda/embedding_cuda.h"

#include "cuda_common.cuh"
#include "dequantize_blocks.cuh"
#include "iwb/kernels/split_blocks.h"
#include "split_q6_k.cuh"

#include <cuda_fp16.h>

namespace iwb {
namespace {

using namespace cuda_detail;

template <typename Decoder>
__global__ void embedding_kernel(const typename Decoder::Block* __restrict__ table, int64_t vocab_size, int64_t dim,
                                 const int32_t* __restrict__ tokens, int64_t num_tokens, float scale,
                                 float* __restrict__ output, int32_t* bad_token_flag) {
  cuda_detail::wait_for_prior_grids();
  const int64_t blocks_per_row = dim / Decoder::kBlockSize;
  for (int64_t t = blockIdx.y; t < num_tokens; t += gridDim.y) {
    const int32_t token = tokens[t];
    const bool is_valid = token >= 0 && token < vocab_size;
    if (!is_valid && bad_token_flag != nullptr && blockIdx.x == 0 && threadIdx.x == 0) *bad_token_flag = 1;
    const typename Decoder::Block* row = table + (is_valid ? static_cast<int64_t>(token) : 0) * blocks_per_row;
    float* out = output + t * dim;
    for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < dim;
         i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
      out[i] = is_valid
                   ? Decoder::decode(row[i / Decoder::kBlockSize], static_cast<int>(i % Decoder::kBlockSize)) * scale
                   : 0.0f;
    }
  }
}

// Value j of 32-value block `block` of a split table (split_blocks.h): Q4_0 (kQuantBytes 16) or
// Q8_0 (32), whose quants and scales sit apart, (q - offset) * d as the GGUF decoders compute it.
template <int kQuantBytes>
struct SplitValue {
  __device__ static float at(const uint8_t* __restrict__ table, int64_t vocab_size, int64_t dim, int64_t block, int j) {
    const auto* scales = reinterpret_cast<const unsigned short*>(table + vocab_size * (dim / 32) * kQuantBytes);
    int q;
    if constexpr (kQuantBytes == 16) {
      const uint8_t byte = table[block * 16 + j % 16];  // values j and j + 16 share byte j
      q = (j < 16 ? (byte & 0x0F) : (byte >> 4)) - 8;
    } else {
      q = static_cast<int8_t>(table[block * 32 + j]);
    }
    return static_cast<float>(q) * __half2float(__ushort_as_half(scales[block]));
  }
};

// Q6_K's split units (split_q6_k.cuh).
struct SplitValueQ6_K {
  __device__ static float at(const uint8_t* __restrict__ table, int64_t vocab_size, int64_t dim, int64_t unit, int j) {
    return q6_k_split_value(split_q6_k_matrix(table, vocab_size, dim), unit, j);
  }
};

// The gather from a split table: each value Value::at(...) * scale.
template <typename Value>
__global__ void embedding_split_kernel(const uint8_t* __restrict__ table, int64_t vocab_size, int64_t dim,
                                       const int32_t* __restrict__ tokens, int64_t num_tokens, float scale,
                                       float* __restrict__ output, int32_t* bad_token_flag) {
  cuda_detail::wait_for_prior_grids();
  const int64_t blocks_per_row = dim / 32;
  for (int64_t t = blockIdx.y; t < num_tokens; t += gridDim.y) {
    const int32_t token = tokens[t];
    const bool is_valid = token >= 0 && token < vocab_size;
    if (!is_valid && bad_token_flag != nullptr && blockIdx.x == 0 && threadIdx.x == 0) *bad_token_flag = 1;
    const int64_t first_block = (is_valid ? static_cast<int64_t>(token) : 0) * blocks_per_row;
    float* out = output + t * dim;
    for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < dim;
         i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
      const float value = Value::at(table, vocab_size, dim, first_block + i / 32, static_cast<int>(i % 32));
      out[i] = is_valid ? value * scale : 0.0f;
    }
  }
}

template <typename Decoder>
cudaError_t launch(const EmbeddingCudaArgs& a, cudaStream_t stream) {
  constexpr int kThreads = 256;
  const dim3 grid(grid_for(a.dim, kThreads, 1024), static_cast<unsigned>(std::min(a.num_tokens, kMaxGridYZ)));
  IWB_LAUNCH(embedding_kernel<Decoder>, grid, kThreads, 0, stream, static_cast<const typename Decoder::Block*>(a.table),
             a.vocab_size, a.dim, a.tokens, a.num_tokens, a.scale, a.output, a.bad_token_flag);
  return cudaGetLastError();
}

}  // namespace

bool cuda_embedding_supports(GgmlType type) {
  switch (type) {
    case GgmlType::F32:
    case GgmlType::F16:
    case GgmlType::BF16:
    case GgmlType::Q4_0:
    case GgmlType::Q8_0:
    case GgmlType::Q4_K:
    case GgmlType::Q6_K: return true;
    default: return false;
  }
}

cudaError_t embedding_cuda_check(const EmbeddingCudaArgs& a) {
  if (!cuda_embedding_supports(a.table_type) || a.table == nullptr || a.tokens == nullptr || a.output == nullptr) {
    return cudaErrorInvalidValue;
  }
  if (a.vocab_size <= 0 || a.dim <= 0 || a.num_tokens < 0) return cudaErrorInvalidValue;
  if (a.dim % ggml_type_traits(a.table_type).block_size != 0) return cudaErrorInvalidValue;
  if (a.is_split && !has_split_blocks(a.table_type)) return cudaErrorInvalidValue;
  const uintptr_t table_alignment = a.table_type == GgmlType::F32 ? 4 : 2;
  if (!is_aligned(a.table, table_alignment) || !is_aligned(a.tokens, 4) || !is_aligned(a.output, 4) ||
      (a.bad_token_flag != nullptr && !is_aligned(a.bad_token_flag, 4))) {
    return cudaErrorInvalidValue;
  }
  return cudaSuccess;
}

cudaError_t embedding_cuda(const EmbeddingCudaArgs& a, cudaStream_t stream) {
  if (const cudaError_t e = embedding_cuda_check(a); e != cudaSuccess) return e;
  if (a.num_tokens == 0) return cudaSuccess;
  if (a.is_split) {
    constexpr int kThreads = 256;
    const dim3 grid(grid_for(a.dim, kThreads, 1024), static_cast<unsigned>(std::min(a.num_tokens, kMaxGridYZ)));
    auto* kernel = a.table_type == GgmlType::Q4_0   ? embedding_split_kernel<SplitValue<16>>
                   : a.table_type == GgmlType::Q8_0 ? embedding_split_kernel<SplitValue<32>>
                                                    : embedding_split_kernel<SplitValueQ6_K>;
    IWB_LAUNCH(kernel, grid, kThreads, 0, stream, static_cast<const uint8_t*>(a.table), a.vocab_size, a.dim, a.tokens,
               a.num_tokens, a.scale, a.output, a.bad_token_flag);
    return cudaGetLastError();
  }
  switch (a.table_type) {
    case GgmlType::F32: return launch<DecodeF32>(a, stream);
    case GgmlType::F16: return launch<DecodeF16>(a, stream);
    case GgmlType::BF16: return launch<DecodeBF16>(a, stream);
    case GgmlType::Q4_0: return launch<DecodeQ4_0>(a, stream);
    case GgmlType::Q8_0: return launch<DecodeQ8_0>(a, stream);
    case GgmlType::Q4_K: return launch<DecodeQ4_K>(a, stream);
    case GgmlType::Q6_K: return launch<DecodeQ6_K>(a, stream);
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace iwb
