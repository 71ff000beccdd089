// Dequantization for the hot paths: AVX2 loops for the types models mostly ship in (F16, BF16,
// Q4_0, Q5_0, Q8_0, Q4_K, Q6_K), the reference loops for the rest. Same results as
// dequantize_row_ref up to float rounding; tested against it.
#pragma once

#include "iwb/kernels/ggml_type.h"

#include <cstdint>

namespace iwb {

// Same contract as dequantize_row_ref: false (writing nothing) for an unusable request.
bool dequantize_row(GgmlType type, const void* src, float* dst, int64_t num_elements);

// True when this CPU runs the AVX2/FMA/F16C paths (checked once at run time, so one binary
// serves older CPUs with the portable loops).
bool cpu_has_avx2_fma();

}  // namespace iwb
