// Table model over a model's tensors: name, type, shape, element count and size. Display text
// for people, raw numbers under SortRole so sorting by size or elements is numeric.
#pragma once

#include "model_info/model_details.h"

#include <QAbstractTableModel>
#include <QList>

namespace iwb::ui {

class TensorTableModel : public QAbstractTableModel {
  Q_OBJECT

 public:
  enum Column { NameColumn, TypeColumn, ShapeColumn, ElementsColumn, SizeColumn, ColumnCount };
  // Role a QSortFilterProxyModel should sort by: strings for text columns, numbers otherwise.
  static constexpr int SortRole = Qt::UserRole;

  explicit TensorTableModel(QObject* parent = nullptr);

  void setTensors(QList<TensorRow> tensors);
  void clear();
  const TensorRow& tensorAt(int row) const { return m_tensors.at(row); }
  quint64 totalBytes() const;

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QVariant headerData(int section, Qt::Orientation orientation,
                      int role = Qt::DisplayRole) const override;

 private:
  QList<TensorRow> m_tensors;
};

}  // namespace iwb::ui
