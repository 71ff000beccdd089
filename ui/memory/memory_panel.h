// The Memory tab: will the opened model fit, and where did memory go once it loaded. A fit
// banner, stacked bars (estimate, measured, available) and the table of the MemoryModel, with
// the device and the context the estimate is for.
#pragma once

#include <QWidget>

#include <vector>

#include "iwb/engine/backend/device_info.h"

class QCPItemText;
class QComboBox;
class QCustomPlot;
class QLabel;
class QSpinBox;
class QTableView;

namespace iwb {
struct ModelSummary;
}

namespace iwb::ui {

class EngineController;
struct EngineLoadOptions;
class MemoryModel;

class MemoryPanel : public QWidget {
  Q_OBJECT

 public:
  explicit MemoryPanel(EngineController* engine, QWidget* parent = nullptr);

  MemoryModel* model() const { return m_model; }
  QCustomPlot* chart() const { return m_chart; }
  QString fitText() const;

  // The opened model (before or without loading it into the engine).
  void setModelSummary(const iwb::ModelSummary& summary);
  void setContext(qint64 context);
  // Engine Settings (or the options the loaded model used): the KV pool estimate follows them,
  // and their context when they set one.
  void setEngineOptions(const EngineLoadOptions& options);

 public slots:
  // Re-reads the devices' free memory and asks the engine thread for a memory sample.
  void refresh();

 private:
  void updateView();
  void updateChart();
  void selectDevice(int index);

  EngineController* m_engine;
  MemoryModel* m_model;
  QComboBox* m_deviceBox;
  QSpinBox* m_contextBox;
  QLabel* m_fitLabel;
  QCustomPlot* m_chart;
  QCPItemText* m_availableLabel = nullptr;  // owned by the chart
  QTableView* m_table;
  std::vector<iwb::ComputeDeviceInfo> m_devices;
  qint64 m_settingsContext = 0;  // Engine Settings' context; 0: the engine's default
};

}  // namespace iwb::ui
