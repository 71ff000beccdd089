// The scheduler's part in speculative decoding: draft tokens get slots after a sequence's
// decode token (only while blocks and the step's budget leave room for the other decodes),
// and a plan that is never reported back gives its draft tokens up again.
#include "iwb/engine/paged/scheduler.h"

#include <algorithm>

namespace iwb {

bool Scheduler::is_waiting_to_decode(SequenceId sequence) const {
  const Sequence* seq = find(sequence);
  return seq != nullptr && is_decoding(*seq);
}

Status Scheduler::set_draft(SequenceId sequence, std::vector<int32_t> draft_tokens) {
  if (!is_waiting_to_decode(sequence)) {
    return make_error(ErrorCode::InvalidArgument, "sequence " + std::to_string(sequence) +
                                                      " is not about to decode: drafts are for decoding sequences");
  }
  if (draft_tokens.empty()) {
    m_drafts.erase(sequence);
  } else {
    m_drafts[sequence] = std::move(draft_tokens);
  }
  return {};
}

int64_t Scheduler::plan_draft(Sequence& seq, int64_t budget, int64_t num_later_decodes) {
  const auto it = m_drafts.find(seq.id);
  if (it == m_drafts.end()) return 0;
  // Budget for the later decodes first; then as many guesses as fit.
  const int64_t room = std::min<int64_t>(static_cast<int64_t>(it->second.size()), budget - num_later_decodes);
  int64_t n = 0;
  const int32_t bs = m_blocks.block_size();
  for (; n < room; ++n) {
    // A guess that needs a fresh block takes it only when every later decode keeps one.
    const bool needs_block = m_blocks.num_tokens(seq.id) % bs == 0;
    if (needs_block && m_blocks.num_available_blocks() <= num_later_decodes) break;
    if (!m_blocks.can_append(seq.id)) break;
    const int32_t token = it->second[static_cast<size_t>(n)];
    Result<AppendedSlot> slot = m_blocks.append_slot(seq.id, token);
    if (!slot) break;
    // The last block is the sequence's own after its decode token (copy-on-write already done).
    seq.tokens.push_back(token);
  }
  return n;
}

void Scheduler::roll_back_unreported_drafts() {
  for (const Planned& p : m_in_flight) {
    if (p.num_draft_tokens == 0) continue;
    Sequence* seq = get(p.sequence);
    if (seq == nullptr || !m_blocks.has_sequence(p.sequence)) continue;
    seq->tokens.resize(seq->tokens.size() - static_cast<size_t>(p.num_draft_tokens));
    (void)m_blocks.truncate(p.sequence, m_blocks.num_tokens(p.sequence) - p.num_draft_tokens);
  }
}

}  // namespace iwb
