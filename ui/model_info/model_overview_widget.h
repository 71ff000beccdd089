// The central view of an opened model: a header with its name and path, the summary form on
// the left, and tabs with the tensor table and the metadata table (each filterable, sortable).
#pragma once

#include "model_info/model_details.h"

#include <QWidget>

class QLabel;
class QTabWidget;

namespace iwb::ui {

class FilteredTableView;
class MetadataTableModel;
class ModelSummaryView;
class TensorTableModel;

class ModelOverviewWidget : public QWidget {
  Q_OBJECT

 public:
  explicit ModelOverviewWidget(QWidget* parent = nullptr);

  void showModel(const ModelDetails& details);
  void clear();

  ModelSummaryView* summaryView() const { return m_summaryView; }
  TensorTableModel* tensorModel() const { return m_tensorModel; }
  MetadataTableModel* metadataModel() const { return m_metadataModel; }
  FilteredTableView* tensorTable() const { return m_tensorTable; }
  FilteredTableView* metadataTable() const { return m_metadataTable; }
  QTabWidget* tabs() const { return m_tabs; }

 private:
  void updateTabTitles();

  QLabel* m_titleLabel;
  QLabel* m_pathLabel;
  ModelSummaryView* m_summaryView;
  TensorTableModel* m_tensorModel;
  MetadataTableModel* m_metadataModel;
  FilteredTableView* m_tensorTable;
  FilteredTableView* m_metadataTable;
  QTabWidget* m_tabs;
};

}  // namespace iwb::ui
