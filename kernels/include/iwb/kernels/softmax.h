// Numerically stable softmax over each row, in place (subtracts the row maximum first).
#pragma once

#include "iwb/kernels/op_cost.h"

#include <cstdint>

namespace iwb {

struct SoftmaxArgs {
  float* data = nullptr;  // [num_rows x row_length]
  int64_t num_rows = 0;
  int64_t row_length = 0;
};

bool softmax(const SoftmaxArgs& args);
bool softmax_ref(const SoftmaxArgs& args);  // double accumulation
OpCost softmax_cost(const SoftmaxArgs& args);

// One row (used inside attention): in place over n values, returns false when n <= 0.
void softmax_row(float* row, int64_t n);

}  // namespace iwb
