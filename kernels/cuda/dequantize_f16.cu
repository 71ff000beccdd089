// dequantize_rows_f16_cuda, the weight rows -> f16 conversion of the cuBLAS prefill path:
// argument checks and the launch of dequantize_f16_kernel.cuh's kernel for each type.
#include "cuda_common.cuh"
#include "dequantize_f16_kernel.cuh"
#include "iwb/kernels/cuda/dequantize_cuda.h"

#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>

namespace iwb {
namespace {

using namespace cuda_detail;

template <typename Decoder>
cudaError_t launch_f16(const void* d_src, uint16_t* d_dst, int64_t num_values, cudaStream_t stream) {
  constexpr int kThreads = 256;
  constexpr int64_t kMaxBlocks = 65536;  // the grid-stride loop covers anything larger
  const int64_t num_groups = (num_values + kF16ValuesPerThread - 1) / kF16ValuesPerThread;
  const int64_t num_blocks = std::min<int64_t>((num_groups + kThreads - 1) / kThreads, kMaxBlocks);
  const bool is_dst_aligned = reinterpret_cast<uintptr_t>(d_dst) % 16 == 0;
  const auto kernel = dequantize_f16_kernel<Decoder>;
  IWB_LAUNCH(kernel, static_cast<unsigned>(num_blocks), kThreads, 0, stream,
             static_cast<const typename Decoder::Block*>(d_src), reinterpret_cast<__half*>(d_dst), num_values,
             is_dst_aligned);
  return cudaGetLastError();
}

}  // namespace

bool cuda_can_dequantize_f16(GgmlType type) {
  switch (type) {
    case GgmlType::F32: case GgmlType::F16: case GgmlType::BF16:
    case GgmlType::Q4_0: case GgmlType::Q4_1: case GgmlType::Q5_0: case GgmlType::Q5_1:
    case GgmlType::Q8_0: case GgmlType::Q4_K: case GgmlType::Q5_K: case GgmlType::Q6_K:
      return true;
    default:
      return false;
  }
}

cudaError_t dequantize_rows_f16_cuda(GgmlType type, const void* d_src, uint16_t* d_dst_f16, int64_t num_rows,
                                     int64_t row_length, cudaStream_t stream) {
  if (!cuda_can_dequantize_f16(type) || num_rows < 0 || row_length < 0) return cudaErrorInvalidValue;
  if (row_length % ggml_type_traits(type).block_size != 0) return cudaErrorInvalidValue;
  if (row_length != 0 && num_rows > INT64_MAX / row_length) return cudaErrorInvalidValue;
  const int64_t num_values = num_rows * row_length;
  if (num_values == 0) return cudaSuccess;
  // A misaligned device access would be a sticky error that poisons the whole context.
  const uintptr_t src_alignment = type == GgmlType::F32 ? 4 : 2;
  if (d_src == nullptr || d_dst_f16 == nullptr || reinterpret_cast<uintptr_t>(d_src) % src_alignment != 0 ||
      reinterpret_cast<uintptr_t>(d_dst_f16) % 2 != 0) {
    return cudaErrorInvalidValue;
  }
  switch (type) {
    case GgmlType::F32: return launch_f16<DecodeF32>(d_src, d_dst_f16, num_values, stream);
    case GgmlType::F16: return launch_f16<DecodeF16>(d_src, d_dst_f16, num_values, stream);
    case GgmlType::BF16: return launch_f16<DecodeBF16>(d_src, d_dst_f16, num_values, stream);
    case GgmlType::Q4_0: return launch_f16<DecodeQ4_0>(d_src, d_dst_f16, num_values, stream);
    case GgmlType::Q4_1: return launch_f16<DecodeQ4_1>(d_src, d_dst_f16, num_values, stream);
    case GgmlType::Q5_0: return launch_f16<DecodeQ5_0>(d_src, d_dst_f16, num_values, stream);
    case GgmlType::Q5_1: return launch_f16<DecodeQ5_1>(d_src, d_dst_f16, num_values, stream);
    case GgmlType::Q8_0: return launch_f16<DecodeQ8_0>(d_src, d_dst_f16, num_values, stream);
    case GgmlType::Q4_K: return launch_f16<DecodeQ4_K>(d_src, d_dst_f16, num_values, stream);
    case GgmlType::Q5_K: return launch_f16<DecodeQ5_K>(d_src, d_dst_f16, num_values, stream);
    case GgmlType::Q6_K: return launch_f16<DecodeQ6_K>(d_src, d_dst_f16, num_values, stream);
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace iwb
