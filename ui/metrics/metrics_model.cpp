// MetricsModel: per-request rows through iwb::compute_request_metrics, and the token-time
// series behind the over-time charts.
#include "metrics/metrics_model.h"

#include "roofline/roofline_model.h"

#include <QLocale>

#include <cmath>
#include <limits>

namespace iwb::ui {
namespace {

constexpr int kMaxSeriesPoints = 20000;  // a long session keeps its newest points

QString milliseconds(double seconds, qint64 count = 1) {
  if (count <= 0) return QStringLiteral("—");
  return QStringLiteral("%1 ms").arg(seconds * 1000.0, 0, 'f', seconds < 0.1 ? 1 : 0);
}

QString rate(double tokensPerS) {
  return tokensPerS > 0 ? QStringLiteral("%1").arg(tokensPerS, 0, 'f', tokensPerS < 100 ? 1 : 0)
                        : QStringLiteral("—");
}

void breakLine(QVector<QPointF>& series, double x) {
  if (!series.isEmpty() && !std::isnan(series.constLast().y())) {
    series << QPointF(x, std::numeric_limits<double>::quiet_NaN());
  }
}

void trim(QVector<QPointF>& series) {
  if (series.size() > kMaxSeriesPoints) series.remove(0, series.size() - kMaxSeriesPoints);
}

}  // namespace

QString formatContendedShare(const RequestMeasurement& m) {
  if (m.numContendedRegions < 0 || m.numParallelRegions <= 0) return QStringLiteral("—");
  const double share = static_cast<double>(m.numContendedRegions) / static_cast<double>(m.numParallelRegions);
  return QStringLiteral("%1%").arg(share * 100.0, 0, 'f', m.numContendedRegions == 0 ? 0 : 1);
}

QString formatFraction(const std::optional<double>& fraction) {
  return fraction ? QStringLiteral("%1%").arg(*fraction * 100.0, 0, 'f', 1) : QStringLiteral("—");
}

MetricsModel::MetricsModel(QObject* parent) : QAbstractTableModel(parent) {}

int MetricsModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(m_rows.size());
}

int MetricsModel::columnCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : NumColumns; }

QVariant MetricsModel::data(const QModelIndex& index, int role) const {
  if (!index.isValid() || index.row() >= m_rows.size()) return {};
  const Row& r = m_rows.at(index.row());
  const RequestMeasurement& m = r.measurement;
  const iwb::RequestMetrics& x = r.metrics;
  if (role == Qt::DisplayRole) {
    switch (index.column()) {
      case RequestColumn:
        return (m.requestId & kServedRequestBit) != 0 ? QStringLiteral("served #%1").arg(m.requestId & ~kServedRequestBit)
                                                      : QStringLiteral("#%1").arg(m.requestId);
      case ModelColumn: return m.modelName;
      case FinishColumn: return m.finishReason;
      case PromptTokensColumn: return QLocale().toString(m.timing.num_prompt_tokens);
      case GeneratedColumn: return QLocale().toString(m.numGeneratedTokens);
      case TtftColumn: return m.numGeneratedTokens > 0 ? milliseconds(x.ttft_seconds) : QStringLiteral("—");
      case ItlP50Column: return milliseconds(x.inter_token.p50, x.inter_token.count);
      case ItlP90Column: return milliseconds(x.inter_token.p90, x.inter_token.count);
      case ItlP99Column: return milliseconds(x.inter_token.p99, x.inter_token.count);
      case PromptRateColumn: return rate(x.prompt_tokens_per_s);
      case GenerationRateColumn: return rate(x.generation_tokens_per_s);
      case MbuColumn: return formatFraction(x.decode_mbu);
      case MfuColumn: return formatFraction(x.prefill_mfu);
      case ContentionColumn: return formatContendedShare(m);
    }
  } else if (role == Qt::TextAlignmentRole) {
    if (index.column() >= PromptTokensColumn) return QVariant::fromValue(Qt::AlignRight | Qt::AlignVCenter);
  } else if (role == Qt::ToolTipRole) {
    if (index.column() == MbuColumn || index.column() == MfuColumn) {
      return tr("Prefill: MFU %1, MBU %2\nDecode: MBU %3, MFU %4\nAgainst %5 and %6 (the probed ceilings)")
          .arg(formatFraction(x.prefill_mfu), formatFraction(x.prefill_mbu), formatFraction(x.decode_mbu),
               formatFraction(x.decode_mfu), formatBytesPerSecond(m_ceilings.bandwidth_bytes_per_s),
               formatFlopsPerSecond(m_ceilings.compute_roof(m.cost && m.cost->int8_dot_products)));
    }
    if (index.column() == ContentionColumn) {
      if (m.numContendedRegions < 0) return tr("Not measured: the request was not started by this window's worker");
      return tr("%1 of %2 parallel regions ran on fewer threads than asked: other work on the machine held the "
                "engine's workers back, and the thread pool gave up a thread for a while rather than wait for them "
                "(IWB_THREAD_ADAPT=0 turns this off)")
          .arg(m.numContendedRegions)
          .arg(m.numParallelRegions);
    }
    if (index.column() >= ItlP50Column && index.column() <= ItlP99Column) {
      return tr("%1 gaps between tokens: mean %2, min %3, max %4")
          .arg(x.inter_token.count)
          .arg(milliseconds(x.inter_token.mean, x.inter_token.count), milliseconds(x.inter_token.min, x.inter_token.count),
               milliseconds(x.inter_token.max, x.inter_token.count));
    }
  }
  return {};
}

QVariant MetricsModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (orientation != Qt::Horizontal) return {};
  if (role == Qt::ToolTipRole) {
    switch (section) {
      case TtftColumn: return tr("Time to first token, from the request being queued");
      case ItlP50Column: case ItlP90Column: case ItlP99Column: return tr("Inter-token latency percentiles");
      case MbuColumn: return tr("Model bandwidth utilisation of the decode: bytes per token x tokens/s over the "
                                "probed bandwidth");
      case MfuColumn: return tr("Model FLOP utilisation of the prefill: FLOPs per token x tokens/s over the probed "
                                "peak");
      case ContentionColumn: return tr("Share of the request's parallel regions run on fewer threads (busy CPU)");
    }
    return {};
  }
  if (role != Qt::DisplayRole) return {};
  switch (section) {
    case RequestColumn: return tr("Request");
    case ModelColumn: return tr("Model");
    case FinishColumn: return tr("Finished");
    case PromptTokensColumn: return tr("Prompt");
    case GeneratedColumn: return tr("Generated");
    case TtftColumn: return tr("TTFT");
    case ItlP50Column: return tr("ITL p50");
    case ItlP90Column: return tr("ITL p90");
    case ItlP99Column: return tr("ITL p99");
    case PromptRateColumn: return tr("Prompt tok/s");
    case GenerationRateColumn: return tr("Gen tok/s");
    case MbuColumn: return tr("MBU");
    case MfuColumn: return tr("MFU");
    case ContentionColumn: return tr("Busy CPU");
  }
  return {};
}

void MetricsModel::setCeilings(const iwb::Ceilings& ceilings) {
  m_ceilings = ceilings;
  for (Row& r : m_rows) {
    r.metrics = iwb::compute_request_metrics(r.measurement.timing, r.measurement.cost ? &*r.measurement.cost : nullptr,
                                             m_ceilings);
  }
  if (!m_rows.isEmpty()) emit dataChanged(index(0, 0), index(rowCount() - 1, NumColumns - 1));
  emit seriesChanged();  // the utilisation series follow the ceilings
}

void MetricsModel::addRequest(const RequestMeasurement& measurement) {
  // Token times that did not arrive live (or not all of them) come from the final timing.
  LiveRequest live = m_live.take(measurement.requestId);
  QList<double> missing;
  const auto& tokenSeconds = measurement.timing.token_seconds;
  for (size_t i = static_cast<size_t>(live.times.size()); i < tokenSeconds.size(); ++i) {
    missing << measurement.addedAtSeconds + tokenSeconds[i];
  }
  appendTimes(live, missing);

  Row row;
  row.measurement = measurement;
  row.metrics = iwb::compute_request_metrics(measurement.timing, measurement.cost ? &*measurement.cost : nullptr,
                                             m_ceilings);
  if (measurement.numGeneratedTokens > 0) {
    m_ttftSeries << QPointF(measurement.addedAtSeconds + row.metrics.ttft_seconds, row.metrics.ttft_seconds * 1000.0);
    trim(m_ttftSeries);
  }
  if (m_rows.size() >= kMaxRows) {
    beginRemoveRows({}, 0, 0);
    m_rows.removeFirst();
    endRemoveRows();
  }
  beginInsertRows({}, rowCount(), rowCount());
  m_rows << row;
  endInsertRows();
  emit seriesChanged();
}

void MetricsModel::appendTokenTimes(quint64 requestId, const QList<double>& sessionSeconds) {
  appendTimes(m_live[requestId], sessionSeconds);
  emit seriesChanged();
}

void MetricsModel::appendTimes(LiveRequest& live, const QList<double>& sessionSeconds) {
  for (const double t : sessionSeconds) {
    if (live.times.isEmpty()) {
      // A new request: its first token's wait is TTFT, not an inter-token gap, and its line
      // starts apart from the previous request's.
      breakLine(m_interTokenSeries, t);
      breakLine(m_rateSeries, t);
    } else {
      const qsizetype n = live.times.size();
      m_interTokenSeries << QPointF(t, (t - live.times.constLast()) * 1000.0);
      const qsizetype k = std::min<qsizetype>(kRateWindow, n);
      const double span = t - live.times.at(n - k);
      if (span > 0) m_rateSeries << QPointF(t, static_cast<double>(k) / span);
    }
    live.times << t;
  }
  trim(m_interTokenSeries);
  trim(m_rateSeries);
}

QVector<QPointF> MetricsModel::utilisationSeries(std::optional<double> iwb::RequestMetrics::*field) const {
  QVector<QPointF> series;
  for (const Row& r : m_rows) {
    const std::optional<double>& value = r.metrics.*field;
    const auto& times = r.measurement.timing.token_seconds;
    if (!value || times.empty()) continue;
    series << QPointF(r.measurement.addedAtSeconds + times.back(), *value * 100.0);
  }
  return series;
}

QVector<QPointF> MetricsModel::decodeMbuSeries() const { return utilisationSeries(&iwb::RequestMetrics::decode_mbu); }
QVector<QPointF> MetricsModel::prefillMfuSeries() const { return utilisationSeries(&iwb::RequestMetrics::prefill_mfu); }

void MetricsModel::clear() {
  beginResetModel();
  m_rows.clear();
  m_live.clear();
  m_rateSeries.clear();
  m_interTokenSeries.clear();
  m_ttftSeries.clear();
  endResetModel();
  emit seriesChanged();
}

}  // namespace iwb::ui
