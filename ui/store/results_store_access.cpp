// ResultsStoreAccess: a connection per call, opened and closed in the calling thread.
#include "store/results_store_access.h"

#include "iwb/engine/store/results_store.h"

#include <QObject>

namespace iwb::ui {
namespace {

// A fresh connection; an unopenable store says which file it is.
iwb::Result<std::unique_ptr<iwb::ResultsStore>> openStore(const QString& path) {
  auto store = iwb::ResultsStore::open(path.toStdString());
  if (store) return store;
  return iwb::make_error(store.status().code(), QObject::tr("The results store %1 cannot be opened: %2")
                                                    .arg(path, QString::fromStdString(store.error_message()))
                                                    .toStdString());
}

// Runs `use` on a connection that lives only for this call.
template <typename Use>
auto withStore(const QString& path, Use use) -> decltype(use(std::declval<iwb::ResultsStore&>())) {
  auto store = openStore(path);
  if (!store) return store.status();
  return use(**store);
}

}  // namespace

ResultsStoreAccess::ResultsStoreAccess(const QString& path)
    : m_path(path.isEmpty() ? QString::fromStdString(iwb::ResultsStore::default_path()) : path) {}

iwb::Result<std::optional<iwb::ProbeResult>> ResultsStoreAccess::latestProbe(const QString& deviceId) const {
  return withStore(m_path, [&](iwb::ResultsStore& s) { return s.latest_probe(deviceId.toStdString()); });
}

iwb::Status ResultsStoreAccess::addProbe(const iwb::ProbeResult& probe) const {
  return withStore(m_path, [&](iwb::ResultsStore& s) { return s.add_probe(probe); });
}

iwb::Result<std::vector<iwb::BenchResult>> ResultsStoreAccess::benchResults(int limit) const {
  return withStore(m_path, [&](iwb::ResultsStore& s) { return s.list_bench_results({}, limit); });
}

iwb::Result<std::vector<iwb::quant::QuantRun>> ResultsStoreAccess::quantRuns() const {
  return withStore(m_path, [](iwb::ResultsStore& s) { return s.list_quant_runs(); });
}

iwb::Result<std::vector<iwb::quant::QuantizedTensor>> ResultsStoreAccess::tensorErrors(qint64 runId) const {
  return withStore(m_path, [&](iwb::ResultsStore& s) { return s.quant_tensor_errors(runId); });
}

iwb::Result<std::unique_ptr<iwb::ResultsStore>> ResultsStoreAccess::openOnThisThread() const { return openStore(m_path); }

}  // namespace iwb::ui
