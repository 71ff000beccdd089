// The KV-cache map value: decoding block texts with a per-block cache, and building the value
// from the block manager's snapshot.
#include "worker/kv_map_values.h"

#include <algorithm>

namespace iwb::ui {

void BlockTextCache::setDecoder(Decoder decoder) {
  m_decoder = std::move(decoder);
  clear();
}

void BlockTextCache::clear() {
  m_tokens.clear();
  m_texts.clear();
}

QStringList BlockTextCache::texts(const std::vector<iwb::BlockSnapshot>& blocks) {
  const size_t n = blocks.size();
  if (m_tokens.size() != n) {  // another pool: nothing cached applies
    m_tokens.assign(n, {});
    m_texts = QStringList();
    m_texts.resize(static_cast<qsizetype>(n));
  }
  for (size_t i = 0; i < n; ++i) {
    const std::vector<int32_t>& tokens = blocks[i].tokens;
    if (tokens == m_tokens[i]) continue;
    m_tokens[i] = tokens;
    QString& text = m_texts[static_cast<qsizetype>(i)];
    if (tokens.empty() || !m_decoder) {
      text.clear();
      continue;
    }
    const std::string bytes = m_decoder(tokens);
    ++m_numDecodes;
    text = QString::fromUtf8(bytes.data(), static_cast<qsizetype>(bytes.size()));
  }
  return m_texts;  // implicitly shared: the copy is cheap until either side changes
}

KvMapSnapshot makeKvMapSnapshot(iwb::EngineKvSnapshot snapshot, BlockTextCache& texts,
                                const QHash<quint64, quint64>& callerRequests) {
  KvMapSnapshot value;
  value.stats = snapshot.cache.stats;
  value.blocks = std::move(snapshot.cache.blocks);
  value.blockTexts = texts.texts(value.blocks);
  value.numWaiting = snapshot.scheduler.num_waiting;
  value.numRunning = snapshot.scheduler.num_running;
  value.numPreemptions = snapshot.scheduler.num_preemptions;
  for (const iwb::KvSequenceInfo& seq : snapshot.sequences) {
    const auto caller = callerRequests.constFind(seq.request);
    if (caller != callerRequests.cend()) value.sequenceRequests.insert(seq.sequence, caller.value());
  }
  value.sequences = std::move(snapshot.sequences);
  value.bytesPerBlock = snapshot.bytes_per_block;
  value.cacheType = QString::fromStdString(snapshot.cache_type);
  return value;
}

void registerKvMapMetaTypes() { qRegisterMetaType<iwb::ui::KvMapSnapshot>(); }

}  // namespace iwb::ui
