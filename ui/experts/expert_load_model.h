// ExpertLoadModel: the engine's expert-load snapshot as a table, one row per layer — how evenly
// the router spread the window's tokens over the experts (busiest expert over the mean, the
// busiest expert and its share, experts no token reached) — and the per-cell loads the heatmap
// draws (tokens routed to an expert over the layer's mean, 1 = an even share).
#pragma once

#include "iwb/engine/runtime/expert_load.h"

#include <QAbstractTableModel>

namespace iwb::ui {

class ExpertLoadModel : public QAbstractTableModel {
  Q_OBJECT

 public:
  enum Column { LayerColumn, ImbalanceColumn, BusiestColumn, BusiestShareColumn, IdleColumn, ColumnCount };

  explicit ExpertLoadModel(QObject* parent = nullptr);

  void setSnapshot(const iwb::ExpertLoadSnapshot& snapshot);
  const iwb::ExpertLoadSnapshot& snapshot() const { return m_snapshot; }
  bool isMoe() const { return m_snapshot.is_moe(); }

  // Tokens routed to `expert` in `layer` over the layer's mean per expert (its routed token
  // slots / experts); 0 when the window is empty.
  double relativeLoad(int layer, int expert) const;
  int busiestExpert(int layer) const;
  int idleExperts(int layer) const;
  // The layer with the largest imbalance, -1 with no tokens.
  int mostImbalancedLayer() const;

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

 signals:
  void changed();

 private:
  iwb::ExpertLoadSnapshot m_snapshot;
};

}  // namespace iwb::ui
