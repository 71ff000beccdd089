// Matrix multiplication of a weight matrix kept in its stored GGUF type by f32 activations:
// y[t][o] = sum_i W[o][i] * x[t][i] (+ bias[o]). The fast path dequantizes a tile of weight rows
// into a reused per-thread buffer and dots it against every token, so prefill dequantizes each
// row once for the whole batch; matmul_ref is the plain twin it is tested against.
#pragma once

#include "iwb/kernels/ggml_type.h"
#include "iwb/kernels/op_cost.h"

#include <cstdint>

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
  int num_threads = 0;           // 0: OpenMP's default
};

// False (writing nothing) when the arguments are unusable: null pointers, negative or
// misaligned sizes, a type kernels/ cannot dequantize.
bool matmul_args_valid(const MatmulArgs& args);

// Fast path: SIMD dequantization and dot products where the CPU has them, rows split across
// OpenMP threads. No heap allocation once each thread's buffer has grown to the row length.
bool matmul(const MatmulArgs& args);

// Reference: whole-row reference dequantization, double-precision accumulation, one thread.
bool matmul_ref(const MatmulArgs& args);

OpCost matmul_cost(const MatmulArgs& args);

}  // namespace iwb
