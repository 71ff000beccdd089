// The Speculative tab: turns speculative decoding on for the chat and every request (drafter,
// draft model file, K, adaptive K), runs a prompt with and without speculation to measure the
// real speedup, and shows live what the verifications accept: per position, accepted-length
// histogram, draft and verify time per step, the K the measurements suggest, a table of runs
// (per request; the charts show the selected one, or all steps overall), and the last reply
// with its accepted draft tokens coloured.
#pragma once

#include "worker/spec_values.h"

#include <QList>
#include <QWidget>

class QCheckBox;
class QDoubleSpinBox;
class QComboBox;
class QLabel;
class QLineEdit;
class QPlainTextEdit;
class QPushButton;
class QSpinBox;
class QTableView;
class QTextEdit;

namespace iwb::ui {

class EngineController;
class SpecCharts;
class SpecRunsModel;

class SpecPanel : public QWidget {
  Q_OBJECT

 public:
  explicit SpecPanel(EngineController* engine, QWidget* parent = nullptr);

  SpecRunsModel* model() const { return m_model; }
  // The settings the widgets hold now (not necessarily applied yet).
  SpeculationSettings settings() const;
  void setSettings(const SpeculationSettings& settings);
  // Applies the widgets' settings to the engine (speculationChanged confirms).
  void apply();
  // Runs the prompt: a plain baseline first when asked, then with speculation. False when it
  // cannot start (no model, speculation off, a run in progress), with the reason shown.
  bool runComparison();
  bool isRunning() const { return !m_pendingRuns.isEmpty() || m_runningRequest != 0; }
  // The reply view's text with accepted draft tokens marked (tests): HTML.
  QString replyHtml() const;

 signals:
  // The comparison's runs all finished.
  void comparisonFinished();

 private:
  void startNextRun();
  void handleRunEnded(quint64 requestId);
  void handleDraftTokens(quint64 requestId, const QString& text, bool isDraft);
  void handleSpeculationChanged(const SpeculationSettings& settings, const QString& error);
  void refresh();
  void updateEnabled();
  void browseDraftModel();

  EngineController* m_engine;
  SpecRunsModel* m_model;
  QComboBox* m_kind;
  QLineEdit* m_draftPath;
  QPushButton* m_browse;
  QSpinBox* m_numDraft;
  QCheckBox* m_adaptive;
  QDoubleSpinBox* m_minProbability;
  QPushButton* m_apply;
  QLabel* m_settingsStatus;
  QPlainTextEdit* m_prompt;
  QSpinBox* m_maxTokens;
  QCheckBox* m_withBaseline;
  QPushButton* m_run;
  QPushButton* m_clear;
  QLabel* m_summary;
  SpecCharts* m_charts;
  QTableView* m_table;
  QTextEdit* m_reply;

  QList<int> m_pendingRuns;  // K of the runs still to start (0: baseline, -1: the setting)
  quint64 m_runningRequest = 0;
  quint64 m_replyRequest = 0;  // whose tokens the reply view shows
};

}  // namespace iwb::ui
