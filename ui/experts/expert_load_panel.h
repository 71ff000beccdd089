// The Experts tab: where a mixture-of-experts model's router sends the tokens. A heatmap of
// layers x experts (tokens routed over the layer's mean: 1 is an even share) over the engine's
// last steps, a summary of the window, and the per-layer balance table. Dense models and no
// model get a line saying why there is nothing to show.
#pragma once

#include <QWidget>

class QCPColorMap;
class QCPColorScale;
class QCustomPlot;
class QLabel;
class QSplitter;
class QTableView;

namespace iwb {
struct ExpertLoadSnapshot;
}

namespace iwb::ui {

class EngineController;
class ExpertLoadModel;

class ExpertLoadPanel : public QWidget {
  Q_OBJECT

 public:
  explicit ExpertLoadPanel(EngineController* engine, QWidget* parent = nullptr);

  ExpertLoadModel* model() const { return m_model; }
  QCustomPlot* heatmap() const { return m_plot; }
  QString summaryText() const;

  void setSnapshot(const iwb::ExpertLoadSnapshot& snapshot);

 private:
  void redraw();

  ExpertLoadModel* m_model;
  QLabel* m_summary;
  QSplitter* m_body;
  QCustomPlot* m_plot;
  QCPColorMap* m_map;
  QCPColorScale* m_scale;
  QTableView* m_table;
};

}  // namespace iwb::ui
