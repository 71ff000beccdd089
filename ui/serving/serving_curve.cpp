// servingCurve and servingCsv: plain conversions of stored or fresh bench-serve results.
#include "serving/serving_curve.h"

#include <QStringList>

#include <map>

namespace iwb::ui {
namespace {

QString number(double v) { return QString::number(v, 'g', 10); }

QString optionalNumber(const std::optional<double>& v) { return v ? number(*v) : QString(); }

// A CSV field: quoted when it holds a separator, quote or line break.
QString field(const QString& text) {
  if (!text.contains(QLatin1Char(',')) && !text.contains(QLatin1Char('"')) && !text.contains(QLatin1Char('\n'))) {
    return text;
  }
  QString quoted = text;
  quoted.replace(QLatin1String("\""), QLatin1String("\"\""));
  return QLatin1Char('"') + quoted + QLatin1Char('"');
}

const char* const kLatencyNames[] = {"ttft", "tpot", "itl", "e2el"};
const char* const kStatNames[] = {"mean", "median", "p90", "p99", "min", "max", "count"};

QStringList latencyFields(const iwb::remote::LatencyStats& s) {
  return {number(s.mean), number(s.median), number(s.p90),           number(s.p99),
          number(s.min),  number(s.max),    QString::number(s.count)};
}

}  // namespace

QString pointLabel(const iwb::remote::BenchServePoint& point) {
  if (point.max_concurrency > 0) return QStringLiteral("c=%1").arg(point.max_concurrency);
  if (point.request_rate > 0) return QStringLiteral("rate %1/s").arg(point.request_rate);
  return QStringLiteral("inf");
}

ServingCurve servingCurve(const iwb::remote::BenchServeResult& result, LoadAxis axis, const QString& name) {
  ServingCurve c;
  c.name = name;
  // A point where every request failed has no latency to draw (its statistics are zeros, not
  // measurements): it stays out of the curve and the knee, and in the CSV.
  std::vector<iwb::remote::BenchServePoint> measured;
  for (const iwb::remote::BenchServePoint& p : result.points) {
    if (p.num_completed > 0) measured.push_back(p);
  }
  for (const iwb::remote::BenchServePoint& p : measured) {
    c.load << (axis == LoadAxis::OutputTokensPerS ? p.output_throughput : p.request_throughput);
    c.ttftP50 << p.ttft.median;
    c.ttftP99 << p.ttft.p99;
    c.itlP50 << p.itl.median;
    c.itlP99 << p.itl.p99;
    c.concurrency << p.max_concurrency;
    c.outputTokensPerS << p.output_throughput;
  }
  c.knee = iwb::remote::find_knee(iwb::remote::load_curve(measured), result.config.goodput);
  return c;
}

QString failureSummary(const iwb::remote::BenchServeResult& result) {
  qint64 numRequests = 0, numFailed = 0;
  std::map<std::string, int64_t> errors;
  QString first;
  for (const iwb::remote::BenchServePoint& p : result.points) {
    numRequests += p.num_completed + p.num_failed;
    numFailed += p.num_failed;
    for (const auto& [kind, count] : p.errors_by_kind) errors[kind] += count;
    for (const iwb::remote::RequestRecord& r : p.requests) {
      if (first.isEmpty() && r.error.kind != iwb::remote::RemoteErrorKind::None &&
          r.error.kind != iwb::remote::RemoteErrorKind::Cancelled) {
        first = QString::fromStdString(r.error.message);
      }
    }
  }
  if (numFailed == 0) return {};
  QStringList kinds;
  for (const auto& [kind, count] : errors)
    kinds << QStringLiteral("%1 %2").arg(count).arg(QString::fromStdString(kind));
  QString text = QStringLiteral("%1 of %2 requests failed (%3)")
                     .arg(numFailed)
                     .arg(numRequests)
                     .arg(kinds.join(QLatin1String(", ")));
  if (!first.isEmpty()) text += QStringLiteral(". First: ") + first;
  return text;
}

QString servingCsv(const iwb::remote::BenchServeResult& result, const QString& label) {
  QStringList header = {QStringLiteral("label"),
                        QStringLiteral("base_url"),
                        QStringLiteral("model"),
                        QStringLiteral("started_at"),
                        QStringLiteral("point"),
                        QStringLiteral("max_concurrency"),
                        QStringLiteral("request_rate"),
                        QStringLiteral("input_len"),
                        QStringLiteral("output_len"),
                        QStringLiteral("duration_s"),
                        QStringLiteral("completed"),
                        QStringLiteral("failed"),
                        QStringLiteral("errors"),
                        QStringLiteral("total_input_tokens"),
                        QStringLiteral("total_output_tokens"),
                        QStringLiteral("request_throughput"),
                        QStringLiteral("output_throughput"),
                        QStringLiteral("total_token_throughput"),
                        QStringLiteral("goodput")};
  for (const char* l : kLatencyNames) {
    for (const char* s : kStatNames)
      header << QStringLiteral("%1_%2%3").arg(QLatin1String(l), QLatin1String(s),
                                              QLatin1String(qstrcmp(s, "count") == 0 ? "" : "_ms"));
  }
  header << QStringLiteral("server_generation_tokens") << QStringLiteral("server_requests_finished")
         << QStringLiteral("server_preemptions") << QStringLiteral("server_prefix_cache_hit_rate")
         << QStringLiteral("server_spec_acceptance_rate");
  QStringList lines = {header.join(QLatin1Char(','))};
  const auto& cfg = result.config;
  for (size_t i = 0; i < result.points.size(); ++i) {
    const iwb::remote::BenchServePoint& p = result.points[i];
    QStringList errors;
    for (const auto& [kind, count] : p.errors_by_kind)
      errors << QStringLiteral("%1:%2").arg(QString::fromStdString(kind)).arg(count);
    QStringList row = {field(label),
                       field(QString::fromStdString(cfg.endpoint.base_url)),
                       field(QString::fromStdString(cfg.model)),
                       field(QString::fromStdString(result.started_at)),
                       QString::number(i + 1),
                       QString::number(p.max_concurrency),
                       number(p.request_rate),
                       QString::number(cfg.input_len),
                       QString::number(cfg.output_len),
                       number(p.duration_seconds),
                       QString::number(p.num_completed),
                       QString::number(p.num_failed),
                       field(errors.join(QLatin1Char(' '))),
                       QString::number(p.total_input_tokens),
                       QString::number(p.total_output_tokens),
                       number(p.request_throughput),
                       number(p.output_throughput),
                       number(p.total_token_throughput),
                       number(p.goodput)};
    for (const iwb::remote::LatencyStats* s : {&p.ttft, &p.tpot, &p.itl, &p.e2el}) row << latencyFields(*s);
    std::optional<double> hitRate, acceptance;
    if (p.server_delta) {
      const auto& d = *p.server_delta;
      if (d.prefix_cache_queries && d.prefix_cache_hits && *d.prefix_cache_queries > 0) {
        hitRate = *d.prefix_cache_hits / *d.prefix_cache_queries;
      }
      if (d.spec_num_draft_tokens && d.spec_num_accepted_tokens && *d.spec_num_draft_tokens > 0) {
        acceptance = *d.spec_num_accepted_tokens / *d.spec_num_draft_tokens;
      }
      row << optionalNumber(d.generation_tokens) << optionalNumber(d.num_requests_finished)
          << optionalNumber(d.num_preemptions);
    } else {
      row << QString() << QString() << QString();
    }
    row << optionalNumber(hitRate) << optionalNumber(acceptance);
    lines << row.join(QLatin1Char(','));
  }
  return lines.join(QLatin1Char('\n')) + QLatin1Char('\n');
}

}  // namespace iwb::ui
