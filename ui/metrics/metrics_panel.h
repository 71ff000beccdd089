// The Metrics tab: how long people wait for tokens. The latest request's figures in one line,
// charts of tokens/s, latency (inter-token gaps, time to first token) and utilisation (MBU,
// MFU per request) over the session, and
// a table of recent requests with TTFT, ITL p50/p90/p99, prompt and generation rates, MBU, MFU;
// beside it, the `iwb bench` runs stored in the results store.
#pragma once

#include <QWidget>

class QCustomPlot;
class QLabel;
class QTabWidget;
class QTableView;

namespace iwb::ui {

class BenchResultsModel;
class EngineController;
class MachineCeilings;
class MetricsModel;

class MetricsPanel : public QWidget {
  Q_OBJECT

 public:
  MetricsPanel(EngineController* engine, MachineCeilings* ceilings, QWidget* parent = nullptr);

  MetricsModel* model() const { return m_model; }
  BenchResultsModel* benchModel() const { return m_benchModel; }
  QCustomPlot* rateChart() const { return m_rateChart; }
  QCustomPlot* latencyChart() const { return m_latencyChart; }
  QCustomPlot* utilisationChart() const { return m_utilisationChart; }
  QString summaryText() const;

 public slots:
  // Re-reads the `iwb bench` runs from the results store.
  void reloadBenchResults();

 private:
  QWidget* createBenchPage();
  void updateCharts();
  void updateSummary();

  MachineCeilings* m_ceilings;
  MetricsModel* m_model;
  QLabel* m_summary;
  QLabel* m_ceilingsNote;
  QString m_ceilingsText;  // the note without a word on the latest request
  QCustomPlot* m_rateChart;
  QCustomPlot* m_latencyChart;
  QCustomPlot* m_utilisationChart;
  QTableView* m_table;
  QTabWidget* m_tables;
  BenchResultsModel* m_benchModel;
  QLabel* m_benchMessage = nullptr;
};

}  // namespace iwb::ui
