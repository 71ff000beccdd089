// The quantization lab's trade-off charts (QCustomPlot): memory against KL divergence from the
// base (log scale), where memory is the weights plus the KV pool of a chosen number of
// sequences at a chosen context, so weight types and KV cache types share one chart; and
// generation tokens/s (at a context depth when measured) against perplexity. Each run a
// labelled point (circles: f16 KV cache, triangles: a quantized one), the Pareto front drawn as
// a line through the runs nothing beats on both axes.
#pragma once

#include "iwb/engine/quant/quant_run.h"

#include <QWidget>

#include <vector>

class QCustomPlot;

namespace iwb::ui {

class QuantCharts : public QWidget {
  Q_OBJECT

 public:
  explicit QuantCharts(QWidget* parent = nullptr);
  void setRuns(const std::vector<iwb::quant::QuantRun>& runs);
  // The memory axis's KV pool: numSequences sequences of `context` positions (redraws).
  void setMemoryBasis(qint64 context, qint64 numSequences);

  // A run's memory on the chart: weights (file size when not recorded) plus
  // kv_pool_bytes_for(its KV bytes per position, its block size, context, numSequences); -1
  // when the run has no KV figures (recorded before schema 8).
  static double memoryBytes(const iwb::quant::QuantRun& run, qint64 context, qint64 numSequences);

  // The labels of the front's points after the last setRuns, per chart (tests).
  const QStringList& memoryKlFront() const { return m_memoryKlFront; }
  const QStringList& speedPerplexityFront() const { return m_speedPerplexityFront; }
  int numSkippedForMemory() const { return m_skippedForMemory; }  // KL runs without KV figures
  QCustomPlot* memoryKlPlot() const { return m_memoryKl; }
  QCustomPlot* speedPerplexityPlot() const { return m_speedPerplexity; }

 private:
  QCustomPlot* m_memoryKl;
  QCustomPlot* m_speedPerplexity;
  std::vector<iwb::quant::QuantRun> m_runs;
  qint64 m_context = 8192;
  qint64 m_numSequences = 4;
  int m_skippedForMemory = 0;
  QStringList m_memoryKlFront;
  QStringList m_speedPerplexityFront;
};

}  // namespace iwb::ui
