// ServeRouter: the bookkeeping a ServeCore implementation needs around the engine it steps:
// served requests queued with add_request (all of a submission or none), and each step's tokens
// and ends sent to the channels of the requests they belong to. Not thread-safe: its owner
// calls it from the thread that steps the engine, or under its own lock (EngineLoop).
#pragma once

#include "iwb/engine/serve/serve_core.h"

#include <unordered_map>

namespace iwb::serve {

class ServeRouter {
 public:
  // Queues every request in `engine`; its events will go to `channel` with its index. A
  // refusal aborts the ones already queued and returns the engine's reason.
  Result<Submission> submit(Engine& engine, std::vector<GenerationRequest> requests,
                            const std::shared_ptr<ResponseChannel>& channel);
  // Sends a step's events on; a finished request is forgotten. Events of other requests (the
  // application's own chat) are left alone.
  void dispatch(const StepResult& step);
  // Every routed request ends now with FinishReason::Error and `message`, and is aborted in
  // `engine` (the step failed, or the engine is going away).
  void fail_all(Engine& engine, const std::string& message);
  // Asks the engine to abort every routed request (they end through dispatch as usual).
  void abort_all(Engine& engine) const;

  bool is_empty() const { return m_routes.empty(); }
  bool is_routed(RequestId id) const { return m_routes.count(id) != 0; }

 private:
  struct Route {
    std::shared_ptr<ResponseChannel> channel;
    size_t index = 0;
  };
  std::unordered_map<RequestId, Route> m_routes;
};

}  // namespace iwb::serve
