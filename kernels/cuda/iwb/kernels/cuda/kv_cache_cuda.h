// GPU writes of new keys/values into the paged KV cache (vLLM layout, see paged_attention.h)
// and copy-on-write block copies; write_kv_paged_ref and PagedKvStorage::copy_blocks are the
// CPU twins. Slot mappings and copy lists are read from device memory.
#pragma once

#include "iwb/kernels/ggml_type.h"

#include <cuda_runtime.h>

#include <cstdint>

namespace iwb {

struct WriteKvCudaArgs {
  const float* k = nullptr;               // device [num_tokens x k_row]
  const float* v = nullptr;               // device [num_tokens x v_row]
  const int64_t* slot_mapping = nullptr;  // device [num_tokens]; < 0 skips the token (padding)
  int64_t num_tokens = 0;
  uint16_t* k_cache = nullptr;            // device, one layer: [num_slots x kv_row_units(k_type, k_row)]
  uint16_t* v_cache = nullptr;            // device, one layer: [num_slots x kv_row_units(v_type, v_row)]
  int64_t num_slots = 0;                  // num_blocks * block_size; slots >= num_slots are skipped
  int64_t k_row = 0;                      // num_kv_heads * head_dim
  int64_t v_row = 0;                      // num_kv_heads * head_dim_v
  // Each side F16 (round to nearest even) or a cache type of paged_attention.h: a block type
  // (head rows Hadamard-rotated when is_rotated, then ggml's reference rounding: the CPU
  // writer's blocks bit for bit) or F8_E4M3 (e4m3(x / scale), the CPU's rounding).
  GgmlType k_type = GgmlType::F16;
  GgmlType v_type = GgmlType::F16;
  int64_t num_kv_heads = 1;  // heads per row (rotation and blocks stay within a head)
  bool is_rotated = true;
  float* k_scale = nullptr;  // device, one float: the FP8 keys' scale (null: 1)
  float* v_scale = nullptr;  // device, one float: the FP8 values' scale (null: 1)
  // vLLM's calculate_kv_scales: first set *k_scale = max |k| / 200 and *v_scale = max |v| / 100
  // over the tokens written (kv_calibrated_scale; FP8 sides with a scale pointer only).
  bool calculate_scales = false;
};

// cudaErrorInvalidValue for null pointers, sizes <= 0 (num_tokens 0 is fine), a type that is no
// KV cache type or rows it cannot hold (block types: head sizes multiples of 32; FP8: even), a
// row that is not num_kv_heads heads. Slot values are device data and are not checked
// here; the kernel skips any slot outside [0, num_slots) rather than writing out of bounds.
// Unlike the CPU writer, values with no quantized form (inf, NaN) are not refused.
cudaError_t write_kv_paged_cuda_check(const WriteKvCudaArgs& args);
cudaError_t write_kv_paged_cuda(const WriteKvCudaArgs& args, cudaStream_t stream);

struct CopyKvBlocksCudaArgs {
  uint16_t* pool = nullptr;        // device: the first pool (e.g. layer 0's keys)
  int64_t num_pools = 1;           // pools handled by this call, pool_stride_units apart
  int64_t pool_stride_units = 0;   // uint16 units from one pool to the next (ignored when num_pools == 1)
  int64_t block_units = 0;         // uint16 units per block: block_size * kv_row_units(type, row)
  int64_t num_blocks = 0;          // blocks per pool; pairs naming a block outside are skipped
  const int32_t* copies = nullptr; // device [num_copies x 2]: (src, dst) block ids, the layout of
                                   // std::vector<BlockCopy>
  int64_t num_copies = 0;
};

// Copies every (src, dst) pair's block in each pool. Pairs must not chain (a dst that is also
// a src in the same call), as in the scheduler's copy lists. Pools of different layers or of
// keys and values that are not equally spaced take one call each.
cudaError_t copy_kv_blocks_cuda_check(const CopyKvBlocksCudaArgs& args);
cudaError_t copy_kv_blocks_cuda(const CopyKvBlocksCudaArgs& args, cudaStream_t stream);

}  // namespace iwb
