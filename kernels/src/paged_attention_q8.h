// Paged attention and the K/V write over an 8-bit (Q8_0) KV cache (private to kernels/src;
// layout in paged_attention.h). Arguments must already be valid.
#pragma once

#include "iwb/kernels/paged_attention.h"

namespace iwb::detail {

// is_reference: one thread, double accumulation (the twin the fast path is tested against);
// otherwise one OpenMP task per (query token, head), float accumulation.
bool paged_attention_q8(const PagedAttentionArgs& args, bool is_reference);
// f32 -> Q8_0 with ggml's rounding (quantize_row_q8_0_ref), head row by head row.
bool write_kv_paged_q8(const WriteKvPagedArgs& args);

}  // namespace iwb::detail
