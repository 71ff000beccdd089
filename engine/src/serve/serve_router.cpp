// ServeRouter: served requests' ids and where their events go.
#include "iwb/engine/serve/serve_router.h"

namespace iwb::serve {

Result<Submission> ServeRouter::submit(Engine& engine, std::vector<GenerationRequest> requests,
                                       const std::shared_ptr<ResponseChannel>& channel) {
  Submission submission;
  for (size_t i = 0; i < requests.size(); ++i) {
    Result<RequestId> id = engine.add_request(std::move(requests[i]));
    if (!id) {
      // All or none: the ones already queued end unseen.
      for (const RequestId earlier : submission.requests) {
        m_routes.erase(earlier);
        engine.abort_request(earlier);
      }
      return id.status();
    }
    m_routes[*id] = Route{channel, i};
    submission.requests.push_back(*id);
  }
  return submission;
}

void ServeRouter::dispatch(const StepResult& step) {
  for (const TokenEvent& token : step.tokens) {
    if (const auto it = m_routes.find(token.request); it != m_routes.end())
      it->second.channel->push(it->second.index, token);
  }
  for (const RequestFinished& finished : step.finished) {
    const auto it = m_routes.find(finished.request);
    if (it == m_routes.end()) continue;
    it->second.channel->push(it->second.index, finished);
    m_routes.erase(it);
  }
}

void ServeRouter::fail_all(Engine& engine, const std::string& message) {
  for (auto& [id, route] : m_routes) {
    RequestFinished f;
    f.request = id;
    f.reason = FinishReason::Error;
    f.error = message;
    route.channel->push(route.index, std::move(f));
    engine.abort_request(id);
  }
  m_routes.clear();
}

void ServeRouter::abort_all(Engine& engine) const {
  for (const auto& [id, route] : m_routes) engine.abort_request(id);
}

}  // namespace iwb::serve
