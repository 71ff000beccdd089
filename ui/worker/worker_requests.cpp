// WorkerRequests: lookups over the worker's one request table.
#include "worker/worker_requests.h"

namespace iwb::ui {

WorkerRequests::Entry* WorkerRequests::find(quint64 engineId) {
  const auto it = m_entries.find(engineId);
  return it == m_entries.end() ? nullptr : &it.value();
}

std::optional<WorkerRequests::Entry> WorkerRequests::take(quint64 engineId) {
  const auto it = m_entries.find(engineId);
  if (it == m_entries.end()) return std::nullopt;
  Entry e = it.value();
  m_entries.erase(it);
  return e;
}

QHash<quint64, WorkerRequests::Entry> WorkerRequests::takeAll() {
  QHash<quint64, Entry> all;
  all.swap(m_entries);
  return all;
}

QList<quint64> WorkerRequests::engineIdsOf(quint64 callerId) const {
  QList<quint64> ids;
  for (auto it = m_entries.cbegin(); it != m_entries.cend(); ++it) {
    if (callerId == 0 || it.value().callerId == callerId) ids.append(it.key());
  }
  return ids;
}

QHash<quint64, quint64> WorkerRequests::callerIds() const {
  QHash<quint64, quint64> ids;
  for (auto it = m_entries.cbegin(); it != m_entries.cend(); ++it) ids.insert(it.key(), it.value().callerId);
  return ids;
}

}  // namespace iwb::ui
