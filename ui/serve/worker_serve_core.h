// The server core of the application's local server: HTTP threads' requests go to the engine
// worker's thread as queued calls (so they run in the same engine as the chat and show up in
// every panel), and the worker tells it which model is open and feeds its metrics.
#pragma once

#include "iwb/engine/serve/serve_core.h"
#include "iwb/engine/serve/serve_metrics.h"

#include <chrono>
#include <memory>
#include <mutex>
#include <string>

namespace iwb::ui {

class EngineWorker;

class WorkerServeCore final : public iwb::serve::ServeCore {
 public:
  // `worker` must outlive the core's use (the local server stops before the engine goes).
  // `modelAlias`: the model id clients see; empty: the file name.
  WorkerServeCore(EngineWorker* worker, std::string modelAlias);

  std::shared_ptr<const iwb::serve::ServedModel> model() const override;
  // Waits (at most submitTimeout) for the worker to take the requests between two steps.
  iwb::Result<iwb::serve::Submission> submit(std::vector<iwb::GenerationRequest> requests,
                                             std::shared_ptr<iwb::serve::ResponseChannel> channel) override;
  void abort(const std::vector<iwb::RequestId>& requests) override;

  // The worker's side (its thread): the model now open (null: none), and every step.
  void publishModel(std::shared_ptr<const iwb::serve::ServedModel> model);
  const std::string& modelAlias() const { return m_modelAlias; }
  iwb::serve::ServeMetrics& metrics() { return m_metrics; }

  static constexpr std::chrono::seconds kSubmitTimeout{30};

 private:
  EngineWorker* m_worker;
  std::string m_modelAlias;
  iwb::serve::ServeMetrics m_metrics;
  mutable std::mutex m_mutex;
  std::shared_ptr<const iwb::serve::ServedModel> m_model;
};

}  // namespace iwb::ui
