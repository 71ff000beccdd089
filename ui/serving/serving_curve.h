// A bench-serve result as the Serving tab draws and exports it: the latency–throughput curve
// of a sweep (p50/p99 TTFT and ITL against the load each point achieved), its knee, the
// measured decode throughput per concurrency, and every statistic of every point as CSV.
#pragma once

#include "iwb/engine/remote/bench_serve.h"
#include "iwb/engine/remote/serve_knee.h"

#include <QString>
#include <QVector>

#include <optional>

namespace iwb::ui {

// What the curve's x axis is: the offered load each point achieved.
enum class LoadAxis { OutputTokensPerS, RequestsPerS };

struct ServingCurve {
  QString name;                                      // the run's label, or its server and model
  QVector<double> load;                              // x, per point (LoadAxis)
  QVector<double> ttftP50, ttftP99, itlP50, itlP99;  // ms, per point
  QVector<qint64> concurrency;                       // per point; 0 = no cap
  QVector<double> outputTokensPerS;                  // measured decode throughput, per point
  std::optional<iwb::remote::Knee> knee;
};

// Points without a completed request are left out (nothing measured to draw).
ServingCurve servingCurve(const iwb::remote::BenchServeResult& result, LoadAxis axis, const QString& name);

// "c=4" for a capped point, "rate 8/s" for an open-loop one, "inf" for neither.
QString pointLabel(const iwb::remote::BenchServePoint& point);

// "3 of 40 requests failed (2 http, 1 timeout). First: HTTP 400 …": the failures of a run and
// the first one's message (what the user can act on); empty when none failed. Cancelled
// requests (a Stop) count as failed but their message is not the first one shown.
QString failureSummary(const iwb::remote::BenchServeResult& result);

// One header line and one line per point: the run's label and settings, every throughput,
// every latency statistic (mean, median, p90, p99, min, max, count of TTFT, TPOT, ITL and
// end-to-end), errors by kind, and the server's own counters for the point when scraped.
QString servingCsv(const iwb::remote::BenchServeResult& result, const QString& label);

}  // namespace iwb::ui
