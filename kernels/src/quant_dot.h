// Dot-product kernels behind matmul (private to kernels/src): integer dot products of
// quantized weight rows with 8-bit activation rows (with their activation quantizers) and
// f32 dot products of F16/BF16/F32 rows; per-row and per-tile kernels of each CPU path, and
// the table that picks them for a weight type.
#pragma once

#include "cpu_features.h"

#include "iwb/kernels/ggml_type.h"
#include "iwb/kernels/quant_blocks.h"

#include <cstddef>
#include <cstdint>

namespace iwb::detail {

// How a weight type wants its activations: 32-element Q8_1-style blocks (the partner of
// Q4_0/Q4_1/Q5_0/Q5_1/Q8_0 and of MXFP4, which ggml pairs with Q8_0: the same rounding) or
// 256-element Q8_K blocks (BlockQ8_K, the K-quants' partner).
enum class ActivationFormat { None, Q8_1, Q8_K };

// The Q8_1 trick in f32: x = d * q as ggml's Q8_1 and s = d * sum(q), both kept in f32 so
// neither adds fp16 rounding to a dot product. s folds each weight block's offset (-8 for
// Q4_0, -16 for Q5_0, -128 for the unsigned view of Q8_0) and its "+ m" (Q4_1/Q5_1) into one
// multiply-add per block: sum((w + c) * d * q) = sum(w * d * q) + c * s.
struct BlockQ8A {
  float d;            // amax / 127
  float s;            // d * sum(qs)
  int8_t qs[kQK8_0];  // round(x / d), -127..127
};
static_assert(sizeof(BlockQ8A) == 40);

ActivationFormat activation_format(GgmlType weight_type);
// Bytes of one quantized activation row of num_elements (a whole number of blocks).
size_t activation_row_bytes(ActivationFormat format, int64_t num_elements);

// Quantizes one row. Q8_1: qs exactly as quantize_row_q8_1_ref, d its unrounded f32 scale;
// Q8_K: exactly as quantize_row_q8_k_ref.
using QuantizeActivationFn = void (*)(const float* src, void* dst, int64_t num_elements);

// dot(weight row, activation row) over num_elements, both in their block formats.
using VecDotFn = float (*)(const void* weight_row, const void* activation_row, int64_t num_elements);
// Two tokens' dots of one row at once (out[0], out[1]), each equal to the one-token dot's.
using VecDot2Fn = void (*)(const void* weight_row, const void* activation0, const void* activation1,
                           int64_t num_elements, float* out);
// A few tokens' dots of one row at once (several sequences decoding together, a draft
// verified): out[t] = dot(row, activations[t]) for t < num_tokens (1..kMaxDecodeTokens), the
// row unpacked once and each token's result equal to the one-token dot's, bit for bit.
inline constexpr int kMaxDecodeTokens = 8;
using VecDotTokensFn = void (*)(const void* weight_row, const void* const* activations, int num_tokens,
                                int64_t num_elements, float* out);

// Register-blocked product of up to kTileRows weight rows with up to kTileTokens activation
// rows: out[r * kTileTokens + t] = dot(weight row r, activation row t). Each weight block is
// unpacked once for all the tile's tokens.
inline constexpr int kTileRows = 4;
inline constexpr int kTileTokens = 4;
using TileDotFn = void (*)(const uint8_t* weight, size_t weight_stride, int num_rows, const uint8_t* activation,
                           size_t activation_stride, int num_tokens, int64_t num_elements, float* out);

// Many-token product of up to gemm_rows (DotKernels) weight rows with num_tokens activation rows:
// out[t * out_stride + r] = dot(row r, token t) + bias[r] (bias may be null). The rows are
// repacked into `buffer` (quant_gemm_buffer_bytes(type, n), 64-byte aligned) once per call.
inline constexpr int kGemmRows = 16;  // the quantized types' GEMM rows
using QuantGemmFn = void (*)(const uint8_t* weight, size_t weight_stride, int num_rows, const uint8_t* activation,
                             size_t activation_stride, int64_t num_tokens, int64_t num_elements, const float* bias,
                             float* out, int64_t out_stride, uint8_t* buffer);

// Token-lane products of a few tokens (decoding several sequences; AVX-512 K-quants): pack
// rearranges up to kLaneMaxTokens activation rows (groups of kLaneTokens, one token per pair of
// 32-bit lanes; up to 4 tokens, four lanes each) into `packed` (lanes_packed_bytes(n,
// num_tokens), 64-byte aligned, the layout chosen by num_tokens alike in both calls), once per
// call; lanes then multiplies num_rows weight rows (a chunk of rows, in tiles of kLaneRows it
// prefetches ahead of itself) with them:
// out[t * out_stride + r] = dot(row r, token t) + bias[r] (bias may be null).
inline constexpr int kLaneTokens = 8;
inline constexpr int kLaneMaxTokens = 16;
inline constexpr int kLaneRows = 4;
using PackTokensFn = void (*)(const uint8_t* activation, size_t activation_stride, int num_tokens, int64_t num_elements,
                              uint8_t* packed);
using LanesDotFn = void (*)(const uint8_t* weight, size_t weight_stride, int num_rows, const uint8_t* packed,
                            int num_tokens, int64_t num_elements, const float* bias, float* out, int64_t out_stride);

// Activations a GEMM wants in a layout of its own (the AMX GEMMs' B tiles: bf16 hi + lo for
// float weights, quantized int8 blocks for the others), made once per matmul call by all
// threads instead of once per panel of rows: prepare writes up to
// kPreparedGroupTokens f32 rows (num_tokens of them, the rest of the group zero) into one
// group of prepared_group_bytes(in_features) bytes; the GEMM then receives the groups one after
// another, its activation_stride being the bytes of a group.
inline constexpr int kPreparedGroupTokens = 16;
using PrepareGroupFn = void (*)(const float* input, int64_t in_features, int num_tokens, uint8_t* out);
using PreparedGroupBytesFn = size_t (*)(int64_t in_features);

struct DotKernels {
  ActivationFormat format = ActivationFormat::None;  // None: the kernels read f32 activations
  QuantizeActivationFn quantize = nullptr;           // null with format None
  VecDotFn vec_dot = nullptr;
  VecDot2Fn vec_dot2 = nullptr;             // non-null: two tokens' vec_dot with each row unpacked once
  VecDotTokensFn vec_dot_tokens = nullptr;  // non-null: up to kMaxDecodeTokens tokens' vec_dot at once
  TileDotFn tile = nullptr;                 // null: the driver calls vec_dot per (row, token)
  QuantGemmFn gemm = nullptr;               // many tokens (AVX-512)
  int gemm_rows = kGemmRows;                // rows per gemm call
  int gemm_min_tokens = 8;                  // fewer tokens run the tiles (the repacking is not yet paid back)
  // True: the GEMM fetches the rows it will read ahead itself, spread over its work, and the
  // driver does not fetch the next panel before each call (matmul_driver.cpp).
  bool gemm_fetches_rows = false;
  PackTokensFn pack_tokens = nullptr;  // null: no token-lane kernel
  LanesDotFn lanes = nullptr;
  int lanes_min_tokens = kLaneMaxTokens + 1;  // lanes replace the tiles from this many tokens to kLaneMaxTokens
  PrepareGroupFn gemm_prepare = nullptr;      // non-null: gemm reads prepared activation groups
  PreparedGroupBytesFn gemm_prepared_group_bytes = nullptr;
  // One token (decode) on an activation layout of the kernel's own, where it has one: made by
  // decode_quantize once per call, decode_activation_bytes(n) bytes for n values; segments of
  // a row (matmul_driver.cpp) start at multiples of decode_group_blocks weight blocks.
  QuantizeActivationFn decode_quantize = nullptr;  // null: vec_dot on `format`
  VecDotFn decode_dot = nullptr;
  VecDot2Fn decode_dot2 = nullptr;             // non-null: two tokens' decode_dot with each row unpacked once
  VecDotTokensFn decode_dot_tokens = nullptr;  // non-null: up to kMaxDecodeTokens tokens' decode_dot at once
  // Products of up to this many tokens (at most kMaxDecodeTokens; more than 2 only with the
  // several-token kernel of the layout taken: decode_dot_tokens on the decode layout,
  // vec_dot_tokens on the format's) run as decode steps (matmul_plan.h).
  int decode_max_tokens = 2;
  int vec_max_tokens = 2;
  size_t (*decode_activation_bytes)(int64_t num_elements) = nullptr;
  int decode_group_blocks = 1;
  size_t decode_layout_max_bytes = 0;  // > 0: the layout only where a row's inputs take fewer bytes in it
};

// The kernels for `type` on `path`; false when there are none (Q2_K, Q3_K, and F16/BF16/F32
// on the portable path: those keep the dequantizing matmul).
bool select_dot_kernels(GgmlType type, CpuPath path, DotKernels* out);

// Per-path entry points (quant_dot_portable.cpp, quant_dot_avx2.cpp, quant_dot_avx_vnni.cpp, quant_dot_avx512.cpp,
// quant_tile_avx512.cpp, quantize_activations_simd.cpp). Each returns false for a type it
// does not cover.
bool select_quant_dot_portable(GgmlType type, DotKernels* out);
void quantize_q8a_portable(const float* src, void* dst, int64_t num_elements);
void quantize_q8k_portable(const float* src, void* dst, int64_t num_elements);
bool select_quant_dot_avx2(GgmlType type, DotKernels* out);
bool select_quant_dot_avx_vnni(GgmlType type, DotKernels* out);
bool select_quant_dot_avx512(GgmlType type, DotKernels* out);
TileDotFn select_quant_tile_avx512(GgmlType type);
bool select_float_dot_avx512(GgmlType type, DotKernels* out);
bool select_float_dot_avx2(GgmlType type, DotKernels* out);  // float_dot_avx2.cpp
inline constexpr int kFloatGemmAvx2Rows = 16;
size_t float_gemm_avx2_buffer_bytes(int64_t num_elements);
QuantGemmFn select_quant_gemm_avx512(GgmlType type);                // 32-element types
QuantGemmFn select_quant_gemm_kquant_avx512(GgmlType type);         // Q4_K, Q5_K, Q6_K
bool select_quant_lanes_avx512(GgmlType type, DotKernels* out);     // sets pack_tokens and lanes
bool select_decode_kernels_avx512(GgmlType type, DotKernels* out);  // sets the decode_* fields (Q4_0, VBMI)
size_t lanes_packed_bytes(int64_t num_elements, int num_tokens);
// AMX tiles (where has_amx_int8() / has_amx_bf16(); null otherwise): the same contract as the
// AVX-512 GEMMs, on panels of kQuantGemmAmxRows (kFloatGemmAmxRows) rows. The float GEMM
// takes its rows in panels of kFloatGemmAmxPanelRows and reuses each block of activation tiles
// across all of them (float_gemm_amx.cpp).
inline constexpr int kQuantGemmAmxRows = 64;
inline constexpr int kFloatGemmAmxRows = 128;
inline constexpr int kFloatGemmAmxPanelRows = 32;
QuantGemmFn select_quant_gemm_amx(GgmlType type);         // 32-element types
QuantGemmFn select_quant_gemm_kquant_amx(GgmlType type);  // Q4_K, Q5_K, Q6_K
QuantGemmFn select_float_gemm_amx(GgmlType type);         // F16, BF16
size_t quant_gemm_amx_buffer_bytes(int64_t num_elements);
size_t quant_gemm_kquant_amx_buffer_bytes(int64_t num_elements);
size_t float_gemm_amx_buffer_bytes(int64_t num_elements);
void float_gemm_amx_prepare(const float* input, int64_t num_elements, int num_tokens, uint8_t* out);
size_t float_gemm_amx_group_bytes(int64_t num_elements);
// The AMX GEMMs' activations: Q8_1-style (32-element types) or Q8_K blocks of 16 tokens as B
// tiles (prepared groups).
void quant_gemm_amx_prepare(const float* input, int64_t num_elements, int num_tokens, uint8_t* out);
size_t quant_gemm_amx_group_bytes(int64_t num_elements);
void quant_gemm_kquant_amx_prepare(const float* input, int64_t num_elements, int num_tokens, uint8_t* out);
size_t quant_gemm_kquant_amx_group_bytes(int64_t num_elements);
size_t quant_gemm_buffer_bytes(GgmlType type, int64_t num_elements);
// AVX2 (and AVX-VNNI) GEMMs of every quantized type with dot kernels, on panels of
// kQuantGemmAvx2Rows rows (quant_gemm_avx2.cpp).
inline constexpr int kQuantGemmAvx2Rows = 8;
QuantGemmFn select_quant_gemm_avx2(GgmlType type);
size_t quant_gemm_avx2_buffer_bytes(GgmlType type, int64_t num_elements);
size_t quant_gemm_kquant_buffer_bytes(int64_t num_elements);
size_t float_gemm_buffer_bytes(int64_t num_elements);
QuantizeActivationFn select_activation_quantizer(ActivationFormat format, CpuPath path);

}  // namespace iwb::detail
