// Scale searches of the reference quantizers. Expression order is deliberate throughout
// (e.g. (w * x) * l, sums accumulated left to right): it reproduces ggml's float rounding.
#include "quantize_search.h"

#include <algorithm>
#include <cmath>

namespace iwb::detail {
namespace {

// The signed value of largest magnitude (ties keep the first), and that magnitude.
float signed_extreme(int n, const float* x, float* amax_out) {
  float max = 0.0f, amax = 0.0f;
  for (int i = 0; i < n; ++i) {
    const float ax = std::fabs(x[i]);
    if (ax > amax) {
      amax = ax;
      max = x[i];
    }
  }
  *amax_out = amax;
  return max;
}

int clamp_level(int l, int lo, int hi) { return std::max(lo, std::min(hi, l)); }

}  // namespace

float search_symmetric_scale(int n, int nmax, const float* x, const float* weights, int8_t* L) {
  float amax = 0.0f;
  const float max = signed_extreme(n, x, &amax);
  if (amax < kGroupMaxEps) {
    for (int i = 0; i < n; ++i) L[i] = 0;
    return 0.0f;
  }
  auto weight = [&](int i) { return weights ? weights[i] : x[i] * x[i]; };
  // The extreme maps to level -nmax, the one side with an extra level.
  float iscale = static_cast<float>(-nmax) / max;
  float sumlx = 0.0f, suml2 = 0.0f;
  for (int i = 0; i < n; ++i) {
    const int l = clamp_level(nearest_int(iscale * x[i]), -nmax, nmax - 1);
    L[i] = static_cast<int8_t>(l + nmax);
    const float w = weight(i);
    sumlx += w * x[i] * static_cast<float>(l);
    suml2 += w * static_cast<float>(l) * static_cast<float>(l);
  }
  // For fixed levels the best scale is sumlx / suml2 and the error falls by sumlx^2 / suml2.
  float scale = suml2 != 0.0f ? sumlx / suml2 : 0.0f;
  float best = scale * sumlx;
  for (int step = -9; step <= 9; ++step) {
    if (step == 0) continue;
    iscale = -(static_cast<float>(nmax) + 0.1f * static_cast<float>(step)) / max;
    sumlx = suml2 = 0.0f;
    for (int i = 0; i < n; ++i) {
      const int l = clamp_level(nearest_int(iscale * x[i]), -nmax, nmax - 1);
      const float w = weight(i);
      sumlx += w * x[i] * static_cast<float>(l);
      suml2 += w * static_cast<float>(l) * static_cast<float>(l);
    }
    if (suml2 > 0.0f && sumlx * sumlx > best * suml2) {
      for (int i = 0; i < n; ++i) {
        L[i] = static_cast<int8_t>(nmax + clamp_level(nearest_int(iscale * x[i]), -nmax, nmax - 1));
      }
      scale = sumlx / suml2;
      best = scale * sumlx;
    }
  }
  return scale;
}

float search_symmetric_scale_q3(int n, int nmax, const float* x, int8_t* L) {
  float amax = 0.0f;
  const float max = signed_extreme(n, x, &amax);
  if (amax < kGroupMaxEps) {
    for (int i = 0; i < n; ++i) L[i] = 0;
    return 0.0f;
  }
  const float iscale = static_cast<float>(-nmax) / max;
  float sumlx = 0.0f, suml2 = 0.0f;
  for (int i = 0; i < n; ++i) {
    const int l = clamp_level(nearest_int(iscale * x[i]), -nmax, nmax - 1);
    L[i] = static_cast<int8_t>(l);
    const float w = x[i] * x[i];
    sumlx += w * x[i] * static_cast<float>(l);
    suml2 += w * static_cast<float>(l) * static_cast<float>(l);
  }
  // Coordinate descent: re-level one value against the scale fitted to all the others.
  for (int pass = 0; pass < 5; ++pass) {
    int num_changed = 0;
    for (int i = 0; i < n; ++i) {
      const float w = x[i] * x[i];
      float slx = sumlx - w * x[i] * static_cast<float>(L[i]);
      if (slx > 0.0f) {
        float sl2 = suml2 - w * static_cast<float>(L[i]) * static_cast<float>(L[i]);
        const int new_l = clamp_level(nearest_int(x[i] * sl2 / slx), -nmax, nmax - 1);
        if (new_l != L[i]) {
          slx += w * x[i] * static_cast<float>(new_l);
          sl2 += w * static_cast<float>(new_l) * static_cast<float>(new_l);
          if (sl2 > 0.0f && slx * slx * suml2 > sumlx * sumlx * sl2) {
            L[i] = static_cast<int8_t>(new_l);
            sumlx = slx;
            suml2 = sl2;
            ++num_changed;
          }
        }
      }
    }
    if (num_changed == 0) break;
  }
  for (int i = 0; i < n; ++i) L[i] = static_cast<int8_t>(L[i] + nmax);
  return sumlx / suml2;
}

float search_scale_and_min(int n, int nmax, const float* x, const float* weights, uint8_t* L,
                           float* the_min, float rmin, float rdelta, int nstep, bool is_mad) {
  float min = x[0], max = x[0];
  float sum_w = weights[0];
  float sum_x = sum_w * x[0];
  for (int i = 1; i < n; ++i) {
    if (x[i] < min) min = x[i];
    if (x[i] > max) max = x[i];
    const float w = weights[i];
    sum_w += w;
    sum_x += w * x[i];
  }
  if (min > 0.0f) min = 0.0f;  // the offset only ever subtracts: levels start at or below 0
  if (max == min) {
    for (int i = 0; i < n; ++i) L[i] = 0;
    *the_min = -min;
    return 0.0f;
  }
  auto error_of = [&](float diff) { return is_mad ? std::fabs(diff) : diff * diff; };
  float iscale = static_cast<float>(nmax) / (max - min);
  float scale = 1.0f / iscale;
  float best_error = 0.0f;
  for (int i = 0; i < n; ++i) {
    L[i] = static_cast<uint8_t>(clamp_level(nearest_int(iscale * (x[i] - min)), 0, nmax));
    const float diff = scale * static_cast<float>(L[i]) + min - x[i];
    best_error += weights[i] * error_of(diff);
  }
  if (nstep < 1) {
    *the_min = -min;
    return scale;
  }
  uint8_t candidate[256];
  for (int step = 0; step <= nstep; ++step) {
    iscale = (rmin + rdelta * static_cast<float>(step) + static_cast<float>(nmax)) / (max - min);
    float sum_l = 0.0f, sum_l2 = 0.0f, sum_xl = 0.0f;
    for (int i = 0; i < n; ++i) {
      const int l = clamp_level(nearest_int(iscale * (x[i] - min)), 0, nmax);
      candidate[i] = static_cast<uint8_t>(l);
      const float w = weights[i];
      const float lf = static_cast<float>(l);
      sum_l += w * lf;
      sum_l2 += w * lf * lf;
      sum_xl += w * lf * x[i];
    }
    // Weighted least squares for x ~= scale * l + min over this candidate's levels.
    const float det = sum_w * sum_l2 - sum_l * sum_l;
    if (det > 0.0f) {
      float this_scale = (sum_w * sum_xl - sum_x * sum_l) / det;
      float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / det;
      if (this_min > 0.0f) {
        this_min = 0.0f;
        this_scale = sum_xl / sum_l2;
      }
      float error = 0.0f;
      for (int i = 0; i < n; ++i) {
        const float diff = this_scale * static_cast<float>(candidate[i]) + this_min - x[i];
        error += weights[i] * error_of(diff);
      }
      if (error < best_error) {
        for (int i = 0; i < n; ++i) L[i] = candidate[i];
        best_error = error;
        scale = this_scale;
        min = this_min;
      }
    }
  }
  *the_min = -min;
  return scale;
}

float search_positive_scale(int n, int nmax, const float* x, uint8_t* L, const float* weights) {
  float max = 0.0f;
  for (int i = 0; i < n; ++i) max = max > x[i] ? max : x[i];
  if (max == 0.0f) {
    for (int i = 0; i < n; ++i) L[i] = 0;
    return 0.0f;
  }
  float iscale = static_cast<float>(nmax) / max;
  for (int i = 0; i < n; ++i) L[i] = static_cast<uint8_t>(nearest_int(iscale * x[i]));
  const float scale = 1.0f / iscale;
  float best_error = 0.0f;
  for (int i = 0; i < n; ++i) {
    const float diff = x[i] - scale * static_cast<float>(L[i]);
    best_error += weights[i] * diff * diff;
  }
  for (int step = -4; step <= 4; ++step) {
    if (step == 0) continue;
    const float iscale_step = (0.1f * static_cast<float>(step) + static_cast<float>(nmax)) / max;
    const float scale_step = 1.0f / iscale_step;
    float error = 0.0f;
    for (int i = 0; i < n; ++i) {
      const int l = std::min(nmax, nearest_int(iscale_step * x[i]));
      const float diff = x[i] - scale_step * static_cast<float>(l);
      error += weights[i] * diff * diff;
    }
    if (error < best_error) {
      best_error = error;
      iscale = iscale_step;
    }
  }
  float sumlx = 0.0f, suml2 = 0.0f;
  for (int i = 0; i < n; ++i) {
    const int l = std::min(nmax, nearest_int(iscale * x[i]));
    L[i] = static_cast<uint8_t>(l);
    const float w = weights[i];
    sumlx += w * x[i] * static_cast<float>(l);
    suml2 += w * static_cast<float>(l) * static_cast<float>(l);
  }
  for (int pass = 0; pass < 5; ++pass) {
    int num_changed = 0;
    for (int i = 0; i < n; ++i) {
      const float w = weights[i];
      const float li = static_cast<float>(L[i]);
      float slx = sumlx - w * x[i] * li;
      float sl2 = suml2 - w * li * li;
      if (slx > 0.0f && sl2 > 0.0f) {
        const int new_l = std::min(nmax, nearest_int(x[i] * sl2 / slx));
        if (new_l != L[i]) {
          slx += w * x[i] * static_cast<float>(new_l);
          sl2 += w * static_cast<float>(new_l) * static_cast<float>(new_l);
          if (slx * slx * suml2 > sumlx * sumlx * sl2) {
            L[i] = static_cast<uint8_t>(new_l);
            sumlx = slx;
            suml2 = sl2;
            ++num_changed;
          }
        }
      }
    }
    if (num_changed == 0) break;
  }
  return suml2 != 0.0f ? sumlx / suml2 : 0.0f;
}

}  // namespace iwb::detail
