// ModelOverviewWidget: header + summary form + tensor/metadata tabs.
#include "model_info/model_overview_widget.h"

#include "model_info/metadata_table_model.h"
#include "model_info/model_summary_view.h"
#include "model_info/tensor_table_model.h"
#include "widgets/filtered_table_view.h"

#include <QDir>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QScrollArea>
#include <QSplitter>
#include <QTabWidget>
#include <QTableView>
#include <QVBoxLayout>

namespace iwb::ui {

ModelOverviewWidget::ModelOverviewWidget(QWidget* parent)
    : QWidget(parent),
      m_titleLabel(new QLabel(this)),
      m_pathLabel(new QLabel(this)),
      m_summaryView(new ModelSummaryView),
      m_tensorModel(new TensorTableModel(this)),
      m_metadataModel(new MetadataTableModel(this)),
      m_tensorTable(new FilteredTableView(m_tensorModel, TensorTableModel::SortRole)),
      m_metadataTable(new FilteredTableView(m_metadataModel, MetadataTableModel::SortRole)),
      m_tabs(new QTabWidget) {
  setObjectName(QStringLiteral("modelOverview"));

  QFont titleFont = m_titleLabel->font();
  titleFont.setPointSizeF(titleFont.pointSizeF() * 1.4);
  titleFont.setBold(true);
  m_titleLabel->setFont(titleFont);
  m_titleLabel->setTextFormat(Qt::PlainText);
  m_titleLabel->setObjectName(QStringLiteral("modelTitle"));
  m_pathLabel->setTextFormat(Qt::PlainText);
  m_pathLabel->setTextInteractionFlags(Qt::TextSelectableByMouse);
  m_pathLabel->setForegroundRole(QPalette::PlaceholderText);

  m_tensorTable->setFilterPlaceholder(tr("Filter tensors by name or type…"));
  m_tensorTable->setEmptyText(
      tr("This file has no tensors: it holds only a vocabulary and metadata."));
  QHeaderView* tensorHeader = m_tensorTable->view()->horizontalHeader();
  tensorHeader->setSectionResizeMode(QHeaderView::ResizeToContents);
  tensorHeader->setSectionResizeMode(TensorTableModel::NameColumn, QHeaderView::Stretch);
  // Tensors open sorted by name as people count (blk.2 before blk.10): files converted from
  // Hugging Face checkpoints store them in text order (blk.1, blk.10, blk.11, ..., blk.2).
  // Clicking the header a third time returns to file order.
  m_tensorTable->view()->sortByColumn(TensorTableModel::NameColumn, Qt::AscendingOrder);

  m_metadataTable->setFilterPlaceholder(tr("Filter metadata by key or value…"));
  m_metadataTable->setEmptyText(tr("This file has no metadata."));
  QHeaderView* metadataHeader = m_metadataTable->view()->horizontalHeader();
  metadataHeader->setSectionResizeMode(QHeaderView::ResizeToContents);
  metadataHeader->setSectionResizeMode(MetadataTableModel::ValueColumn, QHeaderView::Stretch);

  m_tabs->setDocumentMode(true);
  m_tabs->addTab(m_tensorTable, QString());
  m_tabs->addTab(m_metadataTable, QString());
  updateTabTitles();

  // The form is taller than a small window; it scrolls on its own, tables keep their height.
  auto* summaryScroll = new QScrollArea;
  summaryScroll->setWidget(m_summaryView);
  summaryScroll->setWidgetResizable(true);
  summaryScroll->setFrameShape(QFrame::NoFrame);
  summaryScroll->setHorizontalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
  summaryScroll->setMinimumWidth(260);

  auto* splitter = new QSplitter(Qt::Horizontal, this);
  splitter->addWidget(summaryScroll);
  splitter->addWidget(m_tabs);
  splitter->setStretchFactor(0, 0);
  splitter->setStretchFactor(1, 1);
  splitter->setChildrenCollapsible(false);
  // Wide enough that "none (vocabulary-only file)" and typical file names fit on one line.
  splitter->setSizes({380, 900});

  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(12, 10, 12, 6);
  layout->addWidget(m_titleLabel);
  layout->addWidget(m_pathLabel);
  layout->addSpacing(4);
  layout->addWidget(splitter, 1);
}

void ModelOverviewWidget::showModel(const ModelDetails& details) {
  m_titleLabel->setText(QString::fromStdString(details.summary.name));
  m_pathLabel->setText(QDir::toNativeSeparators(details.path));
  m_summaryView->setSummary(details.summary);
  // A new model starts unfiltered: an old filter would hide rows for no visible reason.
  m_tensorTable->filterEdit()->clear();
  m_metadataTable->filterEdit()->clear();
  m_tensorModel->setTensors(details.tensors);
  m_metadataModel->setEntries(details.metadata);
  updateTabTitles();
  // Vocabulary-only files have nothing to show under Tensors; their story is the metadata.
  m_tabs->setCurrentWidget(details.tensors.isEmpty() ? m_metadataTable : m_tensorTable);
}

void ModelOverviewWidget::clear() {
  m_titleLabel->clear();
  m_pathLabel->clear();
  m_summaryView->clear();
  m_tensorModel->clear();
  m_metadataModel->clear();
  updateTabTitles();
}

void ModelOverviewWidget::updateTabTitles() {
  m_tabs->setTabText(m_tabs->indexOf(m_tensorTable),
                     tr("Tensors (%1)").arg(m_tensorModel->rowCount()));
  m_tabs->setTabText(m_tabs->indexOf(m_metadataTable),
                     tr("Metadata (%1)").arg(m_metadataModel->rowCount()));
}

}  // namespace iwb::ui
