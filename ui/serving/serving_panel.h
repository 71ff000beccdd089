// The Serving tab: puts load on a remote OpenAI-compatible endpoint (the settings of
// `iwb bench-serve`, one run or a concurrency sweep), draws it live (latency percentiles,
// throughput, the server's KV cache and queues, speculative acceptance), stores every run in
// the results store, and draws stored runs afterwards: one or two side by side as
// latency–throughput curves with SLO lines and the knee, the measured decode throughput beside
// a GPU's roofline bound, exported as CSV and PNG. The load runs on a ServingWorker thread.
#pragma once

#include "serving/serving_curve.h"

#include "iwb/engine/remote/bench_serve.h"

#include <QHash>
#include <QPointer>
#include <QWidget>

class QComboBox;
class QDoubleSpinBox;
class QLabel;
class QLineEdit;
class QPushButton;
class QSpinBox;
class QTabWidget;
class QTableView;
class QThread;

namespace iwb::ui {

class EngineController;
class RemoteEndpoints;
struct RemoteEndpointInfo;
class ServingBoundBox;
class ServingLiveCharts;
class ServingRunsModel;
class ServingSweepCharts;
class ServingWorker;
struct ServingLiveSample;

class ServingPanel : public QWidget {
  Q_OBJECT

 public:
  // `engine` (may be null) offers the open model's shape for the bound; `storePath` empty: the
  // default results store.
  explicit ServingPanel(EngineController* engine, const QString& storePath, QWidget* parent = nullptr);
  ~ServingPanel() override;

  // The connected endpoints (File › Connect to Server…); may stay unset: URLs can be typed.
  void setEndpoints(RemoteEndpoints* endpoints);

  // The form's settings as the engine's; an error message when they do not make a run.
  iwb::Result<iwb::remote::BenchServeConfig> config() const;
  void setConfig(const iwb::remote::BenchServeConfig& config);
  void setLabel(const QString& label);

  bool start();  // false, with the reason in the status line, when it cannot
  void stop();   // the run stops at its next check and is stored as interrupted
  bool isRunning() const { return m_isRunning; }
  QString statusText() const;

  void reloadRuns();
  // The shown runs: every point's statistics (CSV) or the three sweep charts (PNG).
  bool exportCsv(const QString& path, QString* error) const;
  bool exportPng(const QString& path) const;

  ServingRunsModel* runsModel() const { return m_runsModel; }
  ServingLiveCharts* liveCharts() const { return m_live; }
  ServingSweepCharts* sweepCharts() const { return m_sweep; }
  ServingBoundBox* boundBox() const { return m_bound; }
  QPushButton* startButton() const { return m_startButton; }
  QPushButton* stopButton() const { return m_stopButton; }

 signals:
  void runFinished(qint64 runId, const QString& status);
  void statusMessage(const QString& text);

 private:
  QWidget* makeSetupForm();
  QWidget* makeRunsBox();
  void refillEndpoints();
  void refillModels();
  const RemoteEndpointInfo* connectedEndpoint() const;
  void handleSample(const ServingLiveSample& sample);
  void handleFinished(qint64 runId, const iwb::remote::BenchServeResult& result, const QString& status,
                      const QString& error);
  void handleFailed(const QString& message);
  void showRuns(const QList<qint64>& ids);
  void updateBound();
  void updateEnabled();
  void setStatus(const QString& text);
  QString runName(qint64 id) const;
  void browseCsv();
  void browsePng();

  QString m_storePath;
  QPointer<RemoteEndpoints> m_endpoints;
  QThread* m_thread;
  ServingWorker* m_worker;
  bool m_isRunning = false;

  QComboBox* m_endpointBox;
  QComboBox* m_modelBox;
  QComboBox* m_datasetBox;
  QSpinBox* m_inputLenBox;
  QSpinBox* m_outputLenBox;
  QSpinBox* m_numPromptsBox;
  QDoubleSpinBox* m_rateBox;
  QDoubleSpinBox* m_burstinessBox;
  QSpinBox* m_concurrencyBox;
  QLineEdit* m_sweepEdit;
  QSpinBox* m_sharedPrefixBox;
  QDoubleSpinBox* m_ttftSloBox;
  QDoubleSpinBox* m_tpotSloBox;
  QLineEdit* m_labelEdit;
  QPushButton* m_startButton;
  QPushButton* m_stopButton;
  QLabel* m_statusLabel;

  QTabWidget* m_chartTabs;
  ServingLiveCharts* m_live;
  ServingSweepCharts* m_sweep;
  QComboBox* m_axisBox;
  ServingBoundBox* m_bound;
  ServingRunsModel* m_runsModel;
  QTableView* m_runsView;
  // Stored runs read for drawing, by id (a run still running is read again each time).
  QHash<qint64, iwb::remote::BenchServeResult> m_loaded;
  QList<qint64> m_shownIds;
};

}  // namespace iwb::ui
