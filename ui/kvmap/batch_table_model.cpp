// BatchTableModel: rows of batch requests, updated as their tokens, times and ends arrive.
#include "kvmap/batch_table_model.h"

#include <QBrush>
#include <QColor>

namespace iwb::ui {
namespace {

// Table cells show one line: newlines as visible marks, and the end of a long output (what is
// arriving now), the start of a long prompt.
QString oneLine(QString text) {
  text.replace(QLatin1Char('\n'), QStringLiteral(" ⏎ "));
  return text;
}

constexpr int kMaxCellChars = 400;

}  // namespace

BatchTableModel::BatchTableModel(QObject* parent) : QAbstractTableModel(parent) {}

int BatchTableModel::rowCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : int(m_rows.size()); }

int BatchTableModel::columnCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : NumColumns; }

double BatchTableModel::tokensPerSecond(const Row& row) {
  if (row.state == State::Finished) return row.stats.tokensPerSecond();
  const double span = row.lastTokenSeconds - row.firstTokenSeconds;
  return row.numTokens > 1 && span > 0 ? (row.numTokens - 1) / span : 0;
}

QString BatchTableModel::stateText(const Row& row) {
  switch (row.state) {
    case State::Queued: return tr("queued");
    case State::Generating: return row.numTokens == 0 ? tr("prompt") : tr("generating");
    case State::Finished: return row.stats.finishReason;
    case State::Failed: return tr("failed");
  }
  return {};
}

QVariant BatchTableModel::data(const QModelIndex& index, int role) const {
  if (!index.isValid() || index.row() >= m_rows.size()) return {};
  const Row& row = m_rows.at(index.row());
  if (role == Qt::DisplayRole) {
    switch (index.column()) {
      case RequestColumn: return QStringLiteral("#%1").arg(row.requestId);
      case PromptColumn: return oneLine(row.prompt.left(kMaxCellChars));
      case OutputColumn: return oneLine(row.state == State::Failed ? row.error : row.output.right(kMaxCellChars));
      case TokensColumn: return row.numTokens;
      case SpeedColumn: {
        const double speed = tokensPerSecond(row);
        return speed > 0 ? QString::number(speed, 'f', 1) : QString();
      }
      case StateColumn: return stateText(row);
    }
  } else if (role == Qt::ToolTipRole) {
    switch (index.column()) {
      case PromptColumn: return row.prompt;
      case OutputColumn: return row.state == State::Failed ? row.error : row.output;
      case StateColumn:
        return row.state == State::Finished ? row.stats.summaryLine() : (row.state == State::Failed ? row.error : QVariant());
    }
  } else if (role == Qt::TextAlignmentRole) {
    if (index.column() == TokensColumn || index.column() == SpeedColumn) {
      return QVariant::fromValue(Qt::AlignRight | Qt::AlignVCenter);
    }
  } else if (role == Qt::ForegroundRole && index.column() == StateColumn) {
    if (row.state == State::Failed || row.stats.isError()) return QBrush(QColor(180, 30, 30));
  }
  return {};
}

QVariant BatchTableModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (orientation != Qt::Horizontal || role != Qt::DisplayRole) return {};
  switch (section) {
    case RequestColumn: return tr("Request");
    case PromptColumn: return tr("Prompt");
    case OutputColumn: return tr("Output so far");
    case TokensColumn: return tr("Tokens");
    case SpeedColumn: return tr("tok/s");
    case StateColumn: return tr("State");
  }
  return {};
}

void BatchTableModel::addRequests(const QList<quint64>& requestIds, const QStringList& prompts) {
  if (requestIds.isEmpty()) return;
  beginInsertRows({}, int(m_rows.size()), int(m_rows.size() + requestIds.size() - 1));
  for (qsizetype i = 0; i < requestIds.size(); ++i) {
    Row row;
    row.requestId = requestIds.at(i);
    row.prompt = prompts.value(i);
    m_rows.append(row);
  }
  endInsertRows();
}

void BatchTableModel::clearFinished() {
  for (int i = int(m_rows.size()) - 1; i >= 0; --i) {
    const State s = m_rows.at(i).state;
    if (s != State::Finished && s != State::Failed) continue;
    beginRemoveRows({}, i, i);
    m_rows.removeAt(i);
    endRemoveRows();
  }
}

const BatchTableModel::Row* BatchTableModel::find(quint64 requestId) const {
  const int row = rowOf(requestId);
  return row >= 0 ? &m_rows.at(row) : nullptr;
}

QList<quint64> BatchTableModel::unfinishedRequests() const {
  QList<quint64> ids;
  for (const Row& row : m_rows) {
    if (row.state == State::Queued || row.state == State::Generating) ids << row.requestId;
  }
  return ids;
}

int BatchTableModel::rowOf(quint64 requestId) const {
  for (int i = 0; i < m_rows.size(); ++i) {
    if (m_rows.at(i).requestId == requestId) return i;
  }
  return -1;
}

void BatchTableModel::changedRow(int row, int firstColumn, int lastColumn) {
  emit dataChanged(index(row, firstColumn), index(row, lastColumn));
}

void BatchTableModel::handleStarted(quint64 requestId, int numPromptTokens) {
  const int i = rowOf(requestId);
  if (i < 0) return;
  m_rows[i].state = State::Generating;
  m_rows[i].numPromptTokens = numPromptTokens;
  changedRow(i, StateColumn, StateColumn);
}

void BatchTableModel::handleTokens(quint64 requestId, const QString& text) {
  const int i = rowOf(requestId);
  if (i < 0) return;
  Row& row = m_rows[i];
  if (row.output.isEmpty()) {  // a reply does not start with the template's blanks
    qsizetype start = 0;
    while (start < text.size() && text.at(start).isSpace()) ++start;
    row.output += text.mid(start);
  } else {
    row.output += text;
  }
  changedRow(i, OutputColumn, OutputColumn);
}

void BatchTableModel::handleTokenTimes(quint64 requestId, const QList<double>& sessionSeconds) {
  const int i = rowOf(requestId);
  if (i < 0 || sessionSeconds.isEmpty()) return;
  Row& row = m_rows[i];
  if (row.firstTokenSeconds < 0) row.firstTokenSeconds = sessionSeconds.constFirst();
  row.lastTokenSeconds = sessionSeconds.constLast();
  row.numTokens += int(sessionSeconds.size());
  changedRow(i, TokensColumn, StateColumn);
}

void BatchTableModel::handleFinished(quint64 requestId, const GenerationStats& stats) {
  const int i = rowOf(requestId);
  if (i < 0) return;
  Row& row = m_rows[i];
  row.state = stats.isError() ? State::Failed : State::Finished;
  row.stats = stats;
  row.numTokens = stats.numGeneratedTokens;
  if (stats.isError()) row.error = stats.errorMessage;
  changedRow(i, RequestColumn, StateColumn);
  emit requestEnded(requestId, numUnfinished());
}

void BatchTableModel::handleFailed(quint64 requestId, const QString& message) {
  const int i = rowOf(requestId);
  if (i < 0) return;
  m_rows[i].state = State::Failed;
  m_rows[i].error = message;
  changedRow(i, RequestColumn, StateColumn);
  emit requestEnded(requestId, numUnfinished());
}

}  // namespace iwb::ui
