// The Roofline tab: the "Profile kernels" switch, the chart of the engine's kernels under the
// machine's measured roofs (live while the model generates), the points as a table, export
// (PNG, SVG, CSV), "measure now" when the machine was never probed, and the analytic mode that
// places a model's ops from the cost model without running it.
#pragma once

#include "iwb/engine/profile/cost_model.h"

#include <QString>
#include <QWidget>

#include <optional>

class QAction;
class QCheckBox;
class QComboBox;
class QLabel;
class QPushButton;
class QSpinBox;
class QTableView;

namespace iwb {
struct ProfileSnapshot;
}

namespace iwb::ui {

class EngineController;
class MachineCeilings;
class RooflineModel;
class RooflinePlot;

class RooflinePanel : public QWidget {
  Q_OBJECT

 public:
  RooflinePanel(EngineController* engine, MachineCeilings* ceilings, QWidget* parent = nullptr);

  RooflineModel* model() const { return m_model; }
  RooflinePlot* plot() const { return m_plot; }
  // Checkable, in sync with the engine: the View menu shows the same action.
  QAction* profilingAction() const { return m_profilingAction; }

  // The model the analytic mode offers first ("the opened model"); empty path removes it.
  void setOpenedModel(const QString& path, const QString& name);
  // Predicts with the current analytic settings; false (and a message in the panel) on error.
  bool predict();
  // Selects the analytic model by preset name, or the opened model with an empty name.
  bool selectAnalyticModel(const QString& presetName);
  void setAnalyticScenario(int prefillTokens, int decodeBatch, int context);

  bool exportPng(const QString& path);
  bool exportSvg(const QString& path);
  bool exportCsv(const QString& path);

 private:
  QWidget* createToolbar();
  QWidget* createAnalyticBox();
  void updateRoofLabel();
  void updateStatusLabel();
  void handleSnapshot(const iwb::ProfileSnapshot& snapshot);
  void reportExport(bool isWritten, const QString& path);
  void updateAnalyticControls();

  EngineController* m_engine;
  MachineCeilings* m_ceilings;
  RooflineModel* m_model;
  RooflinePlot* m_plot;
  QTableView* m_table;
  QAction* m_profilingAction;

  QCheckBox* m_profileBox;
  QComboBox* m_sourceBox;
  QCheckBox* m_datasheetBox;
  QPushButton* m_exportButton;
  QLabel* m_roofLabel;
  QPushButton* m_measureButton;
  QLabel* m_statusLabel;

  QComboBox* m_analyticModelBox;
  QComboBox* m_weightTypeBox;
  QSpinBox* m_prefillBox;
  QSpinBox* m_decodeBatchBox;
  QSpinBox* m_contextBox;
  QLabel* m_analyticMessage;

  QString m_openedPath;
  QString m_openedName;
  std::optional<iwb::ModelShape> m_openedShape;  // read once per opened model
  QString m_openedShapeError;
};

}  // namespace iwb::ui
