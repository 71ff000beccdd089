// A table with a filter line above it: "Filter…" edit, a "12 of 291" count, and the view over
// a natural-sort proxy of the given model. When the model is empty, a short text replaces the
// table so an empty area explains itself.
#pragma once

#include <QWidget>

class QAbstractItemModel;
class QLabel;
class QLineEdit;
class QStackedWidget;
class QTableView;

namespace iwb::ui {

class NaturalSortProxyModel;

class FilteredTableView : public QWidget {
  Q_OBJECT

 public:
  // `sortRole` is the role the proxy sorts by (raw numbers for numeric columns).
  FilteredTableView(QAbstractItemModel* source, int sortRole, QWidget* parent = nullptr);

  NaturalSortProxyModel* proxy() const { return m_proxy; }
  QTableView* view() const { return m_view; }
  QLineEdit* filterEdit() const { return m_filterEdit; }

  void setFilterPlaceholder(const QString& text);
  // Shown instead of the table while the source model has no rows.
  void setEmptyText(const QString& text);

 private:
  void updateCountAndEmptyState();

  QAbstractItemModel* m_source;
  NaturalSortProxyModel* m_proxy;
  QLineEdit* m_filterEdit;
  QLabel* m_countLabel;
  QStackedWidget* m_stack;
  QTableView* m_view;
  QLabel* m_emptyLabel;
};

}  // namespace iwb::ui
