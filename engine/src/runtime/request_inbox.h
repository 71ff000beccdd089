// Where requests wait between add_request() (any thread) and the step thread: the queue of new
// requests, the aborts asked for, and which requests are still unfinished. Its own mutex; the
// step thread drains it once per step.
#pragma once

#include "iwb/engine/runtime/engine.h"
#include "iwb/engine/tokenizer/tokenizer.h"

#include <chrono>
#include <deque>
#include <mutex>
#include <set>
#include <vector>

namespace iwb {

class RequestInbox {
 public:
  using Clock = std::chrono::steady_clock;

  struct Queued {
    RequestId id;
    GenerationRequest params;
    Clock::time_point submitted;
  };

  // What the step thread takes at the start of a step.
  struct Taken {
    std::deque<Queued> queued;                   // new requests, now active
    std::set<RequestId> aborts;                  // active requests to abort
    std::vector<RequestFinished> aborted_early;  // aborted while still queued
  };

  explicit RequestInbox(const tokenizer::Tokenizer& tokenizer) : m_tokenizer(tokenizer) {}

  // Queues a checked request; returns its id.
  RequestId add(GenerationRequest request);
  // A queued request ends at once (reported by the next take()); an active one is aborted by
  // the step thread at its next step. Unknown or finished ids are ignored.
  void abort(RequestId id);
  bool has_unfinished() const;
  // Everything new since the last take; the queued requests count as active from here on, so
  // has_unfinished() never sees a gap.
  Taken take();
  // The step thread finished `id`.
  void mark_finished(RequestId id);

 private:
  const tokenizer::Tokenizer& m_tokenizer;
  mutable std::mutex m_mutex;
  std::deque<Queued> m_queue;       // added, not yet taken
  std::set<RequestId> m_active;     // taken, not finished
  std::set<RequestId> m_abort_requests;
  std::vector<RequestFinished> m_aborted_while_queued;
  RequestId m_next_id = 1;          // 0 is logits_for's temporary sequence
};

}  // namespace iwb
