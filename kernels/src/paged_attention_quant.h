// Paged attention and the K/V write over a quantized KV cache (private to kernels/src; layout
// in paged_attention.h): keys and values each f16 or one of the 32-value block types, chosen
// separately. Arguments must already be valid.
#pragma once

#include "iwb/kernels/paged_attention.h"

namespace iwb::detail {

// is_reference: one thread, double accumulation (the twin the fast path is tested against);
// otherwise one task per (query token, KV head): each key and value row is expanded to f32
// once and serves every query head of the group.
bool paged_attention_quant(const PagedAttentionArgs& args, bool is_reference);
// f32 -> the cache types with ggml's reference rounding (quantize_row_*_ref, no imatrix), the
// rounding llama.cpp's cache uses; false, writing nothing, when a value has no form in a type.
bool write_kv_paged_quant(const WriteKvPagedArgs& args);
// n values of one head row of a `type` cache at `src` as f32 (n a multiple of 32 for block types).
void expand_kv_row(GgmlType type, const uint16_t* src, float* dst, int64_t n);

}  // namespace iwb::detail
