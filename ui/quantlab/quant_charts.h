// The quantization lab's trade-off charts (QCustomPlot): file size against KL divergence from
// the base (log scale), and generation tokens/s against perplexity; each run a labelled point,
// the Pareto front drawn as a line through the runs nothing beats on both axes.
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

  // The labels of the front's points after the last setRuns, per chart (tests).
  const QStringList& sizeKlFront() const { return m_sizeKlFront; }
  const QStringList& speedPerplexityFront() const { return m_speedPerplexityFront; }

 private:
  QCustomPlot* m_sizeKl;
  QCustomPlot* m_speedPerplexity;
  QStringList m_sizeKlFront;
  QStringList m_speedPerplexityFront;
};

}  // namespace iwb::ui
