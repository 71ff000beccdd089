// Tiled paged attention for AVX-512 and AVX2 (private to kernels/src): runs of consecutive query
// tokens of one sequence, all query heads of one KV head together, keys in tiles of 64 (32 for
// head sizes above 128) with an online softmax, so no score row longer than a tile exists.
#pragma once

#include "iwb/kernels/paged_attention.h"

namespace iwb::detail {

// False (writing nothing) when the shapes are outside what the tiles handle (AVX-512: head_dim
// a multiple of 16 and head_dim_v of 64; AVX2: both multiples of 8) or the CPU has neither
// AVX-512 nor AVX2; the caller then runs the per-pair loop. Arguments must already be valid.
bool paged_attention_tiled(const PagedAttentionArgs& args);

// The same on the AVX2 kernels (paged_attention_tiles_avx2.cpp), whatever wider path the CPU
// has; false on CPUs without AVX2 (or IWB_CPU_PORTABLE=1). AVX-512 hosts take it for head
// sizes their own tiles decline.
bool paged_attention_tiled_avx2(const PagedAttentionArgs& args);

}  // namespace iwb::detail
