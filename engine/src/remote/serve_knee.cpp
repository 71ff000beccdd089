// find_knee: the two rules of serve_knee.h over a sweep's p99 latencies and throughputs.
#include "iwb/engine/remote/serve_knee.h"

#include <algorithm>

namespace iwb::remote {
namespace {

bool meets_slo(const LoadCurvePoint& p, const GoodputSlo& slo) {
  if (slo.ttft_ms && p.p99_ttft_ms > *slo.ttft_ms) return false;
  if (slo.tpot_ms && p.p99_tpot_ms > *slo.tpot_ms) return false;
  return true;
}

// b / a - 1; 0 when a is not positive (nothing to grow from).
double growth(double a, double b) { return a > 0 ? b / a - 1.0 : 0.0; }

}  // namespace

std::vector<LoadCurvePoint> load_curve(const std::vector<BenchServePoint>& points) {
  std::vector<LoadCurvePoint> out;
  out.reserve(points.size());
  for (const BenchServePoint& p : points) out.push_back({p.output_throughput, p.ttft.p99, p.tpot.p99, p.itl.p99});
  return out;
}

std::optional<Knee> find_knee(const std::vector<LoadCurvePoint>& points, const GoodputSlo& slo) {
  if (points.empty()) return std::nullopt;
  if (slo.ttft_ms || slo.tpot_ms) {
    std::optional<size_t> best;
    for (size_t i = 0; i < points.size() && meets_slo(points[i], slo); ++i) {
      if (!best || points[i].throughput > points[*best].throughput) best = i;
    }
    if (!best) return std::nullopt;
    return Knee{*best, KneeRule::WithinSlo};
  }
  for (size_t i = 1; i < points.size(); ++i) {
    const LoadCurvePoint& a = points[i - 1];
    const LoadCurvePoint& b = points[i];
    const double latency_growth = std::max(growth(a.p99_ttft_ms, b.p99_ttft_ms), growth(a.p99_itl_ms, b.p99_itl_ms));
    if (growth(a.throughput, b.throughput) < kKneeMaxThroughputGain && latency_growth > kKneeMinLatencyGrowth) {
      return Knee{i - 1, KneeRule::Saturation};
    }
  }
  return std::nullopt;
}

}  // namespace iwb::remote
