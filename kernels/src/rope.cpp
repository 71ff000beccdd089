// Rotary position embedding. The fast path computes each position's cos/sin table once and
// applies it to every head; the reference recomputes every angle in double.
#include "iwb/kernels/rope.h"

#include <cmath>
#include <vector>

namespace iwb {
namespace {

bool valid(const RopeArgs& a) {
  return a.data != nullptr && a.positions != nullptr && a.num_tokens > 0 && a.num_heads > 0 && a.head_dim > 0 &&
         a.num_rotated > 0 && a.num_rotated % 2 == 0 && a.num_rotated <= a.head_dim && a.freq_base > 0.0f &&
         a.freq_scale > 0.0f;
}

// The two elements pair i of a head rotates together.
inline void pair_indices(RopeLayout layout, int64_t i, int64_t num_rotated, int64_t* first, int64_t* second) {
  if (layout == RopeLayout::Normal) {
    *first = 2 * i;
    *second = 2 * i + 1;
  } else {
    *first = i;
    *second = i + num_rotated / 2;
  }
}

}  // namespace

bool rope(const RopeArgs& a) {
  if (!valid(a)) return false;
  const int64_t num_pairs = a.num_rotated / 2;
  // Angles in double: at position 4000 a float angle is already off by ~1e-4 radians, and the
  // table is computed once per position, so the precision costs nothing measurable.
  thread_local std::vector<double> inv_freq;
  thread_local std::vector<float> cos_table, sin_table;
  inv_freq.resize(static_cast<size_t>(num_pairs));
  cos_table.resize(static_cast<size_t>(num_pairs));
  sin_table.resize(static_cast<size_t>(num_pairs));
  for (int64_t i = 0; i < num_pairs; ++i) {
    double f = a.freq_scale * std::pow(static_cast<double>(a.freq_base), -2.0 * static_cast<double>(i) / a.num_rotated);
    if (a.freq_factors) f /= a.freq_factors[i];
    inv_freq[i] = f;
  }
  for (int64_t t = 0; t < a.num_tokens; ++t) {
    const double p = a.positions[t];
    for (int64_t i = 0; i < num_pairs; ++i) {
      const double theta = p * inv_freq[i];
      cos_table[i] = static_cast<float>(std::cos(theta));
      sin_table[i] = static_cast<float>(std::sin(theta));
    }
    for (int64_t h = 0; h < a.num_heads; ++h) {
      float* x = a.data + (t * a.num_heads + h) * a.head_dim;
      for (int64_t i = 0; i < num_pairs; ++i) {
        int64_t i0, i1;
        pair_indices(a.layout, i, a.num_rotated, &i0, &i1);
        const float x0 = x[i0], x1 = x[i1];
        x[i0] = x0 * cos_table[i] - x1 * sin_table[i];
        x[i1] = x0 * sin_table[i] + x1 * cos_table[i];
      }
    }
  }
  return true;
}

bool rope_ref(const RopeArgs& a) {
  if (!valid(a)) return false;
  const int64_t num_pairs = a.num_rotated / 2;
  for (int64_t t = 0; t < a.num_tokens; ++t) {
    for (int64_t h = 0; h < a.num_heads; ++h) {
      float* x = a.data + (t * a.num_heads + h) * a.head_dim;
      for (int64_t i = 0; i < num_pairs; ++i) {
        double theta = static_cast<double>(a.positions[t]) * a.freq_scale *
                       std::pow(static_cast<double>(a.freq_base), -2.0 * static_cast<double>(i) / a.num_rotated);
        if (a.freq_factors) theta /= a.freq_factors[i];
        int64_t i0, i1;
        pair_indices(a.layout, i, a.num_rotated, &i0, &i1);
        const double x0 = x[i0], x1 = x[i1];
        x[i0] = static_cast<float>(x0 * std::cos(theta) - x1 * std::sin(theta));
        x[i1] = static_cast<float>(x0 * std::sin(theta) + x1 * std::cos(theta));
      }
    }
  }
  return true;
}

OpCost rope_cost(const RopeArgs& a) {
  OpCost cost;
  if (!valid(a)) return cost;
  const double rotated = static_cast<double>(a.num_tokens) * static_cast<double>(a.num_heads) *
                         static_cast<double>(a.num_rotated);
  cost.flops = 3.0 * rotated;  // per element: two multiplies and an add
  cost.bytes = 8.0 * static_cast<double>(a.num_tokens) * static_cast<double>(a.num_heads) *
               static_cast<double>(a.head_dim);
  return cost;
}

}  // namespace iwb
