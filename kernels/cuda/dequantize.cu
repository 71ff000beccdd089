// CUDA dequantization kernels (F16, BF16, Q4_0, Q8_0, Q4_K, Q6_K) and their launcher.
// One thread per output element: writes are coalesced and each thread decodes its own
// quant, re-reading the block's scales through the cache. Tested against dequantize_row_ref.
#include "cuda_common.cuh"
#include "dequantize_blocks.cuh"
#include "iwb/kernels/cuda/dequantize_cuda.h"

#include <algorithm>

namespace iwb {
namespace {

using namespace cuda_detail;

template <typename Decoder>
__global__ void dequantize_kernel(const typename Decoder::Block* __restrict__ src, float* __restrict__ dst,
                                  int64_t num_elements) {
  cuda_detail::wait_for_prior_grids();
  const int64_t stride = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < num_elements; i += stride) {
    dst[i] = Decoder::decode(src[i / Decoder::kBlockSize], static_cast<int>(i % Decoder::kBlockSize));
  }
}

template <typename Decoder>
cudaError_t launch(const void* d_src, float* d_dst, int64_t num_elements, cudaStream_t stream) {
  constexpr int kThreads = 256;
  // Enough blocks to fill any current GPU many times over; the grid-stride loop covers
  // tensors larger than that.
  constexpr int64_t kMaxBlocks = 65536;
  const int64_t num_blocks = std::min<int64_t>((num_elements + kThreads - 1) / kThreads, kMaxBlocks);
  IWB_LAUNCH(dequantize_kernel<Decoder>, static_cast<unsigned>(num_blocks), kThreads, 0, stream,
             static_cast<const typename Decoder::Block*>(d_src), d_dst, num_elements);
  return cudaGetLastError();
}

}  // namespace

bool cuda_can_dequantize(GgmlType type) {
  switch (type) {
    case GgmlType::F16:
    case GgmlType::BF16:
    case GgmlType::Q8_0:
    case GgmlType::Q4_0:
    case GgmlType::Q4_K:
    case GgmlType::Q6_K: return true;
    default: return false;
  }
}

cudaError_t dequantize_row_cuda(GgmlType type, const void* d_src, float* d_dst, int64_t num_elements,
                                cudaStream_t stream) {
  if (!cuda_can_dequantize(type) || num_elements < 0) return cudaErrorInvalidValue;
  if (num_elements % ggml_type_traits(type).block_size != 0) return cudaErrorInvalidValue;
  if (num_elements == 0) return cudaSuccess;
  // A misaligned device load would be a sticky error that poisons the whole context.
  if (d_src == nullptr || d_dst == nullptr || reinterpret_cast<uintptr_t>(d_src) % 2 != 0 ||
      reinterpret_cast<uintptr_t>(d_dst) % 4 != 0) {
    return cudaErrorInvalidValue;
  }
  switch (type) {
    case GgmlType::F16: return launch<DecodeF16>(d_src, d_dst, num_elements, stream);
    case GgmlType::BF16: return launch<DecodeBF16>(d_src, d_dst, num_elements, stream);
    case GgmlType::Q8_0: return launch<DecodeQ8_0>(d_src, d_dst, num_elements, stream);
    case GgmlType::Q4_0: return launch<DecodeQ4_0>(d_src, d_dst, num_elements, stream);
    case GgmlType::Q4_K: return launch<DecodeQ4_K>(d_src, d_dst, num_elements, stream);
    case GgmlType::Q6_K: return launch<DecodeQ6_K>(d_src, d_dst, num_elements, stream);
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace iwb
