// The KV-cache map's data on the GUI thread: the latest snapshot from the engine worker, what
// each cell shows (free, cached, in use, shared; fill; colour of its sequence), the hover text
// of a cell, the live numbers beside the map, and a short history of blocks used over time.
#pragma once

#include "worker/kv_map_values.h"

#include <QColor>
#include <QList>
#include <QObject>
#include <QString>
#include <QVector>

namespace iwb::ui {

enum class KvCellKind { Free, Cached, InUse, Shared };

// One live number beside the map: `label: value`.
struct KvStatRow {
  QString label;
  QString value;
  QString toolTip;  // what it means
};

class KvMapModel : public QObject {
  Q_OBJECT

 public:
  explicit KvMapModel(QObject* parent = nullptr);

  void setSnapshot(const KvMapSnapshot& snapshot);
  // No model: no pool, no history.
  void clear();
  const KvMapSnapshot& snapshot() const { return m_snapshot; }
  qint64 numSnapshots() const { return m_numSnapshots; }

  qint64 numBlocks() const { return m_snapshot.numBlocks(); }
  int blockSize() const { return m_snapshot.stats.block_size; }
  // The block's snapshot, or nullptr for an id outside the pool.
  const iwb::BlockSnapshot* block(qint64 id) const;
  KvCellKind cellKind(qint64 id) const;
  // Slots holding tokens over the block size (0 for a free block).
  double fillFraction(qint64 id) const;
  // Sequences holding blocks now, ascending (the legend's order).
  QList<quint64> sequences() const { return m_sequences; }
  // The caller's request id of a sequence, 0 when unknown.
  quint64 requestOf(quint64 sequence) const { return m_snapshot.sequenceRequests.value(sequence); }
  // "seq 3 · #12", or "seq 3" when its request is unknown.
  QString sequenceLabel(quint64 sequence) const;

  // A stable colour per sequence id: hues a golden angle apart, so neighbours differ clearly.
  static QColor sequenceColor(quint64 sequence);
  static QColor freeColor() { return QColor(226, 226, 226); }
  static QColor cachedColor() { return QColor(246, 238, 214); }
  static QColor cachedHatchColor() { return QColor(196, 172, 120); }
  static QColor sharedMarkColor() { return QColor(35, 35, 35); }

  // Plain text for the tooltip of a cell: block id and state, owners, token range, reference
  // count, and the text its tokens spell. Empty for an id outside the pool.
  QString hoverText(qint64 id) const;
  // The numbers beside the map, in display order; statsText() is them as "label: value" lines.
  QList<KvStatRow> statsRows() const;
  QString statsText() const;
  // "1,024 blocks of 16 tokens (16,384 tokens)", or a sentence saying there is no cache.
  QString poolSummary() const;

  // Blocks used (and cached) at each snapshot, seconds on the worker's session clock; the
  // last kMaxHistory snapshots of the current pool.
  static constexpr int kMaxHistory = 3000;
  const QVector<double>& historySeconds() const { return m_historySeconds; }
  const QVector<double>& historyUsed() const { return m_historyUsed; }
  const QVector<double>& historyCached() const { return m_historyCached; }

 signals:
  void changed();

 private:
  KvMapSnapshot m_snapshot;
  QList<quint64> m_sequences;
  qint64 m_numSnapshots = 0;
  QVector<double> m_historySeconds;
  QVector<double> m_historyUsed;
  QVector<double> m_historyCached;
  qint64 m_historyPoolBlocks = 0;  // blocks of the pool the history is about
};

}  // namespace iwb::ui
