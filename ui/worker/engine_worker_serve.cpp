// EngineWorker's side of the local server: served requests queued in the same engine as the
// chat (through a ServeRouter), their tokens and ends sent back to the HTTP threads after every
// step, the steps counted in the server's metrics, and the open model published to the core.
#include "worker/engine_worker.h"

#include "iwb/engine/runtime/engine.h"
#include "iwb/engine/serve/engine_loop.h"
#include "serve/worker_serve_core.h"

namespace iwb::ui {

void EngineWorker::setServeCore(std::shared_ptr<WorkerServeCore> core) {
  // Requests already served keep running to their end (their channels outlive the core).
  m_serveCore = std::move(core);
  publishServedModel();
}

void EngineWorker::publishServedModel() {
  if (!m_serveCore) return;
  if (!m_engine) {
    m_serveCore->publishModel(nullptr);
    return;
  }
  m_serveCore->publishModel(std::make_shared<const iwb::serve::ServedModel>(
      iwb::serve::describe_served_model(*m_engine, m_serveCore->modelAlias())));
}

iwb::Result<iwb::serve::Submission> EngineWorker::submitServed(std::vector<iwb::GenerationRequest> requests,
                                                              std::shared_ptr<iwb::serve::ResponseChannel> channel) {
  if (!m_engine) return iwb::make_error(iwb::ErrorCode::Unsupported, "no model is open in the workbench");
  iwb::Result<iwb::serve::Submission> submission = m_serveRouter.submit(*m_engine, std::move(requests), channel);
  if (submission) scheduleStep();
  return submission;
}

void EngineWorker::abortServed(const std::vector<iwb::RequestId>& requests) {
  if (!m_engine) return;
  for (const iwb::RequestId id : requests) {
    if (m_serveRouter.is_routed(id)) m_engine->abort_request(id);
  }
  scheduleStep();
}

void EngineWorker::dispatchServed(const iwb::StepResult& result) {
  // Metrics first: a client that has its answer finds it counted.
  if (m_serveCore) m_serveCore->metrics().observe_step(result);
  // The Metrics tab measures served requests as it does the chat's (TTFT, ITL, MBU/MFU). Their
  // clock starts when the engine took them: now less the time they spent in it.
  for (const iwb::RequestFinished& f : result.finished) {
    if (!m_serveRouter.is_routed(f.request) || f.num_generated_tokens == 0) continue;
    WorkerRequests::Entry entry;
    entry.callerId = kServedRequestBit | f.request;
    entry.clock.addedAt = m_measurements.sessionSeconds() - f.queued_seconds - f.prompt_seconds - f.generation_seconds;
    emit requestMeasured(m_measurements.measure(f, entry, m_engine.get()));
  }
  m_serveRouter.dispatch(result);
}

}  // namespace iwb::ui
