// The data behind the Metrics tab: one row per finished request (time to first token,
// inter-token latency p50/p90/p99, prompt and generation tokens/s, MBU and MFU against the
// probed ceilings, and how much of its parallel work ran on fewer threads because the machine was
// busy), computed with the engine's metric functions, and the over-time series the
// charts draw (tokens/s and inter-token latency per token, TTFT per request) on one session
// clock. GUI thread only.
#pragma once

#include "worker/measurement_values.h"
#include "iwb/engine/profile/metrics.h"

#include <QAbstractTableModel>
#include <QHash>
#include <QList>
#include <QPointF>
#include <QVector>

namespace iwb::ui {

class MetricsModel : public QAbstractTableModel {
  Q_OBJECT

 public:
  enum Column { RequestColumn, ModelColumn, FinishColumn, PromptTokensColumn, GeneratedColumn, TtftColumn,
                ItlP50Column, ItlP90Column, ItlP99Column, PromptRateColumn, GenerationRateColumn,
                MbuColumn, MfuColumn, ContentionColumn, NumColumns };

  struct Row {
    RequestMeasurement measurement;
    iwb::RequestMetrics metrics;
  };

  // Tokens whose gaps make one point of the tokens/s series: smooth enough to read, short
  // enough to follow a change within a second.
  static constexpr int kRateWindow = 8;
  static constexpr int kMaxRows = 200;  // older requests leave the table

  explicit MetricsModel(QObject* parent = nullptr);

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

  // MBU and MFU divide by these; zero ceilings leave them empty. Recomputes every row.
  void setCeilings(const iwb::Ceilings& ceilings);
  const iwb::Ceilings& ceilings() const { return m_ceilings; }

  // A finished request (its token times also feed the series if they did not arrive live).
  void addRequest(const RequestMeasurement& measurement);
  // Token times (session seconds) of a request in progress, as they arrive.
  void appendTokenTimes(quint64 requestId, const QList<double>& sessionSeconds);
  void clear();

  const Row& row(int index) const { return m_rows.at(index); }
  const Row* latest() const { return m_rows.isEmpty() ? nullptr : &m_rows.constLast(); }

  // Over time, x in session seconds. A NaN y separates requests (the charts break the line).
  const QVector<QPointF>& tokenRateSeries() const { return m_rateSeries; }       // tokens/s
  const QVector<QPointF>& interTokenSeries() const { return m_interTokenSeries; } // milliseconds
  const QVector<QPointF>& ttftSeries() const { return m_ttftSeries; }             // milliseconds, at the first token
  // Per request, at its last token, in percent: the decode's MBU and the prefill's MFU (only
  // requests where the ceilings and the predicted work are known).
  QVector<QPointF> decodeMbuSeries() const;
  QVector<QPointF> prefillMfuSeries() const;

 signals:
  void seriesChanged();

 private:
  struct LiveRequest {
    QList<double> times;   // every token time seen so far, session seconds
  };
  void appendTimes(LiveRequest& live, const QList<double>& sessionSeconds);
  QVector<QPointF> utilisationSeries(std::optional<double> iwb::RequestMetrics::*field) const;

  iwb::Ceilings m_ceilings;
  QList<Row> m_rows;
  QHash<quint64, LiveRequest> m_live;  // requests whose tokens are arriving
  QVector<QPointF> m_rateSeries;
  QVector<QPointF> m_interTokenSeries;
  QVector<QPointF> m_ttftSeries;
};

// "42.0%" or "—" when unknown.
QString formatFraction(const std::optional<double>& fraction);
// The share of a request's parallel regions the thread pool ran on fewer threads: "0%" on a
// quiet machine, "25.0%", or "—" when not measured.
QString formatContendedShare(const RequestMeasurement& m);

}  // namespace iwb::ui
