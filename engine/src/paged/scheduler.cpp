// Continuous-batching scheduler (see scheduler.h): decodes first, then prefill chunks, then
// first-come-first-served admissions, under a per-step token budget; preemption by recomputation.
#include "iwb/engine/paged/scheduler.h"

#include <algorithm>
#include <unordered_set>

namespace iwb {

Result<Scheduler> Scheduler::create(const BlockManagerConfig& blocks, const SchedulerConfig& config) {
  if (config.max_batch_tokens <= 0 || config.max_running_sequences <= 0 || config.reserved_blocks_per_running < 0) {
    return make_error(ErrorCode::InvalidArgument,
                      "the scheduler needs a positive token budget and sequence limit, and no negative reserve");
  }
  Result<BlockManager> manager = BlockManager::create(blocks);
  if (!manager) return manager.status();
  SchedulerConfig c = config;
  // More running sequences than budget tokens would leave some decodes out of every step.
  c.max_running_sequences = std::min(c.max_running_sequences, c.max_batch_tokens);
  return Scheduler(std::move(manager).value(), c);
}

Sequence* Scheduler::get(SequenceId sequence) {
  const auto it = m_sequences.find(sequence);
  return it == m_sequences.end() ? nullptr : &it->second;
}

const Sequence* Scheduler::find(SequenceId sequence) const {
  const auto it = m_sequences.find(sequence);
  return it == m_sequences.end() ? nullptr : &it->second;
}

bool Scheduler::is_decoding(const Sequence& seq) const {
  // A sampled token waits to be run and has no slot yet.
  return seq.status == SequenceStatus::Running && m_blocks.num_tokens(seq.id) == seq.num_tokens() - 1;
}

Result<SequenceId> Scheduler::add_sequence(RequestId request, std::vector<int32_t> prompt_tokens) {
  const AllocationCheck check = m_blocks.can_allocate(prompt_tokens);
  if (check.status == AllocationStatus::Never) return make_error(ErrorCode::InvalidArgument, check.message);
  Sequence seq;
  seq.id = m_next_id++;
  seq.request = request;
  seq.num_prompt_tokens = static_cast<int64_t>(prompt_tokens.size());
  seq.tokens = std::move(prompt_tokens);
  seq.arrival = m_next_arrival++;
  m_waiting.push_back(seq.id);
  const SequenceId id = seq.id;
  m_sequences.emplace(id, std::move(seq));
  return id;
}

Result<SequenceId> Scheduler::fork(SequenceId parent, RequestId child_request, int32_t last_token) {
  const Sequence* p = find(parent);
  if (p == nullptr)
    return make_error(ErrorCode::NotFound, "cannot fork sequence " + std::to_string(parent) + ": unknown");
  if (!is_decoding(*p)) {
    return make_error(ErrorCode::InvalidArgument,
                      "sequence " + std::to_string(parent) +
                          " can be forked only while running, between steps, after a sampled token");
  }
  Sequence child = *p;
  child.id = m_next_id++;
  child.request = child_request;
  child.tokens.back() = last_token;
  child.arrival = m_next_arrival++;
  child.num_preemptions = 0;
  IWB_RETURN_IF_ERROR(m_blocks.fork(parent, child.id));
  m_running.push_back(child.id);
  const SequenceId id = child.id;
  m_sequences.emplace(id, std::move(child));
  return id;
}

void Scheduler::remove(SequenceId sequence) {
  const auto w = std::find(m_waiting.begin(), m_waiting.end(), sequence);
  if (w != m_waiting.end()) m_waiting.erase(w);
  const auto r = std::find(m_running.begin(), m_running.end(), sequence);
  if (r != m_running.end()) m_running.erase(r);
  if (m_blocks.has_sequence(sequence)) (void)m_blocks.free(sequence);
  if (m_sequences.erase(sequence) > 0) m_removed.push_back(sequence);
}

Status Scheduler::abort(SequenceId sequence) {
  if (find(sequence) == nullptr)
    return make_error(ErrorCode::NotFound, "sequence " + std::to_string(sequence) + " is not queued");
  remove(sequence);
  return {};
}

void Scheduler::preempt(SequenceId sequence, ScheduledStep& step) {
  Sequence& seq = *get(sequence);
  (void)m_blocks.free(sequence);
  // Recomputation: everything generated so far is part of what must be run again; the prefix
  // cache usually gives most of it back.
  seq.num_computed_tokens = 0;
  seq.status = SequenceStatus::Waiting;
  ++seq.num_preemptions;
  ++m_num_preemptions;
  m_running.erase(std::find(m_running.begin(), m_running.end(), sequence));
  m_waiting.push_front(sequence);  // re-admitted before anything that arrived later
  step.preempted.push_back(sequence);
}

void Scheduler::fail(SequenceId sequence, std::string message, ScheduledStep& step) {
  const Sequence& seq = *get(sequence);
  step.failed.push_back({sequence, seq.request, std::move(message)});
  remove(sequence);
  ++m_num_failed;
}

ScheduledSequence Scheduler::plan_entry(const Sequence& seq, int64_t num_tokens) const {
  ScheduledSequence e;
  e.sequence = seq.id;
  e.request = seq.request;
  e.num_context_tokens = seq.num_computed_tokens;
  e.sequence_length = seq.num_computed_tokens + num_tokens;
  const std::span<const BlockId> table = m_blocks.block_table(seq.id);
  e.block_table.assign(table.begin(), table.end());
  const int64_t bs = m_blocks.block_size();
  for (int64_t p = e.num_context_tokens; p < e.sequence_length; ++p) {
    e.tokens.push_back(seq.tokens[static_cast<size_t>(p)]);
    e.positions.push_back(static_cast<int32_t>(p));
    e.slot_mapping.push_back(static_cast<int64_t>(table[static_cast<size_t>(p / bs)]) * bs + p % bs);
  }
  e.needs_logits = e.sequence_length == seq.num_tokens();
  return e;
}

ScheduledStep Scheduler::schedule() {
  ScheduledStep step;
  step.batch.block_size = m_blocks.block_size();
  // A plan never reported back is simply planned again: its decode slots are already reserved
  // and show up below as one-token chunks (its draft tokens are taken back first).
  roll_back_unreported_drafts();
  m_in_flight.clear();
  std::vector<std::pair<SequenceId, bool>> planned;  // (sequence, is_decode), tokens in m_in_flight
  std::unordered_set<SequenceId> is_planned;
  int64_t budget = m_config.max_batch_tokens;

  // 1. One decode token for each running sequence, oldest first; blocks for them come first.
  // A sequence with a draft runs its guesses after its token, while blocks and the budget
  // leave room for the decodes after it.
  int64_t num_decodes_left = 0;
  if (!m_drafts.empty()) {
    for (const SequenceId id : m_running) num_decodes_left += is_decoding(*get(id)) ? 1 : 0;
  }
  for (size_t i = 0; i < m_running.size() && budget > 0; ++i) {
    const SequenceId id = m_running[i];
    Sequence& seq = *get(id);
    if (!is_decoding(seq)) continue;
    bool has_room = true;
    while (!m_blocks.can_append(id)) {
      if (m_running.back() != id) {
        preempt(m_running.back(), step);  // newer than every sequence planned so far
        continue;
      }
      // Nobody newer is left. If it could never fit, even alone, recomputing it would loop forever.
      if (m_blocks.num_blocks_for(seq.num_tokens()) > m_blocks.num_blocks()) {
        fail(id,
             "the sequence outgrew the KV cache: " + std::to_string(seq.num_tokens()) + " tokens need " +
                 std::to_string(m_blocks.num_blocks_for(seq.num_tokens())) + " blocks but the cache holds " +
                 std::to_string(m_blocks.num_blocks()),
             step);
      } else {
        preempt(id, step);
      }
      has_room = false;
      break;
    }
    if (!has_room) break;  // it was the newest running sequence: nothing after it
    Result<AppendedSlot> slot = m_blocks.append_slot(id, seq.tokens.back());
    if (!slot) {  // can_append said yes; kept as a guard, never expected
      fail(id, slot.error_message(), step);
      break;
    }
    if (slot->copy) step.batch.block_copies.push_back(*slot->copy);
    --budget;
    num_decodes_left = std::max<int64_t>(0, num_decodes_left - 1);
    const int64_t num_draft = m_drafts.empty() ? 0 : plan_draft(seq, budget, num_decodes_left);
    budget -= num_draft;
    m_in_flight.push_back({id, 1 + num_draft, num_draft});
    planned.emplace_back(id, true);
    is_planned.insert(id);
  }

  // 2. Prompt chunks (or recomputation) of admitted sequences still prefilling, oldest first.
  for (const SequenceId id : m_running) {
    if (budget <= 0) break;
    const Sequence& seq = *get(id);
    if (is_planned.count(id) != 0 || is_decoding(seq)) continue;
    const int64_t remaining = seq.num_tokens() - seq.num_computed_tokens;
    if (remaining <= 0) continue;
    const int64_t n = std::min(remaining, budget);
    m_in_flight.push_back({id, n});
    planned.emplace_back(id, false);
    is_planned.insert(id);
    budget -= n;
  }

  // 3. Admissions, first come first served; none in a step that had to preempt (the blocks
  // just freed are for the older sequences).
  while (step.preempted.empty() && budget > 0 && !m_waiting.empty() &&
         static_cast<int64_t>(m_running.size()) < m_config.max_running_sequences) {
    const SequenceId id = m_waiting.front();
    Sequence& seq = *get(id);
    const int64_t reserve = m_config.reserved_blocks_per_running * static_cast<int64_t>(m_running.size());
    const AllocationCheck check = m_blocks.can_allocate(seq.tokens, reserve);
    if (check.status == AllocationStatus::Later) break;  // no skipping ahead: the head is never starved
    if (check.status == AllocationStatus::Never) {
      fail(id, check.message, step);
      continue;
    }
    Result<int64_t> cached = m_blocks.allocate(id, seq.tokens);
    if (!cached) {
      fail(id, cached.error_message(), step);
      continue;
    }
    m_waiting.pop_front();
    seq.status = SequenceStatus::Running;
    seq.num_computed_tokens = *cached;
    seq.num_cached_prompt_tokens = *cached;
    m_running.push_back(id);
    const int64_t n = std::min(seq.num_tokens() - *cached, budget);
    m_in_flight.push_back({id, n});
    planned.emplace_back(id, false);
    budget -= n;
  }

  for (size_t i = 0; i < m_in_flight.size(); ++i) {
    const Sequence& seq = *get(m_in_flight[i].sequence);
    ScheduledSequence e = plan_entry(seq, m_in_flight[i].num_tokens);
    e.num_draft_tokens = m_in_flight[i].num_draft_tokens;
    e.is_prefill = !planned[i].second;
    (e.is_prefill ? step.batch.num_prefill_tokens : step.batch.num_decode_tokens) += m_in_flight[i].num_tokens;
    step.batch.num_tokens += m_in_flight[i].num_tokens;
    step.batch.sequences.push_back(std::move(e));
  }
  m_drafts.clear();  // a draft is for one step only
  ++m_num_steps;
  return step;
}

Status Scheduler::on_step_done(std::span<const SequenceOutput> outputs) {
  std::unordered_map<SequenceId, const SequenceOutput*> by_sequence;
  for (const SequenceOutput& out : outputs) {
    if (!by_sequence.emplace(out.sequence, &out).second) {
      return make_error(ErrorCode::InvalidArgument, "two results for sequence " + std::to_string(out.sequence));
    }
  }
  // Check everything before changing anything.
  std::unordered_set<SequenceId> in_flight;
  for (const Planned& p : m_in_flight) {
    in_flight.insert(p.sequence);
    const Sequence* seq = find(p.sequence);
    if (seq == nullptr) continue;  // aborted since schedule()
    const bool needs_logits = seq->num_computed_tokens + p.num_tokens == seq->num_tokens();
    const auto it = by_sequence.find(p.sequence);
    const bool has_token = it != by_sequence.end() && it->second->token >= 0;
    const bool is_finished = it != by_sequence.end() && it->second->is_finished;
    if (needs_logits && !has_token && !is_finished) {
      return make_error(ErrorCode::InvalidArgument,
                        "no token for sequence " + std::to_string(p.sequence) + ", whose logits this step computed");
    }
    if (!needs_logits && has_token) {
      return make_error(ErrorCode::InvalidArgument,
                        "a token for sequence " + std::to_string(p.sequence) + " in the middle of its prompt");
    }
    const int32_t num_accepted = it != by_sequence.end() ? it->second->num_accepted_draft_tokens : 0;
    if (num_accepted < 0 || num_accepted > p.num_draft_tokens) {
      return make_error(ErrorCode::InvalidArgument,
                        std::to_string(num_accepted) + " accepted draft tokens for sequence " +
                            std::to_string(p.sequence) + ", which ran " + std::to_string(p.num_draft_tokens));
    }
  }
  for (const SequenceOutput& out : outputs) {
    if (in_flight.count(out.sequence) == 0 && find(out.sequence) != nullptr) {
      return make_error(ErrorCode::InvalidArgument,
                        "sequence " + std::to_string(out.sequence) + " was not in the last step");
    }
  }
  for (const Planned& p : m_in_flight) {
    Sequence* seq = get(p.sequence);
    if (seq == nullptr) continue;
    const auto it = by_sequence.find(p.sequence);
    if (p.num_draft_tokens > 0) {
      // Speculation: the rejected guesses leave the sequence and their slots go back (a block
      // they alone filled is released; shared prefix blocks are untouched).
      const int64_t num_rejected =
          p.num_draft_tokens - (it != by_sequence.end() ? it->second->num_accepted_draft_tokens : 0);
      seq->tokens.resize(seq->tokens.size() - static_cast<size_t>(num_rejected));
      seq->num_computed_tokens += p.num_tokens - num_rejected;
      IWB_RETURN_IF_ERROR(m_blocks.truncate(p.sequence, seq->num_computed_tokens));
    } else {
      seq->num_computed_tokens += p.num_tokens;
    }
    IWB_RETURN_IF_ERROR(m_blocks.mark_computed(p.sequence, seq->num_computed_tokens));
    if (it == by_sequence.end()) continue;
    if (it->second->token >= 0) seq->tokens.push_back(it->second->token);
    if (it->second->is_finished) {
      remove(p.sequence);
      ++m_num_finished;
    }
  }
  m_in_flight.clear();
  return {};
}

SchedulerStats Scheduler::stats() const {
  SchedulerStats s;
  s.num_waiting = static_cast<int64_t>(m_waiting.size());
  s.num_running = static_cast<int64_t>(m_running.size());
  s.num_preemptions = m_num_preemptions;
  s.num_failed = m_num_failed;
  s.num_finished = m_num_finished;
  s.num_steps = m_num_steps;
  return s;
}

}  // namespace iwb
