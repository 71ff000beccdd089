// EngineLoop and ResponseChannel: the engine thread of `iwb serve` and the per-request way back
// from it to the HTTP thread that waits for the tokens.
#include "iwb/engine/serve/engine_loop.h"

#include <chrono>
#include <filesystem>

namespace iwb::serve {

void ResponseChannel::push(size_t index, TokenEvent token) {
  {
    std::lock_guard lock(m_mutex);
    m_events.push_back({index, std::move(token)});
  }
  m_arrived.notify_one();
}

void ResponseChannel::push(size_t index, RequestFinished finished) {
  {
    std::lock_guard lock(m_mutex);
    m_events.push_back({index, std::move(finished)});
  }
  m_arrived.notify_one();
}

std::vector<ServeEvent> ResponseChannel::take(std::chrono::milliseconds timeout) {
  std::unique_lock lock(m_mutex);
  m_arrived.wait_for(lock, timeout, [&] { return !m_events.empty(); });
  std::vector<ServeEvent> out;
  out.swap(m_events);
  return out;
}

ServedModel describe_served_model(const Engine& engine, std::string model_id, std::string chat_template) {
  if (model_id.empty()) model_id = std::filesystem::path(engine.model().path).stem().string();
  if (model_id.empty()) model_id = engine.model().name;
  const std::optional<ChatTemplateFamily> named = chat_template_family_from_name(chat_template);
  return ServedModel{.id = std::move(model_id),
                     .summary = engine.model(),
                     .tokenizer = engine.tokenizer(),
                     .chat_template = chat_template.empty() || named ? engine.chat_template() : chat_template,
                     .context_length = engine.context_length(),
                     .is_speculating = engine.speculation().is_enabled(),
                     .chat_template_family = named,
                     .chat_template_tool_use = chat_template.empty() ? engine.chat_template_tool_use() : std::string()};
}

EngineLoop::EngineLoop(ServeMetrics* metrics) : m_metrics(metrics) {}

EngineLoop::~EngineLoop() { stop(); }

void EngineLoop::start(std::unique_ptr<Engine> engine, std::string model_id, std::string chat_template) {
  auto model = std::make_shared<const ServedModel>(
      describe_served_model(*engine, std::move(model_id), std::move(chat_template)));
  std::lock_guard lock(m_mutex);
  if (m_engine != nullptr || m_is_stopping) return;
  m_engine = std::move(engine);
  m_model = std::move(model);
  m_thread = std::thread([this] { run(); });
}

std::shared_ptr<const ServedModel> EngineLoop::model() const {
  std::lock_guard lock(m_mutex);
  return m_model;
}

Result<Submission> EngineLoop::submit(std::vector<GenerationRequest> requests,
                                      std::shared_ptr<ResponseChannel> channel) {
  Result<Submission> submission = make_error(ErrorCode::Unsupported, "the model is still loading");
  {
    std::lock_guard lock(m_mutex);
    if (m_is_stopping) return make_error(ErrorCode::Unsupported, "the server is shutting down");
    if (m_engine == nullptr) return submission;
    submission = m_router.submit(*m_engine, std::move(requests), channel);
  }
  m_work.notify_one();
  return submission;
}

void EngineLoop::abort(const std::vector<RequestId>& requests) {
  {
    std::lock_guard lock(m_mutex);
    if (m_engine == nullptr) return;
    for (const RequestId id : requests) m_engine->abort_request(id);
  }
  m_work.notify_one();
}

void EngineLoop::stop() {
  {
    std::lock_guard lock(m_mutex);
    m_is_stopping = true;
    if (!m_thread.joinable()) return;
    m_router.abort_all(*m_engine);
  }
  m_work.notify_one();
  m_thread.join();
}

void EngineLoop::run() {
  for (;;) {
    {
      std::unique_lock lock(m_mutex);
      m_work.wait(lock, [&] { return m_is_stopping || !m_router.is_empty() || m_engine->has_unfinished_requests(); });
      if (m_is_stopping && m_router.is_empty() && !m_engine->has_unfinished_requests()) return;
    }
    Result<StepResult> step = m_engine->step();
    if (!step) {
      // The engine could not step at all: every request in flight ends with the reason. The
      // engine keeps them (and is asked to abort them); pause so a broken engine does not spin.
      {
        std::lock_guard lock(m_mutex);
        m_router.fail_all(*m_engine, step.error_message());
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      continue;
    }
    if (m_metrics != nullptr) m_metrics->observe_step(*step);
    std::lock_guard lock(m_mutex);
    m_router.dispatch(*step);
  }
}

}  // namespace iwb::serve
