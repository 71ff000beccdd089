// The server core: what the HTTP layer needs from whoever steps the engine. `iwb serve` uses
// EngineLoop (engine_loop.h, an engine thread of its own); the desktop application feeds the
// same requests into its engine worker. HTTP threads submit requests and read each one's
// tokens and end from a ResponseChannel; they never touch the engine.
#pragma once

#include "iwb/engine/model/model_info.h"
#include "iwb/engine/runtime/engine.h"
#include "iwb/engine/status.h"
#include "iwb/engine/tokenizer/tokenizer.h"

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include "iwb/engine/chat/chat_template.h"

#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace iwb::serve {

// The model being served, as the HTTP threads see it: immutable, shared, and usable from any
// thread (the tokenizer's tables are shared read-only).
struct ServedModel {
  std::string id;  // the name clients give as "model" and see in responses
  ModelSummary summary;
  tokenizer::Tokenizer tokenizer;
  std::string chat_template;    // tokenizer.chat_template (or --chat-template's text), empty when none
  int64_t context_length = 0;   // positions per sequence (prompt + generated)
  bool is_speculating = false;  // speculative decoding on (timings then carry draft_n)
  // --chat-template NAME: the family to render chats in, instead of the one the template shows.
  std::optional<ChatTemplateFamily> chat_template_family;
  // tokenizer.chat_template.tool_use (not with --chat-template): rendered instead when the
  // conversation has tools or tool turns, as llama.cpp and Hugging Face choose it.
  std::string chat_template_tool_use;
};

// One event of one of a submission's requests; `index` is the request's place in the submission.
struct ServeEvent {
  size_t index = 0;
  std::variant<TokenEvent, RequestFinished> event;
};

// The way back from the engine to one HTTP request: the stepping thread pushes, the HTTP
// thread takes. Thread-safe.
class ResponseChannel {
 public:
  void push(size_t index, TokenEvent token);
  void push(size_t index, RequestFinished finished);
  // Everything that arrived since the last call; waits up to `timeout` when nothing has.
  std::vector<ServeEvent> take(std::chrono::milliseconds timeout);

 private:
  std::mutex m_mutex;
  std::condition_variable m_arrived;
  std::vector<ServeEvent> m_events;
};

// What submit() gave each request of a submission, in order.
struct Submission {
  std::vector<RequestId> requests;
};

class ServeCore {
 public:
  virtual ~ServeCore() = default;

  // Null while the model is loading (the server answers /health with 503 then).
  virtual std::shared_ptr<const ServedModel> model() const = 0;

  // Queues every request (all of them or none): their tokens and ends arrive on `channel`,
  // each tagged with its index in `requests`, until each has its RequestFinished. A request
  // the engine refuses (a prompt that can never fit) fails the whole submission with the
  // engine's reason. Any thread; may block briefly while the stepping thread takes them.
  virtual Result<Submission> submit(std::vector<GenerationRequest> requests,
                                    std::shared_ptr<ResponseChannel> channel) = 0;

  // Ends requests early (the client left): each still gets a RequestFinished (Aborted).
  // Unknown or finished ids are ignored. Any thread.
  virtual void abort(const std::vector<RequestId>& requests) = 0;
};

}  // namespace iwb::serve
