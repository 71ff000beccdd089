// Per-type reference quantizers behind quantize_row_ref (private to kernels/src). Arguments
// are already checked: num_elements is a whole number of blocks, the input finite and within
// the type's range. imatrix (may be null) holds one importance weight per element.
#pragma once

#include "iwb/kernels/quant_blocks.h"

#include <cstdint>

namespace iwb::detail {

// 32-element formats. With an imatrix, Q4_0/Q4_1/Q5_0/Q5_1 take sigma^2 over all
// num_elements, as ggml does over one row.
void quantize_q4_0(const float* x, BlockQ4_0* y, int64_t num_elements, const float* imatrix);
void quantize_q4_1(const float* x, BlockQ4_1* y, int64_t num_elements, const float* imatrix);
void quantize_q5_0(const float* x, BlockQ5_0* y, int64_t num_elements, const float* imatrix);
void quantize_q5_1(const float* x, BlockQ5_1* y, int64_t num_elements, const float* imatrix);
void quantize_q8_0(const float* x, BlockQ8_0* y, int64_t num_elements);
void quantize_mxfp4(const float* x, BlockMxfp4* y, int64_t num_elements);

// 256-element K-quant super-blocks.
void quantize_q2_k(const float* x, BlockQ2_K* y, int64_t num_elements, const float* imatrix);
void quantize_q3_k(const float* x, BlockQ3_K* y, int64_t num_elements, const float* imatrix);
void quantize_q4_k(const float* x, BlockQ4_K* y, int64_t num_elements, const float* imatrix);
void quantize_q5_k(const float* x, BlockQ5_K* y, int64_t num_elements, const float* imatrix);
void quantize_q6_k(const float* x, BlockQ6_K* y, int64_t num_elements, const float* imatrix);

// Activation blocks for integer dot products.
void quantize_q8_1(const float* x, BlockQ8_1* y, int64_t num_elements);
void quantize_q8_k(const float* x, BlockQ8_K* y, int64_t num_elements);

}  // namespace iwb::detail
