// The GPU's layout of Q4_0, Q8_0 and Q6_K matrices ("split blocks"): the same bytes as GGUF's 18-,
// 34- and 210-byte blocks, regrouped so a warp reads them with aligned 16-byte loads. GGUF interleaves
// each block's f16 scale with its quants, which leaves the quants only 2-byte aligned; the CUDA
// kernels then had to stage rows through shared memory and decode from 2-byte pieces, and were
// bound by instruction issue at a third (Q4_0) to a half (Q8_0) of an H100's bandwidth. Split:
// first every block's quants, row after row ([rows][blocks][16 or 32 bytes]), then every
// block's scale ([rows][blocks], f16). Q6_K (q6_k_split_offsets) goes in 32-value units: every
// unit's 16 bytes of low nibbles as Q4_0's quants, then every unit's 8 bytes of high bit pairs,
// then the 16-value scales as stored (int8, [rows][units][2]), then each super-block's d (f16).
// Plain C++ so the CPU tests check it; the CUDA backend repacks these matrices on upload.
#pragma once

#include "iwb/kernels/ggml_type.h"

#include <cstdint>

namespace iwb {

// Types with a split layout: Q4_0, Q8_0 and Q6_K.
bool has_split_blocks(GgmlType type);

// Bytes of one block's quants: 16 (Q4_0) or 32 (Q8_0); 0 for other types (Q6_K included).
int64_t split_quant_bytes(GgmlType type);

// Byte offset of the scales (after every block's quants): rows * blocks * split_quant_bytes
// (Q4_0 and Q8_0).
inline int64_t split_scales_offset(GgmlType type, int64_t rows, int64_t in_features) {
  return rows * (in_features / 32) * split_quant_bytes(type);
}

// Where a split Q6_K matrix's regions start, in bytes (the low nibbles at 0): 16, 8 and 2 bytes
// per 32-value unit before the high bit pairs, the scales and the d's. The GPU kernels compute
// the same (matvec_split.cu).
struct Q6KSplitOffsets {
  int64_t highs = 0, scales = 0, d = 0;
};
inline Q6KSplitOffsets q6_k_split_offsets(int64_t rows, int64_t in_features) {
  const int64_t units = rows * (in_features / 32);
  return {16 * units, 24 * units, 26 * units};
}

// GGUF rows (rows x in_features, in_features a multiple of 32, of 256 for Q6_K) to the split
// layout in dst (the same number of bytes, not overlapping src). False for another type or sizes
// that are not.
bool repack_split_blocks(GgmlType type, const void* src, int64_t rows, int64_t in_features, void* dst);

// Back to GGUF rows (the tests' inverse).
bool unpack_split_blocks(GgmlType type, const void* src, int64_t rows, int64_t in_features, void* dst);

}  // namespace iwb
