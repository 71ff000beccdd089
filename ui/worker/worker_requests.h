// The engine worker's table of the requests it put in the engine: for each engine RequestId,
// the caller's reply id, the seed its sampler got, the draft length it asked for, and its clock
// on the worker's session time. One table, so a request's facts are added and dropped together.
#pragma once

#include "iwb/kernels/thread_pool.h"

#include <QHash>
#include <QList>

#include <optional>

namespace iwb::ui {

class WorkerRequests {
 public:
  struct Clock {
    double addedAt = 0;  // session seconds when add_request() took it
    qint64 numPromptTokens = 0;
    qint64 numGenerated = 0;
  };
  struct Entry {
    quint64 callerId = 0;     // the caller's name for the reply
    quint64 seed = 0;         // the seed the sampler got
    int numDraftTokens = -1;  // K it asked for (-1: the engine's)
    Clock clock;
    // The thread pool's counters when the request went in (has_value only for requests this
    // worker added): the measurement takes their growth.
    std::optional<iwb::ThreadPoolStats> poolAtAdd;
  };

  void add(quint64 engineId, const Entry& entry) { m_entries.insert(engineId, entry); }
  Entry* find(quint64 engineId);
  std::optional<Entry> take(quint64 engineId);
  // Everything, leaving the table empty (the engine is going away, or a step failed).
  QHash<quint64, Entry> takeAll();
  // Engine ids of the caller's reply `callerId`; 0: of every reply.
  QList<quint64> engineIdsOf(quint64 callerId) const;
  // Engine id -> caller id, for the KV-cache map's owners.
  QHash<quint64, quint64> callerIds() const;
  bool isEmpty() const { return m_entries.isEmpty(); }

 private:
  QHash<quint64, Entry> m_entries;
};

}  // namespace iwb::ui
