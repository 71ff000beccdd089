// RequestInbox: the thread-safe hand-over of requests and aborts to the step thread.
#include "runtime/request_inbox.h"

#include "runtime/request_state.h"

namespace iwb {

RequestId RequestInbox::add(GenerationRequest request) {
  std::lock_guard lock(m_mutex);
  const RequestId id = m_next_id++;
  m_queue.push_back({id, std::move(request), Clock::now()});
  return id;
}

void RequestInbox::abort(RequestId id) {
  std::lock_guard lock(m_mutex);
  for (auto it = m_queue.begin(); it != m_queue.end(); ++it) {
    if (it->id == id) {
      RequestState never_run(id, std::move(it->params), it->submitted, m_tokenizer);
      m_aborted_while_queued.push_back(never_run.finished(FinishReason::Aborted));
      m_queue.erase(it);
      return;
    }
  }
  if (m_active.count(id) != 0) m_abort_requests.insert(id);  // honoured by the next step()
}

bool RequestInbox::has_unfinished() const {
  std::lock_guard lock(m_mutex);
  return !m_active.empty() || !m_queue.empty() || !m_aborted_while_queued.empty();
}

RequestInbox::Taken RequestInbox::take() {
  Taken t;
  std::lock_guard lock(m_mutex);
  t.aborted_early = std::move(m_aborted_while_queued);
  m_aborted_while_queued.clear();
  t.queued.swap(m_queue);
  t.aborts.swap(m_abort_requests);
  for (const Queued& q : t.queued) m_active.insert(q.id);
  return t;
}

void RequestInbox::mark_finished(RequestId id) {
  std::lock_guard lock(m_mutex);
  m_active.erase(id);
  m_abort_requests.erase(id);
}

}  // namespace iwb
