// RMS normalisation: y = x / sqrt(mean(x^2) + eps) * w, row by row. Gemma's (1 + w) form needs
// no special case: llama.cpp's converter stores Gemma norm weights with the 1 already added.
#pragma once

#include "iwb/kernels/op_cost.h"

#include <cstdint>

namespace iwb {

struct RmsNormArgs {
  const float* input = nullptr;   // [num_rows x dim]
  const float* weight = nullptr;  // [dim], or null for a plain normalisation
  float* output = nullptr;        // [num_rows x dim]; may be the input (in place)
  int64_t num_rows = 0;
  int64_t dim = 0;
  float eps = 1e-6f;
  int num_threads = 0;  // 0: the engine's default (iwb::default_num_threads()); rows split among them
};

bool rmsnorm(const RmsNormArgs& args);
bool rmsnorm_ref(const RmsNormArgs& args);  // double accumulation
OpCost rmsnorm_cost(const RmsNormArgs& args);

}  // namespace iwb
