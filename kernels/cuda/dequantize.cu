// CUDA dequantization kernels (F16, BF16, Q4_0, Q8_0, Q4_K, Q6_K) and their launcher.
// One thread per output element: writes are coalesced and each thread decodes its own
// quant, re-reading the block's scales through the cache. Tested against dequantize_row_ref.
#include "iwb/kernels/cuda/dequantize_cuda.h"
#include "iwb/kernels/quant_blocks.h"

#include <cuda_fp16.h>

#include <algorithm>

namespace iwb {
namespace {

__device__ inline float half_bits_to_float(uint16_t bits) { return __half2float(__ushort_as_half(bits)); }

// Each decoder names its block type and turns element e of one block into a float.
struct DecodeF16 {
  using Block = uint16_t;
  static constexpr int kBlockSize = 1;
  __device__ static float decode(const Block& b, int) { return half_bits_to_float(b); }
};

struct DecodeBF16 {
  using Block = uint16_t;
  static constexpr int kBlockSize = 1;
  __device__ static float decode(const Block& b, int) { return __uint_as_float(static_cast<uint32_t>(b) << 16); }
};

struct DecodeQ8_0 {
  using Block = BlockQ8_0;
  static constexpr int kBlockSize = kQK8_0;
  __device__ static float decode(const Block& b, int e) {
    return static_cast<float>(b.qs[e]) * half_bits_to_float(b.d);
  }
};

struct DecodeQ4_0 {
  using Block = BlockQ4_0;
  static constexpr int kBlockSize = kQK4_0;
  __device__ static float decode(const Block& b, int e) {
    const uint8_t byte = b.qs[e % (kQK4_0 / 2)];
    const int q = e < kQK4_0 / 2 ? (byte & 0x0F) : (byte >> 4);
    return static_cast<float>(q - 8) * half_bits_to_float(b.d);
  }
};

struct DecodeQ4_K {
  using Block = BlockQ4_K;
  static constexpr int kBlockSize = kQK_K;
  // Chunk c of 64 elements uses qs[32c .. 32c+31]: low nibbles for its first 32, high for
  // the rest, with sub-block scale/min 2c and 2c+1.
  __device__ static float decode(const Block& b, int e) {
    const int chunk = e / 64, l = e % 32;
    const bool is_high = (e % 64) >= 32;
    uint8_t scale, min;
    unpack_scale_min_k4(2 * chunk + (is_high ? 1 : 0), b.scales, &scale, &min);
    const uint8_t byte = b.qs[chunk * 32 + l];
    const int q = is_high ? (byte >> 4) : (byte & 0x0F);
    return half_bits_to_float(b.d) * scale * static_cast<float>(q) - half_bits_to_float(b.dmin) * min;
  }
};

struct DecodeQ6_K {
  using Block = BlockQ6_K;
  static constexpr int kBlockSize = kQK_K;
  // Within a 128-element half, quarter k (32 elements) takes ql[l + 32 * (k & 1)] (low
  // nibble for k < 2, high for k >= 2) and bit pair k of qh[l].
  __device__ static float decode(const Block& b, int e) {
    const int half = e / 128, quarter = (e % 128) / 32, l = e % 32;
    const uint8_t low_byte = b.ql[half * 64 + (quarter & 1) * 32 + l];
    const int low = quarter < 2 ? (low_byte & 0x0F) : (low_byte >> 4);
    const int high = (b.qh[half * 32 + l] >> (2 * quarter)) & 0x03;
    const int scale = b.scales[half * 8 + l / 16 + 2 * quarter];
    return half_bits_to_float(b.d) * static_cast<float>(scale) * static_cast<float>((low | (high << 4)) - 32);
  }
};

template <typename Decoder>
__global__ void dequantize_kernel(const typename Decoder::Block* __restrict__ src, float* __restrict__ dst,
                                  int64_t num_elements) {
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
  dequantize_kernel<Decoder><<<static_cast<unsigned>(num_blocks), kThreads, 0, stream>>>(
      static_cast<const typename Decoder::Block*>(d_src), d_dst, num_elements);
  return cudaGetLastError();
}

}  // namespace

bool cuda_can_dequantize(GgmlType type) {
  switch (type) {
    case GgmlType::F16: case GgmlType::BF16: case GgmlType::Q8_0:
    case GgmlType::Q4_0: case GgmlType::Q4_K: case GgmlType::Q6_K:
      return true;
    default:
      return false;
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
