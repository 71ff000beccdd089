// MetadataTableModel: one row per GGUF metadata key of the opened model.
#include "model_info/metadata_table_model.h"

namespace iwb::ui {
namespace {

// Tooltips are shown as rich text when they look like HTML, and chat templates are full of
// "<|...|>" — so escape them and keep their line breaks explicitly.
QString plainTextTooltip(const QString& text) {
  return QStringLiteral("<p style='white-space:pre-wrap'>%1</p>").arg(text.toHtmlEscaped());
}

}  // namespace

MetadataTableModel::MetadataTableModel(QObject* parent) : QAbstractTableModel(parent) {}

void MetadataTableModel::setEntries(QList<MetadataRow> entries) {
  beginResetModel();
  m_entries = std::move(entries);
  endResetModel();
}

void MetadataTableModel::clear() { setEntries({}); }

int MetadataTableModel::rowOfKey(const QString& key) const {
  for (qsizetype i = 0; i < m_entries.size(); ++i) {
    if (m_entries[i].key == key) return static_cast<int>(i);
  }
  return -1;
}

int MetadataTableModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(m_entries.size());
}

int MetadataTableModel::columnCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : ColumnCount;
}

QVariant MetadataTableModel::data(const QModelIndex& index, int role) const {
  if (!checkIndex(index, CheckIndexOption::IndexIsValid | CheckIndexOption::ParentIsInvalid)) {
    return {};
  }
  const MetadataRow& e = m_entries.at(index.row());
  switch (role) {
    case Qt::DisplayRole:
    case SortRole:
      switch (index.column()) {
        case KeyColumn: return e.key;
        case TypeColumn: return e.type;
        case ValueColumn: return e.value;
      }
      break;
    case Qt::ToolTipRole:
      if (index.column() == ValueColumn) return plainTextTooltip(e.fullValue);
      if (index.column() == KeyColumn) return e.key;
      break;
  }
  return {};
}

QVariant MetadataTableModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (orientation != Qt::Horizontal || role != Qt::DisplayRole) return {};
  switch (section) {
    case KeyColumn: return tr("Key");
    case TypeColumn: return tr("Type");
    case ValueColumn: return tr("Value");
  }
  return {};
}

}  // namespace iwb::ui
