// QuantWorker: the form's values to the engine's, the queue run through run_quant_lab, and its
// callbacks (on this thread) turned into queued signals.
#include "quantlab/quant_worker.h"

#include "iwb/engine/store/results_store.h"
#include "store/results_store_access.h"

namespace iwb::ui {

iwb::quant::LabSettings toLabSettings(const QuantLabSettings& s) {
  iwb::quant::LabSettings out;
  out.source_path = s.sourcePath.toStdString();
  out.output_dir = s.outputDir.toStdString();
  out.eval_text_path = s.evalTextPath.toStdString();
  out.calibration_text_path = s.calibrationTextPath.toStdString();
  out.context = s.context;
  out.num_chunks = s.numChunks;
  out.num_gen_tokens = s.numGenTokens;
  out.gen_depth = s.genDepth;
  out.fit_context = s.fitContext;
  out.fit_memory_bytes = s.fitMemoryBytes;
  out.num_threads = s.numThreads;
  return out;
}

std::vector<iwb::quant::LabItem> toLabItems(const QVector<QuantJob>& jobs) {
  std::vector<iwb::quant::LabItem> items;
  items.reserve(static_cast<size_t>(jobs.size()));
  for (const QuantJob& j : jobs) items.push_back({j.type.toStdString(), j.isImatrix, j.kvCacheType.toStdString()});
  return items;
}

QuantWorker::QuantWorker(QObject* parent) : QObject(parent) {
  qRegisterMetaType<iwb::ui::QuantJob>();
  qRegisterMetaType<iwb::ui::QuantLabSettings>();
  qRegisterMetaType<QVector<iwb::ui::QuantJob>>();
  qRegisterMetaType<iwb::quant::LabProgress>();
  qRegisterMetaType<iwb::quant::LabItemOutcome>();
  qRegisterMetaType<iwb::quant::LabReport>();
}

void QuantWorker::runQueue(const QuantLabSettings& s, const QVector<QuantJob>& jobs) {
  // The connection is made here, on the thread that uses it, and closed before returning.
  auto store = ResultsStoreAccess(s.storePath).openOnThisThread();
  if (!store) {
    emit queueFailed(QString::fromStdString(store.error_message()));
    return;
  }
  iwb::quant::LabObserver observer;
  observer.progress = [this](const iwb::quant::LabProgress& p) { emit progressed(p); };
  observer.run_recorded = [this](int64_t id) { emit runRecorded(id); };
  observer.item_finished = [this](const iwb::quant::LabItemOutcome& o) { emit itemFinished(o); };
  auto report = iwb::quant::run_quant_lab(toLabSettings(s), toLabItems(jobs), **store, observer, &m_cancel);
  if (!report) {
    emit queueFailed(QString::fromStdString(report.error_message()));
    return;
  }
  emit queueFinished(*report);
}

}  // namespace iwb::ui
