// RequestLogModel: rows appended at the end; errors in red.
#include "serve/request_log_model.h"

#include <QBrush>
#include <QColor>

namespace iwb::ui {

RequestLogModel::RequestLogModel(QObject* parent) : QAbstractTableModel(parent) {}

int RequestLogModel::rowCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : static_cast<int>(m_rows.size()); }

int RequestLogModel::columnCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : NumColumns; }

QVariant RequestLogModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (orientation != Qt::Horizontal || role != Qt::DisplayRole) return {};
  switch (section) {
    case TimeColumn: return tr("Time");
    case ClientColumn: return tr("Client");
    case RequestColumn: return tr("Request");
    case StatusColumn: return tr("Status");
    case PromptColumn: return tr("Prompt tokens");
    case GeneratedColumn: return tr("Generated");
    case SecondsColumn: return tr("Seconds");
    case OutcomeColumn: return tr("Outcome");
    default: return {};
  }
}

QVariant RequestLogModel::data(const QModelIndex& index, int role) const {
  if (!index.isValid() || index.row() >= m_rows.size()) return {};
  const RequestLogRow& r = m_rows.at(index.row());
  if (role == Qt::ForegroundRole) return r.status >= 400 ? QVariant(QBrush(QColor(200, 40, 40))) : QVariant();
  if (role == Qt::TextAlignmentRole) {
    const bool isNumber = index.column() == StatusColumn || index.column() == PromptColumn ||
                          index.column() == GeneratedColumn || index.column() == SecondsColumn;
    return isNumber ? QVariant(Qt::AlignRight | Qt::AlignVCenter) : QVariant();
  }
  if (role != Qt::DisplayRole) return {};
  switch (index.column()) {
    case TimeColumn: return r.time.toString(QStringLiteral("HH:mm:ss.zzz"));
    case ClientColumn: return r.client;
    case RequestColumn: return r.method + QLatin1Char(' ') + r.path;
    case StatusColumn: return r.status;
    case PromptColumn: return r.numPromptTokens;
    case GeneratedColumn: return r.numGeneratedTokens;
    case SecondsColumn: return QString::number(r.seconds, 'f', 3);
    case OutcomeColumn: return r.outcome;
    default: return {};
  }
}

void RequestLogModel::append(const RequestLogRow& row) {
  if (m_rows.size() >= kMaxRows) {
    beginRemoveRows({}, 0, 0);
    m_rows.removeFirst();
    endRemoveRows();
  }
  const int at = static_cast<int>(m_rows.size());
  beginInsertRows({}, at, at);
  m_rows.append(row);
  endInsertRows();
}

void RequestLogModel::clear() {
  beginResetModel();
  m_rows.clear();
  endResetModel();
}

}  // namespace iwb::ui
