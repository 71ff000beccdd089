// SIMD bodies of the gated activations (private to kernels/src).
#pragma once

#include "cpu_features.h"

#include <cstdint>

namespace iwb::detail {

// out[i] = act(gate[i]) * up[i] for i < n; out may be gate or up.
using GatedRowFn = void (*)(const float* gate, const float* up, float* out, int64_t n);

// The AVX-512 or AVX2 body for SiLU (is_gelu false) or GELU-tanh; null on the portable path.
GatedRowFn select_gated_row(bool is_gelu, CpuPath path);

}  // namespace iwb::detail
