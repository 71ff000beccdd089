// Decode attention for AVX-512 and AVX2 (private to kernels/src): batches in which every query token is
// the only one of its sequence at its position run (a decode step of one or many sequences).
// Each work item is (token, KV head, up to 8 of the query heads that share it, a range of keys):
// the queries stay in L1 while the keys and values stream from the cache once, converted from
// f16 as they are multiplied (no transposed copy of each key tile, which left the tiled kernel
// at 8 GB/s of cache on a deep context), with the next keys prefetched in software. When the
// tokens and KV heads alone would leave threads idle (one sequence, few KV heads), the keys are
// split into ranges whose partial softmax sums are combined at the end (flash-decoding).
#pragma once

#include "iwb/kernels/paged_attention.h"

namespace iwb::detail {

// False (writing nothing) when the batch holds a run of consecutive positions of one sequence
// (a prompt: the tiled kernel shares its key tiles among the run), when head sizes are not
// multiples of 16 (AVX-512; 8 on AVX2) or exceed 512, when the CPU has neither AVX-512 nor AVX2,
// when the arguments ask for batch invariance, or when IWB_ATTENTION_DECODE=0.
// Arguments must already be valid.
bool paged_attention_decode(const PagedAttentionArgs& args);

// The same on the AVX2 kernels (paged_attention_decode_avx2.cpp), whatever wider path the CPU
// has; false on CPUs without AVX2 (or IWB_CPU_PORTABLE=1).
bool paged_attention_decode_avx2(const PagedAttentionArgs& args);

}  // namespace iwb::detail
