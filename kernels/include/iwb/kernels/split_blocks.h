// The GPU's layout of Q4_0 and Q8_0 matrices ("split blocks"): the same bytes as GGUF's 18- and
// 34-byte blocks, regrouped so a warp reads them with aligned 16-byte loads. GGUF interleaves
// each block's f16 scale with its quants, which leaves the quants only 2-byte aligned; the CUDA
// kernels then had to stage rows through shared memory and decode from 2-byte pieces, and were
// bound by instruction issue at a third (Q4_0) to a half (Q8_0) of an H100's bandwidth. Split:
// first every block's quants, row after row ([rows][blocks][16 or 32 bytes]), then every
// block's scale ([rows][blocks], f16). Plain C++ so the CPU tests check it; the CUDA backend
// repacks these matrices on upload.
#pragma once

#include "iwb/kernels/ggml_type.h"

#include <cstdint>

namespace iwb {

// Types with a split layout: Q4_0 and Q8_0.
bool has_split_blocks(GgmlType type);

// Bytes of one block's quants: 16 (Q4_0) or 32 (Q8_0); 0 for other types.
int64_t split_quant_bytes(GgmlType type);

// Byte offset of the scales (after every block's quants): rows * blocks * split_quant_bytes.
inline int64_t split_scales_offset(GgmlType type, int64_t rows, int64_t in_features) {
  return rows * (in_features / 32) * split_quant_bytes(type);
}

// GGUF rows (rows x in_features, in_features a multiple of 32) to the split layout in dst (the
// same number of bytes, not overlapping src). False for another type or sizes that are not.
bool repack_split_blocks(GgmlType type, const void* src, int64_t rows, int64_t in_features, void* dst);

// Back to GGUF rows (the tests' inverse).
bool unpack_split_blocks(GgmlType type, const void* src, int64_t rows, int64_t in_features, void* dst);

}  // namespace iwb
