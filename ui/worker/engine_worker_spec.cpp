// EngineWorker's speculative decoding: the settings (kept across model loads), each verifying
// step's statistics and per-request reports (runStep sends the per-token "accepted draft"
// flags beside tokensReady).
#include "worker/engine_worker.h"

#include "iwb/engine/runtime/engine.h"

namespace iwb::ui {

void EngineWorker::setSpeculation(const SpeculationSettings& settings) {
  iwb::Result<iwb::spec::SpeculativeConfig> config = settings.toConfig();
  if (!config) {
    emit speculationChanged(m_specSettings, QString::fromStdString(config.error_message()));
    return;
  }
  if (m_engine) {
    if (iwb::Status s = m_engine->set_speculation(*config); !s) {
      emit speculationChanged(m_specSettings, QString::fromStdString(s.message()));
      return;
    }
  }
  m_specSettings = settings;
  emit speculationChanged(m_specSettings, {});
}

void EngineWorker::applySpeculation() {
  if (!m_engine || !m_specSettings.isEnabled()) return;
  iwb::Result<iwb::spec::SpeculativeConfig> config = m_specSettings.toConfig();
  const iwb::Status s = config ? m_engine->set_speculation(*config) : config.status();
  if (!s) {
    // The new model cannot use them (another vocabulary, say): speculation goes off.
    const QString error = tr("Speculative decoding is off for this model: %1").arg(QString::fromStdString(s.message()));
    m_specSettings = {};
    emit speculationChanged(m_specSettings, error);
  }
}

void EngineWorker::reportSpeculation(const iwb::StepResult& result) {
  if (!m_engine || !m_engine->speculation().is_enabled()) return;
  if (!result.stats.speculation.empty()) emit speculationStepped({m_measurements.sessionSeconds(), result.stats.speculation});
}

void EngineWorker::reportSpeculationFinished(const iwb::RequestFinished& f, const WorkerRequests::Entry& entry) {
  const int asked = entry.numDraftTokens;
  if (!m_engine || !m_engine->speculation().is_enabled()) return;
  if (f.reason == iwb::FinishReason::Error || f.num_generated_tokens < 2) return;
  SpeculationReport report;
  report.requestId = entry.callerId;
  report.numDraftTokens = asked < 0 ? m_engine->speculation().num_draft_tokens : asked;
  report.drafter = report.numDraftTokens == 0 ? QStringLiteral("none")
                                              : QString::fromLatin1(iwb::spec::drafter_kind_name(m_engine->speculation().kind));
  report.numGeneratedTokens = f.num_generated_tokens;
  report.generationSeconds = f.generation_seconds;
  report.stats = f.speculation;
  emit speculationMeasured(report);
}

}  // namespace iwb::ui
