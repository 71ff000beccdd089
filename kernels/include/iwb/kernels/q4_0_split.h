// The GPU's layout of a Q4_0 matrix ("split"): the same bytes as GGUF's 18-byte blocks, regrouped
// so a warp reads them with aligned 16-byte loads. GGUF interleaves each block's f16 scale with
// its 16 bytes of nibbles, which leaves the nibbles only 2-byte aligned; the CUDA kernels then
// had to stage rows through shared memory and decode from 2-byte pieces, and were bound by
// instruction issue at about a third of an H100's bandwidth. Split: first every block's 16
// nibble bytes, row after row ([rows][blocks][16]), then every block's scale ([rows][blocks],
// f16). Plain C++ so the CPU tests check it; the CUDA backend repacks Q4_0 matrices on upload.
#pragma once

#include <cstdint>

namespace iwb {

// Bytes of the nibble part (the scales follow at this offset): rows * in_features / 2.
inline int64_t q4_0_split_scales_offset(int64_t rows, int64_t in_features) { return rows * (in_features / 2); }

// GGUF Q4_0 rows (rows x in_features, in_features a multiple of 32) to the split layout in
// dst (rows * in_features / 32 * 18 bytes, not overlapping src). False for sizes that are not.
bool repack_q4_0_split(const void* src, int64_t rows, int64_t in_features, void* dst);

// Back to GGUF rows (the tests' inverse).
bool unpack_q4_0_split(const void* src, int64_t rows, int64_t in_features, void* dst);

}  // namespace iwb
