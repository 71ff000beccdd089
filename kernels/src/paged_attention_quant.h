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
// n values of one head row of a `type` cache at `src` as f32 (n a multiple of 32 for block types);
// FP8 values are multiplied by fp8_scale (the side's k_scale / v_scale).
void expand_kv_row(GgmlType type, const uint16_t* src, float* dst, int64_t n, float fp8_scale = 1.0f);

// A quantized side of the cache stores its head rows rotated by an orthonormal Walsh-Hadamard
// matrix H (Sylvester's, / sqrt(size)) applied to consecutive pieces of `size` values: a few
// large channels (a key bias) no longer set their blocks' scales alone, their energy is spread
// over the piece. Keys: queries are rotated alike, (Hq).(Hk) = q.k; values: the weighted sum is
// rotated back, H(sum w Hv) = sum w v (H is symmetric and its own inverse). llama.cpp does the
// same (64 for values, the largest power of two dividing the head size for keys).
// kv_rotation_size (paged_attention.h) gives the piece size; 0: the side is stored as it is
// (f16, fp8, or a head size that is not a multiple of 32).
// x[0 .. n) <- H x, piece by piece (n a multiple of size, size a power of two).
void hadamard_rotate(float* x, int64_t n, int64_t size);
void hadamard_rotate(double* x, int64_t n, int64_t size);

}  // namespace iwb::detail
