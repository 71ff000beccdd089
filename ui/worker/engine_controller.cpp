// EngineController: the worker thread's lifetime, queued forwarding, and GUI-side state.
#include "worker/engine_controller.h"

#include "worker/engine_worker.h"

#include <QThread>

namespace iwb::ui {

EngineController::EngineController(QObject* parent)
    : QObject(parent), m_thread(new QThread(this)), m_worker(new EngineWorker) {
  registerGenerationMetaTypes();
  registerMeasurementMetaTypes();
  registerKvMapMetaTypes();
  registerExpertLoadMetaTypes();
  registerSpeculationMetaTypes();
  m_thread->setObjectName(QStringLiteral("EngineThread"));
  m_worker->moveToThread(m_thread);
  connect(m_thread, &QThread::finished, m_worker, &QObject::deleteLater);

  // Into the worker: the signals are emitted here, the slots run there (queued).
  connect(this, &EngineController::loadRequested, m_worker, &EngineWorker::loadModel);
  connect(this, &EngineController::generateRequested, m_worker, &EngineWorker::generate);
  connect(this, &EngineController::countTokensRequested, m_worker, &EngineWorker::countTokens);
  connect(this, &EngineController::batchRequested, m_worker, &EngineWorker::submitBatch);
  connect(this, &EngineController::stopRequested, m_worker, &EngineWorker::stop);
  connect(this, &EngineController::unloadRequested, m_worker, &EngineWorker::unload);
  connect(this, &EngineController::profilingRequested, m_worker, &EngineWorker::setProfiling);
  connect(this, &EngineController::resetProfileRequested, m_worker, &EngineWorker::resetProfile);
  connect(this, &EngineController::memorySampleRequested, m_worker, &EngineWorker::sampleMemory);
  connect(this, &EngineController::speculationRequested, m_worker, &EngineWorker::setSpeculation);

  // Out of the worker: state first, then the same signal for the GUI.
  connect(m_worker, &EngineWorker::modelLoadProgress, this, &EngineController::modelLoadProgress);
  connect(m_worker, &EngineWorker::modelLoaded, this, [this](const LoadedModel& model) {
    m_numPendingLoads = qMax(0, m_numPendingLoads - 1);
    m_isLoading = m_numPendingLoads > 0;
    m_model = model;
    emit modelLoaded(model);
  });
  connect(m_worker, &EngineWorker::deviceLoadFailed, this, &EngineController::deviceLoadFailed);
  connect(m_worker, &EngineWorker::modelLoadFailed, this, [this](const QString& path, const QString& message) {
    m_numPendingLoads = qMax(0, m_numPendingLoads - 1);
    m_isLoading = m_numPendingLoads > 0;
    m_model = {};  // the worker freed the previous model before trying this one
    emit modelLoadFailed(path, message);
  });
  connect(m_worker, &EngineWorker::modelUnloaded, this, [this] {
    m_model = {};
    emit modelUnloaded();
  });
  connect(m_worker, &EngineWorker::generationStarted, this, &EngineController::generationStarted);
  connect(m_worker, &EngineWorker::tokensReady, this, &EngineController::tokensReady);
  connect(m_worker, &EngineWorker::tokenProbabilityReady, this, &EngineController::tokenProbabilityReady);
  connect(m_worker, &EngineWorker::tokensCounted, this, &EngineController::tokensCounted);
  connect(m_worker, &EngineWorker::promptShortened, this, &EngineController::promptShortened);
  connect(m_worker, &EngineWorker::generationFinished, this,
          [this](quint64 requestId, const GenerationStats& stats) {
            handleRequestEnded(requestId);
            emit generationFinished(requestId, stats);
          });
  connect(m_worker, &EngineWorker::generationFailed, this, [this](quint64 requestId, const QString& message) {
    handleRequestEnded(requestId);
    emit generationFailed(requestId, message);
  });
  connect(m_worker, &EngineWorker::profileSnapshotReady, this,
          [this](const iwb::ProfileSnapshot& snapshot, quint64 epoch) {
            if (epoch == m_profileEpoch) emit profileSnapshotReady(snapshot);
          });
  connect(m_worker, &EngineWorker::tokenTimesReady, this, &EngineController::tokenTimesReady);
  connect(m_worker, &EngineWorker::requestMeasured, this, &EngineController::requestMeasured);
  connect(m_worker, &EngineWorker::memorySampled, this, &EngineController::memorySampled);
  connect(m_worker, &EngineWorker::kvSnapshotReady, this, &EngineController::kvSnapshotReady);
  connect(m_worker, &EngineWorker::expertLoadReady, this, &EngineController::expertLoadReady);
  connect(m_worker, &EngineWorker::speculationChanged, this,
          [this](const SpeculationSettings& settings, const QString& error) {
            m_speculation = settings;
            emit speculationChanged(settings, error);
          });
  connect(m_worker, &EngineWorker::speculationStepped, this, &EngineController::speculationStepped);
  connect(m_worker, &EngineWorker::speculationMeasured, this, &EngineController::speculationMeasured);
  connect(m_worker, &EngineWorker::draftTokensReady, this, &EngineController::draftTokensReady);
  m_thread->start();
}

EngineController::~EngineController() {
  // The event loop ends after the step it is running; the queued next step never runs, and
  // the worker (with the engine) is deleted on its own thread.
  m_thread->quit();
  m_thread->wait();
}

void EngineController::loadModel(const QString& path, const EngineLoadOptions& options) {
  ++m_numPendingLoads;
  m_isLoading = true;
  m_lastLoadOptions = options;
  emit modelLoadStarted(path);
  emit loadRequested(path, options);
}

void EngineController::loadOnCpu(const QString& path) {
  EngineLoadOptions options = m_lastLoadOptions;
  options.device = QStringLiteral("cpu");
  loadModel(path, options);
}

quint64 EngineController::generate(const GenerationInput& input) {
  const quint64 requestId = m_nextRequest++;
  m_activeRequest = requestId;
  emit generateRequested(requestId, input);
  return requestId;
}

quint64 EngineController::countTokens(const GenerationInput& input) {
  const quint64 tag = m_nextCountTag++;
  emit countTokensRequested(tag, input);
  return tag;
}

void EngineController::stop() {
  if (m_activeRequest != 0) emit stopRequested(m_activeRequest);
}

QList<quint64> EngineController::submitBatch(const BatchInput& batch) {
  QList<quint64> ids;
  ids.reserve(batch.prompts.size());
  for (qsizetype i = 0; i < batch.prompts.size(); ++i) ids << m_nextRequest++;
  if (!ids.isEmpty()) emit batchRequested(ids, batch);
  return ids;
}

void EngineController::stopRequests(const QList<quint64>& requestIds) {
  for (const quint64 id : requestIds) {
    if (id != 0) emit stopRequested(id);  // 0 would stop every reply, the chat's too
  }
}

void EngineController::unload() { emit unloadRequested(); }

void EngineController::setProfiling(bool isEnabled) {
  if (isEnabled == m_isProfiling) return;
  m_isProfiling = isEnabled;
  emit profilingRequested(isEnabled);
  emit profilingChanged(isEnabled);
}

void EngineController::resetProfile() { emit resetProfileRequested(++m_profileEpoch); }

void EngineController::sampleMemory() { emit memorySampleRequested(); }

void EngineController::handleRequestEnded(quint64 requestId) {
  if (requestId == m_activeRequest) m_activeRequest = 0;
}

void EngineController::setSpeculation(const SpeculationSettings& settings) { emit speculationRequested(settings); }

}  // namespace iwb::ui
