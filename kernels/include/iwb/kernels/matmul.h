// Matrix multiplication of a weight matrix kept in its stored GGUF type by f32 activations:
// y[t][o] = sum_i W[o][i] * x[t][i] (+ bias[o]). For Q4_0/Q4_1/Q5_0/Q5_1/Q8_0/MXFP4/Q4_K/Q5_K/Q6_K
// weights the fast path quantizes the activations to 8-bit blocks once per call (as llama.cpp
// does) and uses integer dot products; F16/BF16/F32 weights on AVX-512 widen to f32 in
// registers; other cases dequantize a tile of weight rows into a per-thread buffer and dot it
// against every token. matmul_ref is the plain twin all of them are tested against.
#pragma once

#include "iwb/kernels/ggml_type.h"
#include "iwb/kernels/op_cost.h"

#include <cstddef>
#include <cstdint>
#include <span>

namespace iwb {

struct MatmulArgs {
  GgmlType weight_type = GgmlType::F32;
  const void* weight = nullptr;  // [out_features rows of in_features], row-major as GGUF stores it
  int64_t in_features = 0;       // row length (GGUF ne[0]); a multiple of the type's block size
  int64_t out_features = 0;      // rows (GGUF ne[1])
  const float* input = nullptr;  // [num_tokens x in_features]
  int64_t num_tokens = 0;
  const float* bias = nullptr;   // [out_features] or null
  float* output = nullptr;       // [num_tokens x out_features]; must not alias input
  int num_threads = 0;           // 0: the engine's default (iwb::default_num_threads())
  // Optional scratch for the quantized activations, matmul_scratch_bytes(...) bytes; null:
  // a buffer owned by the calling thread, grown once and reused.
  void* scratch = nullptr;
  size_t scratch_bytes = 0;
  // Keep the activations in f32 (the dequantizing path) even where an integer path exists:
  // for measurements that must not include the 8-bit rounding of the activations. This path
  // is also batch-invariant: a token's output is bit for bit the same whatever the number of
  // tokens in the call (the fast paths pick other kernels for one token, a few and many, whose
  // sums round differently), so greedy decoding gives the same tokens alone, batched or
  // verifying speculative guesses. The environment variable IWB_MATMUL_EXACT=1 sets it for
  // every call of the process.
  bool is_exact = false;
};

// False (writing nothing) when the arguments are unusable: null pointers, negative or
// misaligned sizes, a type kernels/ cannot dequantize.
bool matmul_args_valid(const MatmulArgs& args);

// Fast path: AVX-512 VNNI, AVX2 or portable kernels chosen at run time, rows split across
// OpenMP threads in contiguous ranges. No heap allocation once the per-thread buffers have
// grown (or at all, with caller scratch). The 8-bit activations cost accuracy: results agree
// with matmul_ref to about 1% of the largest output, where the f32 path agrees to 1e-5.
bool matmul(const MatmulArgs& args);

// Products of one input with several weight matrices (q, k and v; gate and up): each output as
// matmul(products[i]) computes it, bit for bit, but the input is quantized once and one
// parallel region runs all the rows, split across threads by weight bytes (decode pays one
// thread fork and join instead of one per matrix). The products must share input,
// in_features and num_tokens; num_threads and scratch come from the first. False (writing
// nothing) when they do not, when there are none or more than 8, or when one is invalid.
bool matmul_group(std::span<const MatmulArgs> products);

// Bytes of scratch matmul needs for these shapes (0 when the type takes its activations as
// f32: neither quantized nor split into bf16 tiles for AMX). Scratch smaller than this is not used (the thread's own buffer is).
size_t matmul_scratch_bytes(GgmlType weight_type, int64_t in_features, int64_t num_tokens);

// Reference: whole-row reference dequantization, double-precision accumulation, one thread.
bool matmul_ref(const MatmulArgs& args);

OpCost matmul_cost(const MatmulArgs& args);

}  // namespace iwb
