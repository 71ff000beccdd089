// BenchResultsModel: reading bench runs from the results store and presenting them.
#include "metrics/bench_results_model.h"

#include "metrics/metrics_model.h"
#include "store/results_store_access.h"

#include <QFileInfo>

#include <algorithm>

namespace iwb::ui {

BenchResultsModel::BenchResultsModel(QObject* parent) : QAbstractTableModel(parent) {}

int BenchResultsModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(m_results.size());
}

int BenchResultsModel::columnCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : NumColumns; }

QVariant BenchResultsModel::data(const QModelIndex& index, int role) const {
  if (!index.isValid() || index.row() >= rowCount()) return {};
  const iwb::BenchResult& r = m_results[static_cast<size_t>(index.row())];
  if (role == Qt::DisplayRole) {
    switch (index.column()) {
      case DateColumn: return QString::fromStdString(r.date).left(19).replace(QLatin1Char('T'), QLatin1Char(' '));
      case ModelColumn:
        return r.model_name.empty() ? QFileInfo(QString::fromStdString(r.model_path)).fileName()
                                    : QString::fromStdString(r.model_name);
      case TypeColumn: return QString::fromStdString(r.file_type);
      case TestColumn: return QString::fromStdString(r.test);
      case ThreadsColumn: return r.num_threads;
      case RateColumn:
        return QStringLiteral("%1 ± %2").arg(r.tokens_per_s_mean, 0, 'f', 2).arg(r.tokens_per_s_sd, 0, 'f', 2);
      case MbuColumn: return formatFraction(r.mbu);
      case MfuColumn: return formatFraction(r.mfu);
      case DeviceColumn: return QString::fromStdString(r.device_name.empty() ? r.device_id : r.device_name);
    }
  } else if (role == Qt::TextAlignmentRole) {
    if (index.column() >= ThreadsColumn && index.column() <= MfuColumn) {
      return QVariant::fromValue(Qt::AlignRight | Qt::AlignVCenter);
    }
  } else if (role == Qt::ToolTipRole) {
    return tr("%1\n%2 repetitions; probe of %3")
        .arg(QString::fromStdString(r.model_path))
        .arg(r.num_repetitions)
        .arg(r.probe_date.empty() ? tr("none (no MBU/MFU)") : QString::fromStdString(r.probe_date));
  }
  return {};
}

QVariant BenchResultsModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (orientation != Qt::Horizontal || role != Qt::DisplayRole) return {};
  switch (section) {
    case DateColumn: return tr("Date (UTC)");
    case ModelColumn: return tr("Model");
    case TypeColumn: return tr("Type");
    case TestColumn: return tr("Test");
    case ThreadsColumn: return tr("Threads");
    case RateColumn: return tr("Tokens/s");
    case MbuColumn: return tr("MBU");
    case MfuColumn: return tr("MFU");
    case DeviceColumn: return tr("Device");
  }
  return {};
}

bool BenchResultsModel::reload(const QString& storePath) {
  auto results = ResultsStoreAccess(storePath).benchResults(kMaxRows);
  if (!results) {
    m_errorMessage = QString::fromStdString(results.error_message());
    return false;
  }
  m_errorMessage.clear();
  beginResetModel();
  m_results = std::move(*results);
  std::reverse(m_results.begin(), m_results.end());  // the store lists oldest first
  endResetModel();
  return true;
}

}  // namespace iwb::ui
