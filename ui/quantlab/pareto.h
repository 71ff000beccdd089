// The Pareto front of a set of points: those no other point beats on both axes (at least as
// good on both and better on one). The quantization lab marks it on its trade-off charts.
#pragma once

#include <vector>

namespace iwb::ui {

struct ParetoPoint {
  double x = 0;
  double y = 0;
};

// Indices of the front, sorted by x. is_x_lower_better / is_y_lower_better say which way is
// good on each axis (size: lower; tokens/s: higher).
std::vector<int> paretoFront(const std::vector<ParetoPoint>& points, bool isXLowerBetter, bool isYLowerBetter);

}  // namespace iwb::ui
