// The Serving tab's charts while a run goes: TTFT and ITL p50/p99 over a sliding window of
// finished requests, output tokens/s, the server's KV-cache usage and running/waiting requests
// (from its /metrics), and acceptance per draft position when the server speculates.
#pragma once

#include "serving/serving_worker.h"

#include <QWidget>

class QCustomPlot;
class QCPBars;
class QCPItemText;

namespace iwb::ui {

class ServingLiveCharts : public QWidget {
  Q_OBJECT

 public:
  explicit ServingLiveCharts(QWidget* parent = nullptr);

  void clear();
  void addSample(const ServingLiveSample& sample);
  int numSamples() const { return m_numSamples; }

  QCustomPlot* latencyPlot() const { return m_latency; }
  QCustomPlot* throughputPlot() const { return m_throughput; }
  QCustomPlot* serverPlot() const { return m_server; }
  QCustomPlot* acceptancePlot() const { return m_acceptance; }

 private:
  void rescale();

  QCustomPlot* m_latency;
  QCustomPlot* m_throughput;
  QCustomPlot* m_server;
  QCustomPlot* m_acceptance;
  QCPBars* m_acceptanceBars = nullptr;
  QCPItemText* m_acceptanceNote = nullptr;  // "not reported" while there are no bars
  int m_numSamples = 0;
};

}  // namespace iwb::ui
