// The "Quantization" tab: pick a source model and settings (weight types, with or without an
// importance matrix, KV cache types for keys and values, the long-context depth and the memory
// budget), run them as a queue on the engine's thread with progress and cancel; every
// stored run in a sortable table with the base model's reference row; trade-off charts with
// Pareto fronts; two selected runs side by side with their per-layer errors; CSV export.
#pragma once

#include "quantlab/quant_worker.h"

#include <QComboBox>
#include <QPointer>
#include <QWidget>

#include <map>

class QCheckBox;
class QDoubleSpinBox;
class QLabel;
class QLineEdit;
class QProgressBar;
class QPushButton;
class QSortFilterProxyModel;
class QSpinBox;
class QTableView;
class QThread;

namespace iwb::ui {

class EngineController;
class QuantCharts;
class QuantCompareView;
class QuantRunsModel;

class QuantLabPanel : public QWidget {
  Q_OBJECT

 public:
  // One compute owner at a time: the queue runs on `engine`'s worker thread, between its steps,
  // so chat and batch requests sent meanwhile wait in that thread's queue and are served when
  // the lab's queue ends. `engine` must outlive the panel (the panel cancels its queue when it
  // goes, so the engine thread can be joined). storePath: the results store (empty:
  // ResultsStore::default_path()); outputDir: where the queue writes its files (empty: the
  // application's data folder, quantlab/).
  explicit QuantLabPanel(EngineController* engine, const QString& storePath = {}, const QString& outputDir = {},
                         QWidget* parent = nullptr);
  // The tab alone (tests): no engine to share, so the queue gets a thread of its own.
  explicit QuantLabPanel(const QString& storePath = {}, const QString& outputDir = {}, QWidget* parent = nullptr);
  ~QuantLabPanel() override;

  // Where the queue computes: the engine's worker thread, or the panel's own without an engine.
  QThread* computeThread() const { return m_computeThread; }

  QuantRunsModel* model() const { return m_model; }
  QSortFilterProxyModel* proxy() const { return m_proxy; }
  QTableView* table() const { return m_table; }
  QuantCharts* charts() const { return m_charts; }
  QuantCompareView* compareView() const { return m_compare; }
  bool isRunning() const { return m_isRunning; }
  QString baseNote() const;

  // The settings the form shows, and the jobs its checked types make.
  QuantLabSettings settings() const;
  QVector<QuantJob> jobs() const;
  void setSourcePath(const QString& path);
  // Fills the source with `path` unless the user already chose one (the model the window opened).
  void suggestSourcePath(const QString& path);
  void setCheckedTypes(const QStringList& types, bool withImatrix);
  // The KV cache types to queue ("q8_0", ..., or keys/values "q8_0/q4_0": one pair at a time),
  // each run on the base and, with forEachWeightType, on every checked weight type too.
  void setKvTypes(const QStringList& kvTypes, bool forEachWeightType = false);
  QStringList kvTypes() const;

 public slots:
  void reload();
  // Starts the queue (the form's settings and jobs unless given); refused while one runs.
  bool startQueue();
  bool startQueue(const iwb::ui::QuantLabSettings& settings, const QVector<iwb::ui::QuantJob>& jobs);
  void cancel();
  bool exportCsv(const QString& path);
  // Selects runs by id for the side-by-side view (tests, and keeping a selection over reloads).
  void compareRuns(qint64 first, qint64 second);

 signals:
  void queueFinished(bool wasCancelled, const QString& summary);
  void statusMessage(const QString& text);

 private:
  QWidget* createForm();
  void connectWorker();
  void finishQueue(bool wasCancelled, const QString& summary);
  void onSelectionChanged();
  void updateViews();

  QString m_storePath;
  QString m_outputDir;
  QThread* m_ownThread = nullptr;  // only without an engine
  QThread* m_computeThread;
  QPointer<EngineController> m_engine;
  QPointer<QuantWorker> m_worker;  // lives on m_computeThread; deleted there
  bool m_isRunning = false;

  QLineEdit* m_source;
  QLineEdit* m_evalText;
  std::map<QString, QCheckBox*> m_typeBoxes;
  QCheckBox* m_imatrix;
  std::map<QString, QCheckBox*> m_kvBoxes;  // one type for keys and values
  QCheckBox* m_kvPair;                      // keys and values of their own types:
  QComboBox* m_kvKeys;
  QComboBox* m_kvValues;
  QCheckBox* m_kvEachType;  // the KV types on every weight type, not only the base
  QSpinBox* m_depth;
  QSpinBox* m_fitContext;
  QDoubleSpinBox* m_fitMemory;  // GiB
  QSpinBox* m_chartSequences;
  QSpinBox* m_context;
  QSpinBox* m_chunks;
  QSpinBox* m_threads;
  QPushButton* m_run;
  QPushButton* m_cancel;
  QProgressBar* m_progress;
  QLabel* m_stage;
  QLabel* m_note;

  QuantRunsModel* m_model;
  QSortFilterProxyModel* m_proxy;
  QTableView* m_table;
  QuantCharts* m_charts;
  QuantCompareView* m_compare;
};

}  // namespace iwb::ui
