// ExpertLoadModel: per-layer routing balance from the engine's expert-load snapshot.
#include "experts/expert_load_model.h"

#include <QLocale>

namespace iwb::ui {

ExpertLoadModel::ExpertLoadModel(QObject* parent) : QAbstractTableModel(parent) {}

void ExpertLoadModel::setSnapshot(const iwb::ExpertLoadSnapshot& snapshot) {
  const bool isSameShape =
      snapshot.num_layers == m_snapshot.num_layers && snapshot.num_experts == m_snapshot.num_experts;
  if (isSameShape) {
    m_snapshot = snapshot;
    if (rowCount() > 0) emit dataChanged(index(0, 0), index(rowCount() - 1, ColumnCount - 1));
  } else {
    beginResetModel();
    m_snapshot = snapshot;
    endResetModel();
  }
  emit changed();
}

double ExpertLoadModel::relativeLoad(int layer, int expert) const {
  const iwb::ExpertLoadSnapshot& s = m_snapshot;
  const int64_t routed = s.routed(layer);
  if (!s.is_moe() || s.num_tokens <= 0 || routed <= 0) return 0.0;
  const double mean = static_cast<double>(routed) / static_cast<double>(s.num_experts);
  return static_cast<double>(s.count(layer, expert)) / mean;
}

int ExpertLoadModel::busiestExpert(int layer) const {
  int best = 0;
  for (int e = 1; e < m_snapshot.num_experts; ++e) {
    if (m_snapshot.count(layer, e) > m_snapshot.count(layer, best)) best = e;
  }
  return best;
}

int ExpertLoadModel::idleExperts(int layer) const {
  int idle = 0;
  for (int e = 0; e < m_snapshot.num_experts; ++e) idle += m_snapshot.count(layer, e) == 0 ? 1 : 0;
  return idle;
}

int ExpertLoadModel::mostImbalancedLayer() const {
  if (!m_snapshot.is_moe() || m_snapshot.num_tokens <= 0) return -1;
  int best = 0;
  for (int l = 1; l < m_snapshot.num_layers; ++l) {
    if (m_snapshot.imbalance(l) > m_snapshot.imbalance(best)) best = l;
  }
  return best;
}

int ExpertLoadModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() || !m_snapshot.is_moe() ? 0 : static_cast<int>(m_snapshot.num_layers);
}

int ExpertLoadModel::columnCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : ColumnCount; }

QVariant ExpertLoadModel::data(const QModelIndex& index, int role) const {
  if (!index.isValid() || index.row() >= rowCount()) return {};
  const int layer = index.row();
  const bool hasTokens = m_snapshot.num_tokens > 0;
  if (role == Qt::TextAlignmentRole) {
    return index.column() == LayerColumn ? QVariant() : QVariant(int(Qt::AlignRight | Qt::AlignVCenter));
  }
  if (role == Qt::ToolTipRole && index.column() == ImbalanceColumn) {
    return tr("The busiest expert's tokens over the mean per expert: 1.00 is an even spread, %1 means every token "
              "went to the same %2 experts")
        .arg(static_cast<double>(m_snapshot.num_experts) / static_cast<double>(m_snapshot.num_experts_used), 0, 'f', 1)
        .arg(m_snapshot.num_experts_used);
  }
  if (role != Qt::DisplayRole && role != Qt::UserRole) return {};
  const bool isRaw = role == Qt::UserRole;  // sortable numbers for tests and exports
  if (m_snapshot.is_dense_layer(layer) && index.column() != LayerColumn) {
    return isRaw ? QVariant(0) : QVariant(QStringLiteral("—"));  // a dense FFN routes nothing
  }
  switch (index.column()) {
    case LayerColumn:
      if (isRaw) return layer;
      return m_snapshot.is_dense_layer(layer) ? tr("layer %1 (dense, no experts)").arg(layer)
                                              : tr("layer %1").arg(layer);
    case ImbalanceColumn: {
      const double v = m_snapshot.imbalance(layer);
      if (isRaw) return v;
      return hasTokens ? QVariant(QStringLiteral("%1×").arg(v, 0, 'f', 2)) : QVariant(QStringLiteral("—"));
    }
    case BusiestColumn: {
      const int e = busiestExpert(layer);
      if (isRaw) return e;
      return hasTokens ? QVariant(tr("expert %1").arg(e)) : QVariant(QStringLiteral("—"));
    }
    case BusiestShareColumn: {
      // The share of the layer's routed token slots (tokens x k) that went to its busiest expert.
      const double routed = static_cast<double>(m_snapshot.routed(layer));
      const double share = routed > 0 ? static_cast<double>(m_snapshot.count(layer, busiestExpert(layer))) / routed : 0;
      if (isRaw) return share;
      return hasTokens ? QVariant(QLocale().toString(100.0 * share, 'f', 1) + QStringLiteral(" %"))
                       : QVariant(QStringLiteral("—"));
    }
    case IdleColumn: {
      const int idle = idleExperts(layer);
      if (isRaw) return idle;
      return tr("%1 of %2").arg(idle).arg(m_snapshot.num_experts);
    }
    default: return {};
  }
}

QVariant ExpertLoadModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (orientation != Qt::Horizontal || role != Qt::DisplayRole) return {};
  switch (section) {
    case LayerColumn: return tr("Layer");
    case ImbalanceColumn: return tr("Busiest / mean");
    case BusiestColumn: return tr("Busiest expert");
    case BusiestShareColumn: return tr("Its share of routed tokens");
    case IdleColumn: return tr("Experts with no token");
    default: return {};
  }
}

}  // namespace iwb::ui
