// Tiled paged attention for AVX-512 (private to kernels/src): runs of consecutive query tokens
// of one sequence, all query heads of one KV head together, keys in tiles of 64 (32 for head
// sizes above 128) with an online softmax, so no score row longer than a tile exists.
#pragma once

#include "iwb/kernels/paged_attention.h"

namespace iwb::detail {

// False (writing nothing) when the shapes are outside what the tiles handle (head_dim not a
// multiple of 16, head_dim_v not a multiple of 64) or the CPU lacks AVX-512; the caller then
// runs the per-pair loop. Arguments must already be valid.
bool paged_attention_tiled(const PagedAttentionArgs& args);

}  // namespace iwb::detail
