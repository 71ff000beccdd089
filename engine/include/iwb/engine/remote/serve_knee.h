// The knee of a latency–throughput curve (a bench-serve sweep, one point per concurrency):
// the load to run a server at. With SLOs it is the highest-throughput point before p99 latency
// first breaks an SLO; without, the point after which throughput grows < 10% while p99 latency
// grows > 50% (more load only queues). docs/serving-tab.md explains the choice.
#pragma once

#include "iwb/engine/remote/bench_serve.h"

#include <cstddef>
#include <optional>
#include <vector>

namespace iwb::remote {

struct LoadCurvePoint {
  double throughput = 0;  // output tokens/s
  double p99_ttft_ms = 0;
  double p99_tpot_ms = 0;  // what the goodput SLO "tpot" limits
  double p99_itl_ms = 0;
};
std::vector<LoadCurvePoint> load_curve(const std::vector<BenchServePoint>& points);

enum class KneeRule {
  WithinSlo,   // the highest throughput before the first point whose p99 TTFT or TPOT breaks an SLO
  Saturation,  // no SLO: throughput stopped growing (< 10%) while p99 latency jumped (> 50%)
};

struct Knee {
  size_t index = 0;  // into the points, in the order given (offered load ascending)
  KneeRule rule = KneeRule::Saturation;
};

inline constexpr double kKneeMaxThroughputGain = 0.10;
inline constexpr double kKneeMinLatencyGrowth = 0.50;

// Points in the order they were offered (concurrency ascending). nullopt: with SLOs, when the
// first point already breaks one; without, when the curve never saturates (or has < 2 points).
std::optional<Knee> find_knee(const std::vector<LoadCurvePoint>& points, const GoodputSlo& slo);

}  // namespace iwb::remote
