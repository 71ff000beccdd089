// ServingRunsModel: stored serve runs as table rows, with the "shown" ticks kept by run id.
#include "serving/serving_runs_model.h"

#include <QDateTime>

#include <algorithm>

namespace iwb::ui {

ServingRunsModel::ServingRunsModel(QObject* parent) : QAbstractTableModel(parent) {}

void ServingRunsModel::setRuns(const std::vector<iwb::ResultsStore::ServeRunSummary>& runs) {
  beginResetModel();
  m_runs.assign(runs.rbegin(), runs.rend());  // the store lists oldest first
  endResetModel();
  const QList<qint64> before = m_shown;
  m_shown.removeIf([this](qint64 id) { return rowOf(id) < 0; });
  if (m_shown != before) emit shownChanged(m_shown);
}

const iwb::ResultsStore::ServeRunSummary* ServingRunsModel::run(int row) const {
  return row >= 0 && row < static_cast<int>(m_runs.size()) ? &m_runs[static_cast<size_t>(row)] : nullptr;
}

int ServingRunsModel::rowOf(qint64 id) const {
  for (size_t i = 0; i < m_runs.size(); ++i) {
    if (m_runs[i].id == id) return static_cast<int>(i);
  }
  return -1;
}

void ServingRunsModel::setShown(qint64 id, bool isShown) {
  if (rowOf(id) < 0 || m_shown.contains(id) == isShown) return;
  QList<int> changedRows = {rowOf(id)};
  if (isShown) {
    m_shown.append(id);
    if (m_shown.size() > kMaxShown) changedRows << rowOf(m_shown.takeFirst());
  } else {
    m_shown.removeAll(id);
  }
  for (int row : changedRows) emit dataChanged(index(row, Shown), index(row, Shown), {Qt::CheckStateRole});
  emit shownChanged(m_shown);
}

int ServingRunsModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(m_runs.size());
}

int ServingRunsModel::columnCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : NumColumns; }

QVariant ServingRunsModel::data(const QModelIndex& index, int role) const {
  const auto* r = run(index.row());
  if (r == nullptr) return {};
  if (role == Qt::CheckStateRole && index.column() == Shown) {
    return m_shown.contains(r->id) ? Qt::Checked : Qt::Unchecked;
  }
  if (role == Qt::UserRole) return QVariant::fromValue<qint64>(r->id);
  if (role == Qt::ToolTipRole) return QString::fromStdString(r->base_url);
  if (role != Qt::DisplayRole) return {};
  switch (index.column()) {
    case Id: return QVariant::fromValue<qint64>(r->id);
    case Status: return QString::fromStdString(r->status);
    case Started: {
      const QDateTime t = QDateTime::fromString(QString::fromStdString(r->started_at), Qt::ISODate);
      return t.isValid() ? t.toLocalTime().toString(QStringLiteral("yyyy-MM-dd HH:mm:ss"))
                         : QString::fromStdString(r->started_at);
    }
    case Label: return QString::fromStdString(r->label);
    case Server: return QString::fromStdString(r->server_kind);
    case Model: return QString::fromStdString(r->model);
    case Points: return r->num_points;
    default: return {};
  }
}

bool ServingRunsModel::setData(const QModelIndex& index, const QVariant& value, int role) {
  const auto* r = run(index.row());
  if (r == nullptr || index.column() != Shown || role != Qt::CheckStateRole) return false;
  setShown(r->id, value.value<Qt::CheckState>() == Qt::Checked);
  return true;
}

Qt::ItemFlags ServingRunsModel::flags(const QModelIndex& index) const {
  Qt::ItemFlags f = QAbstractTableModel::flags(index);
  if (index.column() == Shown) f |= Qt::ItemIsUserCheckable;
  return f;
}

QVariant ServingRunsModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (orientation != Qt::Horizontal || role != Qt::DisplayRole) return {};
  switch (section) {
    case Shown: return tr("Show");
    case Id: return tr("Run");
    case Status: return tr("Status");
    case Started: return tr("Started");
    case Label: return tr("Label");
    case Server: return tr("Server");
    case Model: return tr("Model");
    case Points: return tr("Points");
    default: return {};
  }
}

}  // namespace iwb::ui
