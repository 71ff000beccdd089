// The KV Cache tab: the block map of the paged KV cache (every block a cell: free, cached
// prefix, in use by a sequence, shared, partly filled), its legend and hover details, the live
// numbers beside it (use, utilisation, fragmentation, prefix hits, preemptions, queues), a
// chart of blocks used over time, and the batch area that puts several requests on the engine.
#pragma once

#include <QList>
#include <QWidget>

class QCustomPlot;
class QLabel;

namespace iwb::ui {

class BatchPanel;
class EngineController;
class KvMapModel;
class KvMapWidget;

class KvCachePanel : public QWidget {
  Q_OBJECT

 public:
  explicit KvCachePanel(EngineController* engine, QWidget* parent = nullptr);

  KvMapModel* model() const { return m_model; }
  KvMapWidget* mapWidget() const { return m_map; }
  BatchPanel* batchPanel() const { return m_batch; }
  QCustomPlot* historyChart() const { return m_history; }
  QString detailsText() const;
  QString legendText() const;
  // The line over the map: blocks, the cache type, its bytes per block and per position.
  QString summaryText() const;

 private:
  void updateStats();
  void updateLegend();
  void updateHistory();
  void showDetails(qint64 block);

  EngineController* m_engine;
  KvMapModel* m_model;
  KvMapWidget* m_map;
  QLabel* m_summary;
  QLabel* m_legend;
  QLabel* m_details;
  QList<QLabel*> m_statValues;  // one per KvMapModel::statsRows() row
  QCustomPlot* m_history;
  BatchPanel* m_batch;
};

}  // namespace iwb::ui
