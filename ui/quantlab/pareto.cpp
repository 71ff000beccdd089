// paretoFront: O(n^2) dominance test, plenty for the tens of runs a comparison holds.
#include "quantlab/pareto.h"

#include <algorithm>

namespace iwb::ui {

std::vector<int> paretoFront(const std::vector<ParetoPoint>& points, bool isXLowerBetter, bool isYLowerBetter) {
  auto betterOrEqual = [](double a, double b, bool lower) { return lower ? a <= b : a >= b; };
  auto better = [](double a, double b, bool lower) { return lower ? a < b : a > b; };
  std::vector<int> front;
  for (size_t i = 0; i < points.size(); ++i) {
    bool isDominated = false;
    for (size_t j = 0; j < points.size() && !isDominated; ++j) {
      if (i == j) continue;
      const ParetoPoint& a = points[j];
      const ParetoPoint& b = points[i];
      isDominated = betterOrEqual(a.x, b.x, isXLowerBetter) && betterOrEqual(a.y, b.y, isYLowerBetter) &&
                    (better(a.x, b.x, isXLowerBetter) || better(a.y, b.y, isYLowerBetter));
    }
    if (!isDominated) front.push_back(static_cast<int>(i));
  }
  std::sort(front.begin(), front.end(), [&](int a, int b) { return points[a].x < points[b].x; });
  return front;
}

}  // namespace iwb::ui
