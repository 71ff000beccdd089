// Table model over a model's metadata: key, value type and value (short form; the full text is
// the tooltip). Rows stay in file order until a proxy sorts them.
#pragma once

#include "model_info/model_details.h"

#include <QAbstractTableModel>
#include <QList>

namespace iwb::ui {

class MetadataTableModel : public QAbstractTableModel {
  Q_OBJECT

 public:
  enum Column { KeyColumn, TypeColumn, ValueColumn, ColumnCount };
  static constexpr int SortRole = Qt::UserRole;

  explicit MetadataTableModel(QObject* parent = nullptr);

  void setEntries(QList<MetadataRow> entries);
  void clear();
  const MetadataRow& entryAt(int row) const { return m_entries.at(row); }
  // Row of `key`, or -1.
  int rowOfKey(const QString& key) const;

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QVariant headerData(int section, Qt::Orientation orientation,
                      int role = Qt::DisplayRole) const override;

 private:
  QList<MetadataRow> m_entries;
};

}  // namespace iwb::ui
