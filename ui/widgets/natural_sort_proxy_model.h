// Sort/filter proxy that orders text the way people count ("blk.2" before "blk.10") and
// numbers numerically; filters case-insensitively over every column.
#pragma once

#include <QSortFilterProxyModel>

namespace iwb::ui {

// <0, 0, >0 like strcmp: digit runs compare by value, everything else case-insensitively.
// Independent of the locale (QCollator's numeric mode is a no-op in the C locale).
int naturalCompare(QStringView a, QStringView b);

class NaturalSortProxyModel : public QSortFilterProxyModel {
  Q_OBJECT

 public:
  explicit NaturalSortProxyModel(QObject* parent = nullptr);

 protected:
  bool lessThan(const QModelIndex& left, const QModelIndex& right) const override;
};

}  // namespace iwb::ui
