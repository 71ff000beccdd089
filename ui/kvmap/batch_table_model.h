// The requests of the batches the user ran from the KV Cache tab, one row each: request id,
// prompt, output so far, tokens, tokens per second and state. Fed from the engine controller's
// signals on the GUI thread; signals about other requests (the chat's) are ignored.
#pragma once

#include "worker/generation_values.h"

#include <QAbstractTableModel>
#include <QList>
#include <QString>

namespace iwb::ui {

class BatchTableModel : public QAbstractTableModel {
  Q_OBJECT

 public:
  enum Column { RequestColumn, PromptColumn, OutputColumn, TokensColumn, SpeedColumn, StateColumn, NumColumns };
  enum class State { Queued, Generating, Finished, Failed };

  struct Row {
    quint64 requestId = 0;
    QString prompt;
    QString output;
    State state = State::Queued;
    int numPromptTokens = 0;
    int numTokens = 0;           // generated so far (from token times), exact once finished
    double firstTokenSeconds = -1;  // session clock
    double lastTokenSeconds = -1;
    GenerationStats stats;       // once finished
    QString error;               // once failed
  };

  explicit BatchTableModel(QObject* parent = nullptr);

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

  // Rows for newly submitted requests (queued until the worker starts them).
  void addRequests(const QList<quint64>& requestIds, const QStringList& prompts);
  void clearFinished();
  const Row* find(quint64 requestId) const;
  const QList<Row>& rows() const { return m_rows; }
  // Requests of ours not finished or failed yet.
  QList<quint64> unfinishedRequests() const;
  int numUnfinished() const { return unfinishedRequests().size(); }
  // Decode speed: tokens after the first over the time since the first (0 before two tokens).
  static double tokensPerSecond(const Row& row);
  static QString stateText(const Row& row);

 public slots:
  void handleStarted(quint64 requestId, int numPromptTokens);
  void handleTokens(quint64 requestId, const QString& text);
  void handleTokenTimes(quint64 requestId, const QList<double>& sessionSeconds);
  void handleFinished(quint64 requestId, const iwb::ui::GenerationStats& stats);
  void handleFailed(quint64 requestId, const QString& message);

 signals:
  // A request of ours finished or failed; `numUnfinished` of them are left.
  void requestEnded(quint64 requestId, int numUnfinished);

 private:
  int rowOf(quint64 requestId) const;
  void changedRow(int row, int firstColumn, int lastColumn);

  QList<Row> m_rows;
};

}  // namespace iwb::ui
