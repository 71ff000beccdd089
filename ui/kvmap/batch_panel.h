// The KV Cache tab's batch area: a list of prompts (one per line), an option to put a long
// common system text before each (so their prompts share a prefix the cache can reuse), how
// many requests to run, and a table of their outputs streaming in. The requests go to the
// engine together; the chat keeps working beside them.
#pragma once

#include <QList>
#include <QWidget>

class QCheckBox;
class QLabel;
class QPlainTextEdit;
class QPushButton;
class QSpinBox;
class QTableView;

namespace iwb::ui {

class BatchTableModel;
class EngineController;
struct BatchInput;

class BatchPanel : public QWidget {
  Q_OBJECT

 public:
  explicit BatchPanel(EngineController* engine, QWidget* parent = nullptr);

  // The common text put before every prompt when "share a common prefix" is on.
  static QString sharedPrefixText();
  static QStringList defaultPrompts();

  BatchTableModel* model() const { return m_model; }
  QPlainTextEdit* promptsEdit() const { return m_prompts; }
  QCheckBox* sharePrefixBox() const { return m_sharePrefix; }
  QSpinBox* countBox() const { return m_count; }
  QSpinBox* maxTokensBox() const { return m_maxTokens; }
  QPushButton* runButton() const { return m_runButton; }
  QPushButton* stopButton() const { return m_stopButton; }
  QTableView* table() const { return m_table; }

  // The batch the form describes now: the non-empty prompt lines repeated in order up to the
  // count, the shared prefix when asked for, the max-tokens setting.
  BatchInput batchInput() const;

 public slots:
  // Submits batchInput(); returns the request ids (empty when nothing could be submitted).
  QList<quint64> runBatch();
  void stopBatch();

 signals:
  void batchSubmitted(const QList<quint64>& requestIds);

 private:
  void updateActions();

  EngineController* m_engine;
  BatchTableModel* m_model;
  QPlainTextEdit* m_prompts;
  QCheckBox* m_sharePrefix;
  QSpinBox* m_count;
  QSpinBox* m_maxTokens;
  QPushButton* m_runButton;
  QPushButton* m_stopButton;
  QPushButton* m_clearButton;
  QLabel* m_statusLabel;
  QTableView* m_table;
};

}  // namespace iwb::ui
