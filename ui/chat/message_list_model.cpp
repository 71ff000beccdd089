// MessageListModel: rows of stored messages plus the streaming state of the last reply.
#include "chat/message_list_model.h"

#include "iwb/engine/chat/reply_parts.h"

#include <QCoreApplication>

namespace iwb::ui {

QString statsLineFor(const StoredMessage& message, bool isStreaming) {
  if (message.role != QLatin1String("assistant")) return {};
  if (isStreaming) return QCoreApplication::translate("MessageListModel", "generating…");
  if (!message.isComplete) {
    // Written by a periodic checkpoint and never finished: the program ended mid-reply.
    return QCoreApplication::translate("MessageListModel", "incomplete — the program ended while this reply was generated");
  }
  if (!message.stats.isValid()) return {};
  QString line = message.stats.summaryLine();
  if (message.stats.isError()) {
    line += QCoreApplication::translate("MessageListModel", " — the reply was cut off: %1").arg(message.stats.errorMessage);
  }
  return line;
}

MessageListModel::MessageListModel(QObject* parent) : QAbstractListModel(parent) {}

int MessageListModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(m_items.size());
}

QVariant MessageListModel::data(const QModelIndex& index, int role) const {
  if (!index.isValid() || index.row() >= m_items.size()) return {};
  const Item& it = m_items.at(index.row());
  switch (role) {
    case Qt::DisplayRole:
    case Qt::EditRole: return it.message.content;
    case Qt::ToolTipRole:
    case StatsLineRole: return statsLineFor(it.message, it.isStreaming);
    case RoleRole: return it.message.role;
    case MessageIdRole: return it.message.id;
    case IsStreamingRole: return it.isStreaming;
    case IsCompleteRole: return it.message.isComplete;
    case IsErrorRole: return it.message.stats.isError();
    case RevisionRole: return it.revision;
    case DraftRangesRole: return QVariant::fromValue(it.draftRanges);
    case ReasoningRole:
    case AnswerRole:
    case IsReasoningRole: {
      if (it.message.role != QLatin1String("assistant"))
        return role == AnswerRole ? QVariant(it.message.content) : QVariant();
      const QByteArray raw = it.message.content.toUtf8();
      const ReplyParts parts = split_reply(std::string_view(raw.constData(), size_t(raw.size())), it.isStreaming);
      if (role == IsReasoningRole) return parts.is_reasoning;
      return QString::fromStdString(role == ReasoningRole ? parts.reasoning : parts.content);
    }
    default: return {};
  }
}

void MessageListModel::setMessages(const QList<StoredMessage>& messages) {
  beginResetModel();
  m_items.clear();
  for (const StoredMessage& m : messages) m_items.push_back({m, false, 0});
  endResetModel();
}

void MessageListModel::clear() { setMessages({}); }

void MessageListModel::append(const StoredMessage& message, bool isStreaming) {
  const int row = static_cast<int>(m_items.size());
  beginInsertRows({}, row, row);
  m_items.push_back({message, isStreaming, 0});
  endInsertRows();
}

void MessageListModel::appendText(int row, const QString& text) {
  if (row < 0 || row >= m_items.size() || text.isEmpty()) return;
  Item& it = m_items[row];
  it.message.content += text;
  ++it.revision;
  const QModelIndex i = index(row);
  emit dataChanged(i, i, {Qt::DisplayRole, RevisionRole});
}

void MessageListModel::markDraft(int row, int start, int length) {
  if (row < 0 || row >= m_items.size() || length <= 0 || start < 0) return;
  Item& it = m_items[row];
  QList<QPoint>& ranges = it.draftRanges;
  if (!ranges.isEmpty() && ranges.back().x() + ranges.back().y() == start) ranges.back().ry() += length;  // one run
  else ranges.append(QPoint(start, length));
  ++it.revision;
  const QModelIndex i = index(row);
  emit dataChanged(i, i, {DraftRangesRole, RevisionRole});
}

void MessageListModel::markTokenProbability(int row, int start, int length, const TokenProbability& probability) {
  if (row < 0 || row >= m_items.size() || length <= 0 || start < 0) return;
  Item& it = m_items[row];
  it.tokenSpans.push_back({start, length, probability});
  ++it.revision;
  const QModelIndex i = index(row);
  emit dataChanged(i, i, {RevisionRole});
}

void MessageListModel::finish(int row, const QString& content, const GenerationStats& stats, bool isComplete) {
  if (row < 0 || row >= m_items.size()) return;
  Item& it = m_items[row];
  it.message.content = content;
  it.message.stats = stats;
  it.message.isComplete = isComplete;
  it.isStreaming = false;
  ++it.revision;
  const QModelIndex i = index(row);
  emit dataChanged(i, i);
}

void MessageListModel::truncate(int numToKeep) {
  numToKeep = qMax(0, numToKeep);
  if (numToKeep >= m_items.size()) return;
  beginRemoveRows({}, numToKeep, static_cast<int>(m_items.size()) - 1);
  m_items.resize(numToKeep);
  endRemoveRows();
}

int MessageListModel::rowOfMessage(qint64 messageId) const {
  for (int r = 0; r < m_items.size(); ++r) {
    if (m_items.at(r).message.id == messageId) return r;
  }
  return -1;
}

QList<ChatTurn> MessageListModel::turns(int numRows) const {
  if (numRows < 0 || numRows > m_items.size()) numRows = static_cast<int>(m_items.size());
  QList<ChatTurn> list;
  for (int r = 0; r < numRows; ++r) {
    const Item& it = m_items.at(r);
    if (it.isStreaming) continue;
    if (it.message.role == QLatin1String("assistant") && it.message.content.isEmpty()) continue;
    list.push_back({it.message.role, data(index(r), AnswerRole).toString()});
  }
  return list;
}

}  // namespace iwb::ui
