// EngineWorker's measurement slots and signals: WorkerMeasurements computes, the worker emits
// the values on its thread.
#include "worker/engine_worker.h"

#include "iwb/engine/runtime/engine.h"

namespace iwb::ui {

void EngineWorker::setProfiling(bool isEnabled) {
  m_isProfiling = isEnabled;
  if (m_engine) m_engine->set_profiling(isEnabled);
}

void EngineWorker::resetProfile(quint64 epoch) { m_measurements.resetProfile(epoch); }

void EngineWorker::sampleMemory() { emitMemorySample(); }

void EngineWorker::collectStepMeasurements(const iwb::StepResult& result) {
  WorkerMeasurements::StepOutput out = m_measurements.collectStep(result, m_requests);
  if (out.profile) emit profileSnapshotReady(*out.profile, m_measurements.profileEpoch());
  for (auto it = out.tokenTimes.cbegin(); it != out.tokenTimes.cend(); ++it) emit tokenTimesReady(it.key(), it.value());
  if (out.isMemoryDue) emitMemorySample();
  if (out.isKvDue) emitKvSnapshot(false);
}

void EngineWorker::flushMeasurements() {
  WorkerMeasurements::Flush out = m_measurements.flush();
  for (auto it = out.tokenTimes.cbegin(); it != out.tokenTimes.cend(); ++it) emit tokenTimesReady(it.key(), it.value());
  if (out.profile) emit profileSnapshotReady(*out.profile, m_measurements.profileEpoch());
  emitMemorySample();
  emitKvSnapshot(true);
}

void EngineWorker::reportMeasurement(const iwb::RequestFinished& finished, const WorkerRequests::Entry& entry) {
  if (auto times = m_measurements.takeTokenTimes(entry.callerId)) emit tokenTimesReady(entry.callerId, *times);
  emit requestMeasured(m_measurements.measure(finished, entry, m_engine.get()));
}

void EngineWorker::emitMemorySample() { emit memorySampled(m_measurements.memorySample(m_engine.get())); }

void EngineWorker::emitKvSnapshot(bool isIdle) {
  emit kvSnapshotReady(m_measurements.kvSnapshot(m_engine.get(), isIdle, m_requests));
  // Between steps on the engine's thread, as Engine::expert_load() requires.
  emit expertLoadReady(m_engine ? m_engine->expert_load() : iwb::ExpertLoadSnapshot{});
}

}  // namespace iwb::ui
