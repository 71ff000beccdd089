// The Speculative tab's four charts (QCustomPlot): acceptance rate per draft position, the
// histogram of accepted lengths, draft and verify time per step, and the tokens/s predicted
// for each K from the measured acceptance and costs (the suggested K highlighted).
#pragma once

#include "worker/spec_values.h"

#include <QList>
#include <QWidget>

class QCustomPlot;

namespace iwb::ui {

class SpecCharts : public QWidget {
  Q_OBJECT

 public:
  explicit SpecCharts(QWidget* parent = nullptr);

  // Redraws from these numbers (steps may be empty: the time chart then stays empty).
  void showStats(const iwb::spec::SpeculationStats& stats, const QList<SpeculationStep>& steps,
                 const iwb::spec::DraftLengthSuggestion& suggestion);

 private:
  QCustomPlot* m_acceptance;
  QCustomPlot* m_histogram;
  QCustomPlot* m_times;
  QCustomPlot* m_predicted;
};

}  // namespace iwb::ui
