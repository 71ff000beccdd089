// Softmax over rows: subtract the maximum, exponentiate, normalise.
#include "iwb/kernels/softmax.h"

#include <algorithm>
#include <cmath>

namespace iwb {
namespace {

bool valid(const SoftmaxArgs& a) { return a.data != nullptr && a.num_rows > 0 && a.row_length > 0; }

}  // namespace

void softmax_row(float* row, int64_t n) {
  if (n <= 0) return;
  const float max = *std::max_element(row, row + n);
  float sum = 0.0f;
  for (int64_t i = 0; i < n; ++i) {
    row[i] = std::exp(row[i] - max);
    sum += row[i];
  }
  const float inv = 1.0f / sum;
  for (int64_t i = 0; i < n; ++i) row[i] *= inv;
}

bool softmax(const SoftmaxArgs& a) {
  if (!valid(a)) return false;
  for (int64_t r = 0; r < a.num_rows; ++r) softmax_row(a.data + r * a.row_length, a.row_length);
  return true;
}

bool softmax_ref(const SoftmaxArgs& a) {
  if (!valid(a)) return false;
  for (int64_t r = 0; r < a.num_rows; ++r) {
    float* row = a.data + r * a.row_length;
    double max = row[0];
    for (int64_t i = 1; i < a.row_length; ++i) max = std::max<double>(max, row[i]);
    double sum = 0;
    for (int64_t i = 0; i < a.row_length; ++i) sum += std::exp(row[i] - max);
    for (int64_t i = 0; i < a.row_length; ++i) row[i] = static_cast<float>(std::exp(row[i] - max) / sum);
  }
  return true;
}

OpCost softmax_cost(const SoftmaxArgs& a) {
  OpCost cost;
  if (!valid(a)) return cost;
  const double n = static_cast<double>(a.num_rows) * static_cast<double>(a.row_length);
  cost.flops = 5.0 * n;  // max, subtract, exp (counted as one), sum, scale
  cost.bytes = 8.0 * n;
  return cost;
}

}  // namespace iwb
