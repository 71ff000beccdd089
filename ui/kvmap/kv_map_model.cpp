// KvMapModel: cell states, colours, hover text, live numbers and history from the worker's
// KV-cache snapshots.
#include "kvmap/kv_map_model.h"

#include <QLocale>

#include <algorithm>
#include <cmath>
#include <set>

namespace iwb::ui {
namespace {

QString percent(double fraction) { return QString::number(fraction * 100.0, 'f', 1) + QStringLiteral(" %"); }

QString count(qint64 n) { return QLocale::c().toString(n); }

// Newlines and tabs written as visible marks so a block's text stays on the tooltip's line.
QString visibleText(QString text) {
  text.replace(QLatin1Char('\n'), QStringLiteral("⏎"));
  text.replace(QLatin1Char('\t'), QStringLiteral("⇥"));
  text.replace(QLatin1Char('\r'), QString());
  return text;
}

}  // namespace

KvMapModel::KvMapModel(QObject* parent) : QObject(parent) {}

void KvMapModel::setSnapshot(const KvMapSnapshot& snapshot) {
  m_snapshot = snapshot;
  ++m_numSnapshots;
  std::set<quint64> sequences;
  for (const iwb::BlockSnapshot& b : m_snapshot.blocks) sequences.insert(b.owners.begin(), b.owners.end());
  m_sequences = QList<quint64>(sequences.begin(), sequences.end());
  if (!snapshot.isEmpty()) {
    // Another pool (a model loaded) or another clock starts a new history; an empty snapshot
    // (no model) leaves the last one on show.
    const bool isNewPool = snapshot.numBlocks() != m_historyPoolBlocks;
    if (isNewPool || (!m_historySeconds.isEmpty() && snapshot.sessionSeconds < m_historySeconds.constLast())) {
      m_historySeconds.clear();
      m_historyUsed.clear();
      m_historyCached.clear();
    }
    m_historyPoolBlocks = snapshot.numBlocks();
    m_historySeconds.append(snapshot.sessionSeconds);
    m_historyUsed.append(static_cast<double>(snapshot.stats.num_used_blocks));
    m_historyCached.append(static_cast<double>(snapshot.stats.num_cached_blocks));
    if (m_historySeconds.size() > kMaxHistory) {
      const qsizetype excess = m_historySeconds.size() - kMaxHistory;
      m_historySeconds.remove(0, excess);
      m_historyUsed.remove(0, excess);
      m_historyCached.remove(0, excess);
    }
  }
  emit changed();
}

void KvMapModel::clear() {
  m_snapshot = {};
  m_sequences.clear();
  m_historySeconds.clear();
  m_historyUsed.clear();
  m_historyCached.clear();
  m_historyPoolBlocks = 0;
  emit changed();
}

const iwb::BlockSnapshot* KvMapModel::block(qint64 id) const {
  if (id < 0 || id >= numBlocks()) return nullptr;
  return &m_snapshot.blocks[static_cast<size_t>(id)];
}

KvCellKind KvMapModel::cellKind(qint64 id) const {
  const iwb::BlockSnapshot* b = block(id);
  if (b == nullptr) return KvCellKind::Free;
  switch (b->state) {
    case iwb::BlockState::Free: return KvCellKind::Free;
    case iwb::BlockState::Cached: return KvCellKind::Cached;
    case iwb::BlockState::InUse: return b->ref_count > 1 ? KvCellKind::Shared : KvCellKind::InUse;
  }
  return KvCellKind::Free;
}

double KvMapModel::fillFraction(qint64 id) const {
  const iwb::BlockSnapshot* b = block(id);
  if (b == nullptr || b->state == iwb::BlockState::Free || blockSize() <= 0) return 0;
  return std::clamp(static_cast<double>(b->fill) / blockSize(), 0.0, 1.0);
}

QString KvMapModel::sequenceLabel(quint64 sequence) const {
  const quint64 request = requestOf(sequence);
  return request != 0 ? tr("seq %1 · #%2").arg(sequence).arg(request) : tr("seq %1").arg(sequence);
}

QColor KvMapModel::sequenceColor(quint64 sequence) {
  // 137.5° apart: consecutive ids land far from each other on the colour wheel and the pattern
  // does not repeat. Saturation and value alternate a little so far-apart ids that land on
  // similar hues still differ.
  const double hue = std::fmod(static_cast<double>(sequence) * 137.50776405, 360.0);
  const int saturation = (sequence % 2 == 0) ? 170 : 135;
  const int value = (sequence % 3 == 0) ? 200 : 225;
  return QColor(QColor::fromHsv(static_cast<int>(hue), saturation, value).rgb());  // 8-bit, as painted
}

QString KvMapModel::hoverText(qint64 id) const {
  const iwb::BlockSnapshot* b = block(id);
  if (b == nullptr) return {};
  QStringList lines;
  switch (cellKind(id)) {
    case KvCellKind::Free: lines << tr("Block %1 — free").arg(id); return lines.join(QLatin1Char('\n'));
    case KvCellKind::Cached: lines << tr("Block %1 — cached (a reusable prefix, no owner)").arg(id); break;
    case KvCellKind::InUse: lines << tr("Block %1 — in use").arg(id); break;
    case KvCellKind::Shared: lines << tr("Block %1 — in use, shared by %2 sequences").arg(id).arg(b->ref_count); break;
  }
  if (!b->owners.empty()) {
    QStringList owners;
    for (const iwb::SequenceId seq : b->owners) owners << sequenceLabel(seq);
    lines << tr("Owners: %1").arg(owners.join(QStringLiteral(", ")));
  }
  if (b->fill > 0) {
    lines << tr("Tokens %1–%2 (%3 of %4 slots)")
                 .arg(b->first_position)
                 .arg(b->first_position + b->fill - 1)
                 .arg(b->fill)
                 .arg(blockSize());
  } else {
    lines << tr("No tokens yet (position %1 onward)").arg(b->first_position);
  }
  lines << (b->is_prefix_cached ? tr("Reference count %1 · in the prefix cache").arg(b->ref_count)
                                : tr("Reference count %1").arg(b->ref_count));
  const QString text = m_snapshot.blockTexts.value(id);
  if (!text.isEmpty()) lines << tr("Text: “%1”").arg(visibleText(text));
  return lines.join(QLatin1Char('\n'));
}

QList<KvStatRow> KvMapModel::statsRows() const {
  const iwb::BlockManagerStats& s = m_snapshot.stats;
  QList<KvStatRow> rows;
  rows << KvStatRow{tr("Blocks used"), QStringLiteral("%1 / %2").arg(count(s.num_used_blocks), count(s.num_blocks)),
                    tr("Blocks owned by at least one sequence, of all blocks in the pool")};
  rows << KvStatRow{tr("Utilisation"), percent(s.utilisation), tr("Used blocks over all blocks")};
  rows << KvStatRow{tr("Internal fragmentation"), percent(s.internal_fragmentation),
                    tr("Unused token slots in used blocks, over the slots of used blocks: the waste paging "
                       "leaves (at most one partly filled block per sequence)")};
  const QString hitRate =
      s.num_prefix_query_tokens > 0
          ? tr("%1 (%2 of %3 tokens)").arg(percent(s.prefix_hit_rate), count(s.num_prefix_hit_tokens),
                                           count(s.num_prefix_query_tokens))
          : tr("— (no prompt yet)");
  rows << KvStatRow{tr("Prefix-cache hit rate"), hitRate,
                    tr("Prompt tokens whose keys and values were found in the prefix cache, over the prompt "
                       "tokens looked up")};
  rows << KvStatRow{tr("Preemptions"), count(m_snapshot.numPreemptions),
                    tr("Sequences whose blocks were taken back when the cache ran out (they are recomputed "
                       "later)")};
  rows << KvStatRow{tr("Waiting / running"),
                    QStringLiteral("%1 / %2").arg(count(m_snapshot.numWaiting), count(m_snapshot.numRunning)),
                    tr("Sequences queued for admission / sequences holding blocks")};
  rows << KvStatRow{tr("Shared blocks"), count(s.num_shared_blocks),
                    tr("Blocks whose reference count is above one (a common prefix, or forked samples)")};
  rows << KvStatRow{tr("Cached blocks"), count(s.num_cached_blocks),
                    tr("Blocks no sequence owns that still hold a reusable prefix (evicted when needed, least "
                       "recently used first)")};
  rows << KvStatRow{tr("Free blocks"), count(s.num_free_blocks), tr("Empty blocks")};
  rows << KvStatRow{tr("Tokens held"), count(s.num_used_slots), tr("Token slots filled in used blocks")};
  rows << KvStatRow{tr("Copy-on-writes"), count(s.num_copy_on_writes),
                    tr("Shared blocks copied before a sequence wrote into them")};
  rows << KvStatRow{tr("Evictions"), count(s.num_evictions), tr("Cached blocks taken for new content")};
  return rows;
}

QString KvMapModel::statsText() const {
  QStringList lines;
  for (const KvStatRow& row : statsRows()) lines << row.label + QStringLiteral(": ") + row.value;
  return lines.join(QLatin1Char('\n'));
}

QString KvMapModel::poolSummary() const {
  if (m_snapshot.isEmpty()) return tr("No KV cache: load a model to see its blocks.");
  const iwb::BlockManagerStats& s = m_snapshot.stats;
  return tr("%1 blocks of %2 tokens (%3 tokens)")
      .arg(count(s.num_blocks))
      .arg(s.block_size)
      .arg(count(s.num_blocks * s.block_size));
}

}  // namespace iwb::ui
