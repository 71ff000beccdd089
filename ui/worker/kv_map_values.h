// The value the engine worker sends for the KV-cache map: the block manager's snapshot (every
// block's state, owners, fill and tokens), the scheduler's counters, the text each block's
// tokens spell (decoded on the worker thread) and which request each sequence serves.
// Copyable and registered for queued connections.
#pragma once

#include "iwb/engine/runtime/engine_reports.h"

#include <QHash>
#include <QMetaType>
#include <QStringList>

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

namespace iwb::ui {

struct KvMapSnapshot {
  iwb::BlockManagerStats stats;
  std::vector<iwb::BlockSnapshot> blocks;  // indexed by block id
  QStringList blockTexts;                  // what each block's tokens spell; empty for a free block
  qint64 numWaiting = 0;                   // sequences queued, not yet admitted
  qint64 numRunning = 0;                   // sequences holding blocks
  qint64 numPreemptions = 0;               // since the model was loaded
  // Engine SequenceId -> the caller's request id (the one the worker's signals carry). A
  // sequence missing here belongs to a request the worker does not know (a test driving the
  // block manager directly).
  QHash<quint64, quint64> sequenceRequests;
  std::vector<iwb::KvSequenceInfo> sequences;  // waiting ones first, then running (engine order)
  quint64 bytesPerBlock = 0;               // K and V of all layers
  QString cacheType;                       // "f16", "q8_0", or keys/values "q8_0/q4_0"
  double sessionSeconds = 0;               // when it was taken, on the worker's session clock
  bool isIdle = false;                     // taken when the engine had nothing left to do

  qint64 numBlocks() const { return static_cast<qint64>(blocks.size()); }
  bool isEmpty() const { return blocks.empty(); }
};

// Decodes block contents into text once and reuses it while a block's tokens stay the same:
// a full block never changes until it is freed, so only the blocks being written cost a
// decode per snapshot. Lives on the worker thread (it holds the engine's decode function).
class BlockTextCache {
 public:
  using Decoder = std::function<std::string(std::span<const int32_t> tokens)>;

  BlockTextCache() = default;
  explicit BlockTextCache(Decoder decoder) : m_decoder(std::move(decoder)) {}

  // A new tokenizer (a new model): forgets every cached text.
  void setDecoder(Decoder decoder);
  void clear();
  // The text of every block, in block order. Invalid UTF-8 (a character cut by a block edge)
  // shows as U+FFFD.
  QStringList texts(const std::vector<iwb::BlockSnapshot>& blocks);
  qint64 numDecodes() const { return m_numDecodes; }  // decoder calls so far (tests)

 private:
  Decoder m_decoder;
  std::vector<std::vector<int32_t>> m_tokens;  // per block id, the tokens m_texts was made from
  QStringList m_texts;
  qint64 m_numDecodes = 0;
};

// Builds the value from the engine's snapshot; `texts` decodes the blocks' tokens and
// `callerRequests` maps engine RequestIds to the caller's request ids (requests missing from
// it keep no request in sequenceRequests).
KvMapSnapshot makeKvMapSnapshot(iwb::EngineKvSnapshot snapshot, BlockTextCache& texts,
                                const QHash<quint64, quint64>& callerRequests);

void registerKvMapMetaTypes();

}  // namespace iwb::ui

Q_DECLARE_METATYPE(iwb::ui::KvMapSnapshot)
