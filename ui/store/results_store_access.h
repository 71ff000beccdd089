// The GUI's one way to the results store: the engine's ResultsStore, the SQLite file `iwb`
// writes too. Every use opens its own connection in the calling thread and closes it there, so
// no connection crosses threads. (Chat history is another database: conversation_store.h.)
#pragma once

#include "iwb/engine/profile/bench.h"
#include "iwb/engine/profile/machine_probe.h"
#include "iwb/engine/quant/quant_run.h"
#include "iwb/engine/status.h"

#include <QString>

#include <memory>
#include <optional>
#include <vector>

namespace iwb {
class ResultsStore;
}

namespace iwb::ui {

class ResultsStoreAccess {
 public:
  // `path` empty: ResultsStore::default_path() (what `iwb` uses without --db).
  explicit ResultsStoreAccess(const QString& path = {});
  const QString& path() const { return m_path; }

  // Short reads and writes, each on a connection of its own.
  iwb::Result<std::optional<iwb::ProbeResult>> latestProbe(const QString& deviceId) const;
  iwb::Status addProbe(const iwb::ProbeResult& probe) const;
  // The newest `limit` bench runs, oldest first (as the store lists them).
  iwb::Result<std::vector<iwb::BenchResult>> benchResults(int limit) const;
  // Every quantization-lab run, oldest first.
  iwb::Result<std::vector<iwb::quant::QuantRun>> quantRuns() const;
  iwb::Result<std::vector<iwb::quant::QuantizedTensor>> tensorErrors(qint64 runId) const;

  // A connection for long work on one thread (the lab's queue): open it on that thread and let
  // it die there.
  iwb::Result<std::unique_ptr<iwb::ResultsStore>> openOnThisThread() const;

 private:
  QString m_path;
};

}  // namespace iwb::ui
