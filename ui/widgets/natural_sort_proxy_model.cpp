// NaturalSortProxyModel: numeric-aware string comparison on top of QSortFilterProxyModel.
#include "widgets/natural_sort_proxy_model.h"

namespace iwb::ui {

int naturalCompare(QStringView a, QStringView b) {
  qsizetype i = 0;
  qsizetype j = 0;
  while (i < a.size() && j < b.size()) {
    if (a[i].isDigit() && b[j].isDigit()) {
      // Compare whole digit runs by value: skip leading zeros, then the longer run is larger,
      // and runs of equal length compare digit by digit. No overflow for any length.
      while (i < a.size() && a[i] == u'0') ++i;
      while (j < b.size() && b[j] == u'0') ++j;
      qsizetype endA = i;
      qsizetype endB = j;
      while (endA < a.size() && a[endA].isDigit()) ++endA;
      while (endB < b.size() && b[endB].isDigit()) ++endB;
      if (endA - i != endB - j) return endA - i < endB - j ? -1 : 1;
      for (; i < endA; ++i, ++j) {
        if (a[i] != b[j]) return a[i] < b[j] ? -1 : 1;
      }
      continue;
    }
    const char32_t ca = a[i].toCaseFolded().unicode();
    const char32_t cb = b[j].toCaseFolded().unicode();
    if (ca != cb) return ca < cb ? -1 : 1;
    ++i;
    ++j;
  }
  if (i < a.size()) return 1;
  if (j < b.size()) return -1;
  // Equal ignoring case and leading zeros: fall back to exact order so sorting is stable.
  return a.compare(b);
}

NaturalSortProxyModel::NaturalSortProxyModel(QObject* parent) : QSortFilterProxyModel(parent) {
  setFilterCaseSensitivity(Qt::CaseInsensitive);
  setFilterKeyColumn(-1);  // a filter matches in any column: a name, a type, a value
}

bool NaturalSortProxyModel::lessThan(const QModelIndex& left, const QModelIndex& right) const {
  const QVariant a = left.data(sortRole());
  const QVariant b = right.data(sortRole());
  if (a.typeId() == QMetaType::QString && b.typeId() == QMetaType::QString) {
    return naturalCompare(a.toString(), b.toString()) < 0;
  }
  return QSortFilterProxyModel::lessThan(left, right);
}

}  // namespace iwb::ui
