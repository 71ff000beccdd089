// WorkerServeCore: submissions and aborts as queued calls on the engine worker's thread; a
// submission waits for the worker's answer (the engine's refusal, or the ids).
#include "serve/worker_serve_core.h"

#include "worker/engine_worker.h"

#include <QMetaObject>

#include <future>

namespace iwb::ui {

WorkerServeCore::WorkerServeCore(EngineWorker* worker, std::string modelAlias)
    : m_worker(worker), m_modelAlias(std::move(modelAlias)) {}

std::shared_ptr<const iwb::serve::ServedModel> WorkerServeCore::model() const {
  std::lock_guard lock(m_mutex);
  return m_model;
}

void WorkerServeCore::publishModel(std::shared_ptr<const iwb::serve::ServedModel> model) {
  std::lock_guard lock(m_mutex);
  m_model = std::move(model);
}

iwb::Result<iwb::serve::Submission> WorkerServeCore::submit(std::vector<iwb::GenerationRequest> requests,
                                                            std::shared_ptr<iwb::serve::ResponseChannel> channel) {
  using Answer = iwb::Result<iwb::serve::Submission>;
  auto answer = std::make_shared<std::promise<Answer>>();
  std::future<Answer> future = answer->get_future();
  EngineWorker* worker = m_worker;
  const bool isPosted = QMetaObject::invokeMethod(
      m_worker,
      [worker, answer, requests = std::move(requests), channel]() mutable {
        answer->set_value(worker->submitServed(std::move(requests), channel));
      },
      Qt::QueuedConnection);
  if (!isPosted) return iwb::make_error(iwb::ErrorCode::Unsupported, "the workbench's engine is not running");
  if (future.wait_for(kSubmitTimeout) != std::future_status::ready) {
    return iwb::make_error(iwb::ErrorCode::Unsupported, "the workbench's engine is busy (loading a model?)");
  }
  try {
    return future.get();
  } catch (const std::future_error&) {
    return iwb::make_error(iwb::ErrorCode::Unsupported, "the workbench's engine went away");
  }
}

void WorkerServeCore::abort(const std::vector<iwb::RequestId>& requests) {
  EngineWorker* worker = m_worker;
  QMetaObject::invokeMethod(m_worker, [worker, requests] { worker->abortServed(requests); }, Qt::QueuedConnection);
}

}  // namespace iwb::ui
