// EngineLoop: the server core of `iwb serve`. One thread owns the engine and steps it while
// any request is unfinished; submissions from HTTP threads go straight to the engine's
// thread-safe add_request (a refusal comes back at once), and each step's tokens and ends are
// routed to the channels of the requests they belong to.
#pragma once

#include "iwb/engine/serve/serve_core.h"
#include "iwb/engine/serve/serve_metrics.h"
#include "iwb/engine/serve/serve_router.h"

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>

namespace iwb::serve {

class EngineLoop final : public ServeCore {
 public:
  // `metrics` (may be null) sees every step; it must outlive the loop. Until start() the
  // model is loading: model() is null and submissions are refused (Unavailable).
  explicit EngineLoop(ServeMetrics* metrics);
  ~EngineLoop() override;  // stop()

  // Serves `engine` under `model_id` (empty: the file name without .gguf), stepping it on a
  // thread of the loop's own. Once.
  // `chat_template`: llama-server's --chat-template, a family name ("chatml") or a Jinja text
  // whose family is recognised; empty: the model's own.
  void start(std::unique_ptr<Engine> engine, std::string model_id, std::string chat_template = {});

  std::shared_ptr<const ServedModel> model() const override;
  Result<Submission> submit(std::vector<GenerationRequest> requests, std::shared_ptr<ResponseChannel> channel) override;
  void abort(const std::vector<RequestId>& requests) override;

  // Aborts every request still in flight, lets the engine finish them (their channels get
  // their RequestFinished) and joins the thread. Later submissions are refused.
  void stop();

 private:
  void run();

  std::unique_ptr<Engine> m_engine;
  ServeMetrics* m_metrics;
  // Guards the fields below; held around add_request so a route exists before its events.
  mutable std::mutex m_mutex;
  std::shared_ptr<const ServedModel> m_model;
  std::condition_variable m_work;
  ServeRouter m_router;
  bool m_is_stopping = false;
  std::thread m_thread;
};

// What a loaded engine serves: the ServedModel describing it under `model_id`.
ServedModel describe_served_model(const Engine& engine, std::string model_id, std::string chat_template = {});

}  // namespace iwb::serve
