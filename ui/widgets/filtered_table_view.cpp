// FilteredTableView: filter edit + count + sortable table over a proxy.
#include "widgets/filtered_table_view.h"

#include "widgets/natural_sort_proxy_model.h"

#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QStackedWidget>
#include <QTableView>
#include <QVBoxLayout>

namespace iwb::ui {

FilteredTableView::FilteredTableView(QAbstractItemModel* source, int sortRole, QWidget* parent)
    : QWidget(parent),
      m_source(source),
      m_proxy(new NaturalSortProxyModel(this)),
      m_filterEdit(new QLineEdit(this)),
      m_countLabel(new QLabel(this)),
      m_stack(new QStackedWidget(this)),
      m_view(new QTableView(this)),
      m_emptyLabel(new QLabel(this)) {
  m_proxy->setSourceModel(source);
  m_proxy->setSortRole(sortRole);

  m_filterEdit->setClearButtonEnabled(true);
  m_filterEdit->setPlaceholderText(tr("Filter…"));
  // A file dropped here should open as a model (the window handles it), not paste its path.
  m_filterEdit->setAcceptDrops(false);
  connect(m_filterEdit, &QLineEdit::textChanged, m_proxy,
          &QSortFilterProxyModel::setFilterFixedString);

  m_countLabel->setForegroundRole(QPalette::PlaceholderText);

  m_view->setModel(m_proxy);
  m_view->setSelectionBehavior(QAbstractItemView::SelectRows);
  m_view->setAlternatingRowColors(true);
  m_view->setWordWrap(false);
  m_view->setTextElideMode(Qt::ElideRight);
  m_view->verticalHeader()->hide();
  m_view->verticalHeader()->setDefaultSectionSize(m_view->fontMetrics().height() + 8);
  m_view->horizontalHeader()->setHighlightSections(false);
  // Rows stay in file order until a header is clicked; a third click returns to file order.
  m_view->horizontalHeader()->setSortIndicator(-1, Qt::AscendingOrder);
  m_view->horizontalHeader()->setSortIndicatorClearable(true);
  m_view->setSortingEnabled(true);

  m_emptyLabel->setAlignment(Qt::AlignCenter);
  m_emptyLabel->setWordWrap(true);
  m_emptyLabel->setForegroundRole(QPalette::PlaceholderText);

  m_stack->addWidget(m_view);
  m_stack->addWidget(m_emptyLabel);

  auto* filterRow = new QHBoxLayout;
  filterRow->addWidget(m_filterEdit, 1);
  filterRow->addWidget(m_countLabel);

  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->addLayout(filterRow);
  layout->addWidget(m_stack, 1);

  for (QAbstractItemModel* model : {static_cast<QAbstractItemModel*>(m_proxy), source}) {
    connect(model, &QAbstractItemModel::modelReset, this,
            &FilteredTableView::updateCountAndEmptyState);
    connect(model, &QAbstractItemModel::rowsInserted, this,
            &FilteredTableView::updateCountAndEmptyState);
    connect(model, &QAbstractItemModel::rowsRemoved, this,
            &FilteredTableView::updateCountAndEmptyState);
  }
  connect(m_proxy, &QAbstractItemModel::layoutChanged, this,
          &FilteredTableView::updateCountAndEmptyState);
  updateCountAndEmptyState();
}

void FilteredTableView::setFilterPlaceholder(const QString& text) {
  m_filterEdit->setPlaceholderText(text);
}

void FilteredTableView::setEmptyText(const QString& text) {
  m_emptyLabel->setText(text);
  updateCountAndEmptyState();
}

void FilteredTableView::updateCountAndEmptyState() {
  const int total = m_source->rowCount();
  const int shown = m_proxy->rowCount();
  if (shown != total) {
    m_countLabel->setText(tr("%1 of %2").arg(shown).arg(total));
  } else {
    m_countLabel->setText(total == 1 ? tr("1 row") : tr("%1 rows").arg(total));
  }
  const bool isEmpty = total == 0 && !m_emptyLabel->text().isEmpty();
  m_stack->setCurrentWidget(isEmpty ? static_cast<QWidget*>(m_emptyLabel) : m_view);
  m_filterEdit->setEnabled(total > 0);
}

}  // namespace iwb::ui
