// TensorTableModel: one row per tensor of the opened model.
#include "model_info/tensor_table_model.h"

#include "iwb/engine/model/model_info.h"

#include <QLocale>

namespace iwb::ui {

TensorTableModel::TensorTableModel(QObject* parent) : QAbstractTableModel(parent) {}

void TensorTableModel::setTensors(QList<TensorRow> tensors) {
  beginResetModel();
  m_tensors = std::move(tensors);
  endResetModel();
}

void TensorTableModel::clear() { setTensors({}); }

quint64 TensorTableModel::totalBytes() const {
  quint64 total = 0;
  for (const TensorRow& t : m_tensors) total += t.numBytes;
  return total;
}

int TensorTableModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(m_tensors.size());
}

int TensorTableModel::columnCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : ColumnCount;
}

QVariant TensorTableModel::data(const QModelIndex& index, int role) const {
  if (!checkIndex(index, CheckIndexOption::IndexIsValid | CheckIndexOption::ParentIsInvalid)) {
    return {};
  }
  const TensorRow& t = m_tensors.at(index.row());
  const int column = index.column();

  if (role == Qt::DisplayRole) {
    switch (column) {
      case NameColumn: return t.name;
      case TypeColumn: return t.type;
      case ShapeColumn: return t.shape;
      case ElementsColumn: return QLocale().toString(t.numElements);
      case SizeColumn: return QString::fromStdString(format_bytes(t.numBytes));
    }
  } else if (role == SortRole) {
    switch (column) {
      case NameColumn: return t.name;
      case TypeColumn: return t.type;
      // Shapes compare by size: "4096 x 32000" before "64 x 64" as text, which helps nobody.
      case ShapeColumn: return t.numElements;
      case ElementsColumn: return t.numElements;
      case SizeColumn: return t.numBytes;
    }
  } else if (role == Qt::TextAlignmentRole) {
    if (column == ElementsColumn || column == SizeColumn) {
      return QVariant::fromValue(Qt::AlignRight | Qt::AlignVCenter);
    }
  } else if (role == Qt::ToolTipRole) {
    if (column == SizeColumn || column == ElementsColumn) {
      return tr("%1 bytes at data offset %2")
          .arg(QLocale().toString(t.numBytes), QLocale().toString(t.offset));
    }
    if (column == NameColumn) return t.name;
  }
  return {};
}

QVariant TensorTableModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (orientation != Qt::Horizontal) return {};
  if (role == Qt::DisplayRole) {
    switch (section) {
      case NameColumn: return tr("Name");
      case TypeColumn: return tr("Type");
      case ShapeColumn: return tr("Shape");
      case ElementsColumn: return tr("Elements");
      case SizeColumn: return tr("Size");
    }
  } else if (role == Qt::ToolTipRole && section == ShapeColumn) {
    return tr("ggml order: the first dimension is the row length");
  } else if (role == Qt::TextAlignmentRole &&
             (section == ElementsColumn || section == SizeColumn)) {
    return QVariant::fromValue(Qt::AlignRight | Qt::AlignVCenter);
  }
  return {};
}

}  // namespace iwb::ui
