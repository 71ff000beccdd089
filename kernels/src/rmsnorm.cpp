// RMS normalisation, fast (SIMD sum of squares) and reference (double) versions.
#include "iwb/kernels/rmsnorm.h"

#include "parallel.h"
#include "simd.h"

#include <cmath>

namespace iwb {
namespace {

bool valid(const RmsNormArgs& a) {
  return a.input != nullptr && a.output != nullptr && a.num_rows > 0 && a.dim > 0 && a.eps >= 0.0f;
}

}  // namespace

bool rmsnorm(const RmsNormArgs& a) {
  if (!valid(a)) return false;
  // A prompt's rows on all threads (a decode token's one row is below the threshold): each row
  // is computed the same whoever takes it.
  const int num_threads =
      a.num_rows > 1 && a.num_rows * a.dim >= detail::kMinParallelWork ? detail::resolve_threads(a.num_threads) : 1;
  detail::parallel_for_static(num_threads, a.num_rows, [&](int64_t r) {
    const float* x = a.input + r * a.dim;
    float* y = a.output + r * a.dim;
    const float mean_square = simd::dot_f32(x, x, a.dim) / static_cast<float>(a.dim);
    const float inv = 1.0f / std::sqrt(mean_square + a.eps);
    if (a.weight) {
      for (int64_t i = 0; i < a.dim; ++i) y[i] = x[i] * inv * a.weight[i];
    } else {
      for (int64_t i = 0; i < a.dim; ++i) y[i] = x[i] * inv;
    }
  });
  return true;
}

bool rmsnorm_ref(const RmsNormArgs& a) {
  if (!valid(a)) return false;
  for (int64_t r = 0; r < a.num_rows; ++r) {
    const float* x = a.input + r * a.dim;
    float* y = a.output + r * a.dim;
    double sum = 0;
    for (int64_t i = 0; i < a.dim; ++i) sum += static_cast<double>(x[i]) * x[i];
    const double inv = 1.0 / std::sqrt(sum / static_cast<double>(a.dim) + a.eps);
    for (int64_t i = 0; i < a.dim; ++i) {
      y[i] = static_cast<float>(x[i] * inv * (a.weight ? a.weight[i] : 1.0f));
    }
  }
  return true;
}

OpCost rmsnorm_cost(const RmsNormArgs& a) {
  OpCost cost;
  if (!valid(a)) return cost;
  const double n = static_cast<double>(a.num_rows) * static_cast<double>(a.dim);
  cost.flops = 4.0 * n;  // square-accumulate, then scale and weight each element
  cost.bytes = 8.0 * n + (a.weight ? 4.0 * static_cast<double>(a.dim) : 0.0);
  return cost;
}

}  // namespace iwb
