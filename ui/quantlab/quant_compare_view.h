// Two lab runs side by side: every metric of each with the change from the first to the
// second, and the per-layer quantization error of each tensor kind (relative RMS error of
// attn_q, ffn_down ... by layer; the first run solid, the second dashed).
#pragma once

#include "iwb/engine/quant/model_quantizer.h"
#include "iwb/engine/quant/quant_run.h"

#include <QWidget>

#include <vector>

class QCustomPlot;
class QTableWidget;

namespace iwb::ui {

class QuantCompareView : public QWidget {
  Q_OBJECT

 public:
  explicit QuantCompareView(QWidget* parent = nullptr);

  // `b` may be null (one run selected); tensor lists may be empty (base runs have none).
  void setRuns(const iwb::quant::QuantRun* a, const std::vector<iwb::quant::QuantizedTensor>& tensorsA,
               const iwb::quant::QuantRun* b, const std::vector<iwb::quant::QuantizedTensor>& tensorsB);

  QTableWidget* table() const { return m_table; }
  // Graph count of the per-layer chart (tests): one per tensor kind per run.
  int numErrorGraphs() const;

 private:
  QTableWidget* m_table;
  QCustomPlot* m_errors;
};

}  // namespace iwb::ui
