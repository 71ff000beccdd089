// PagedEngine::step(): new requests and aborts reach the scheduler, the scheduler plans the
// batch, one forward pass runs every token of it, and each sequence that needs one samples a
// token under its own sampling settings and stop rules.
#include "runtime/paged_engine.h"

#include "iwb/engine/profile/cost_model.h"

#include <algorithm>
#include <cstdlib>
#include <new>
#include <string>

namespace iwb {
namespace {

// IWB_FAULT_OOM_STEP=N: the forward pass of step N fails the way an allocation does (throws
// std::bad_alloc), so tests show a failed allocation ending that step's requests while the
// engine goes on. Read once; unset in normal use.
int64_t fault_oom_step() {
  static const int64_t step = [] {
    const char* value = std::getenv("IWB_FAULT_OOM_STEP");
    return value != nullptr && *value != '\0' ? std::atoll(value) : int64_t{-1};
  }();
  return step;
}

}  // namespace

Result<StepResult> PagedEngine::step() {
  const Clock::time_point step_start = Clock::now();
  const ReleaseRemovedOnExit release{*this};  // a step without a pass can still end sequences (aborts)
  StepResult result;
  take_new_and_aborted(&result);
  result.profile.step_index = m_num_steps;
  if (m_speculation.is_on())
    m_speculation.propose(*m_scheduler, m_requests, &result);  // guesses for the sequences about to decode

  const ScheduledStep plan = m_scheduler->schedule();
  // A preempted sequence is recomputed from its start: its recurrent state (if any) goes now.
  m_backend->release_sequences(plan.preempted);
  result.stats.num_preemptions = static_cast<int32_t>(plan.preempted.size());
  for (const SequenceId id : plan.preempted) {
    const Sequence* seq = m_scheduler->find(id);
    if (seq == nullptr) continue;
    if (const auto it = m_requests.find(seq->request); it != m_requests.end()) it->second->count_preemption();
  }
  for (const FailedSequence& f : plan.failed) finish(f.request, FinishReason::Error, f.message, &result);

  const ForwardBatch& batch = plan.batch;
  if (!batch.empty()) {
    ++m_num_steps;  // steps that run a forward pass
    for (const ScheduledSequence& e : batch.sequences) {
      RequestState& r = *m_requests.at(e.request);
      if (!r.is_started()) r.start(step_start, m_scheduler->find(e.sequence)->num_cached_prompt_tokens);
    }
    FlatBatch flat = flatten(batch);
    const bool is_profiled = m_is_profiling.load(std::memory_order_relaxed);
    const Clock::time_point forward_start = Clock::now();
    const bool is_greedy_on_device = greedy_on_device(batch, flat);
    if (is_greedy_on_device) m_greedy_tokens.resize(flat.logits_rows.size());
    Status forward_status;
    try {
      if (static_cast<int64_t>(m_num_steps) == fault_oom_step()) throw std::bad_alloc();
      forward_status = prepare_state_checkpoints(batch, &flat);
      if (forward_status) {
        forward_status = run_forward(batch, flat, is_profiled ? &result.profile : nullptr,
                                     is_greedy_on_device ? m_greedy_tokens.data() : nullptr);
      }
    } catch (const std::bad_alloc&) {
      // Out of memory mid-generation: this step's requests end with the reason; the engine,
      // its KV cache and every other request go on.
      forward_status = make_error(ErrorCode::OutOfMemory, "out of memory during a forward pass of " +
                                                              std::to_string(flat.tokens.size()) + " tokens");
    }
    const double forward_seconds = std::chrono::duration<double>(Clock::now() - forward_start).count();
    const bool has_drafts = std::any_of(batch.sequences.begin(), batch.sequences.end(),
                                        [](const ScheduledSequence& e) { return e.num_draft_tokens > 0; });
    if (has_drafts) {
      result.stats.speculation.verify_seconds = forward_seconds;
    } else if (batch.num_prefill_tokens == 0) {
      // Plain decode steps: the baseline adaptive K weighs the verification cost against.
      m_speculation.note_plain_step(forward_seconds);
    }
    if (forward_status) {
      m_expert_load.add_step(m_backend->expert_counts(), batch.num_tokens, m_num_steps);
      keep_state_checkpoints();
    }
    if (Status s = forward_status; !s) {
      // The batch's new slots may be half written: its sequences end, and their blocks (never
      // marked computed, so never offered to later prompts) go back to the pool.
      for (const ScheduledSequence& e : batch.sequences) {
        (void)m_scheduler->abort(e.sequence);
        finish(e.request, FinishReason::Error, s.message(), &result);
      }
    } else {
      IWB_RETURN_IF_ERROR(sample_tokens(batch, flat, &result, is_greedy_on_device ? m_greedy_tokens.data() : nullptr));
      hand_over_hidden_states(batch, &result);
    }
    drop_draft_states();  // a failed step's (its sequences ended), or one never verified
    m_speculation.end_step();
    result.stats.num_prompt_tokens = static_cast<int32_t>(batch.num_prefill_tokens);
    result.stats.num_sequences = static_cast<int32_t>(batch.sequences.size());
  }
  const SchedulerStats scheduler = m_scheduler->stats();
  result.stats.num_waiting = scheduler.num_waiting;
  result.stats.num_running = scheduler.num_running;
  result.stats.kv = m_scheduler->block_manager().stats();
  result.stats.seconds = std::chrono::duration<double>(Clock::now() - step_start).count();
  result.profile.step_seconds = result.stats.seconds;
  return result;
}

void PagedEngine::take_new_and_aborted(StepResult* result) {
  RequestInbox::Taken taken = m_inbox.take();
  result->finished = std::move(taken.aborted_early);
  for (RequestInbox::Queued& q : taken.queued) {
    // A reply that shows control tokens (a harmony chat; Mistral's [TOOL_CALLS]) is held with
    // their text as bytes, so that a grammar's markers may be those tokens.
    std::shared_ptr<const TokenBytes>& table =
        q.params.render_special_tokens ? m_token_bytes_with_controls : m_token_bytes;
    if (q.params.json_grammar && !table) {
      table = std::make_shared<const TokenBytes>(m_tokenizer, q.params.render_special_tokens);
    }
    // Chosen before q.params is moved from (argument order is unspecified).
    std::shared_ptr<const TokenBytes> token_bytes = q.params.json_grammar ? table : nullptr;
    auto state =
        std::make_unique<RequestState>(q.id, std::move(q.params), q.submitted, m_tokenizer, std::move(token_bytes));
    Result<SequenceId> sequence = m_scheduler->add_sequence(q.id, state->params().prompt_tokens);
    m_requests.emplace(q.id, std::move(state));
    if (!sequence) {
      finish(q.id, FinishReason::Error, sequence.error_message(), result);
      continue;
    }
    m_requests.at(q.id)->set_sequence(*sequence);
  }
  for (const RequestId id : taken.aborts) {
    const auto it = m_requests.find(id);
    if (it == m_requests.end()) continue;  // finished meanwhile
    (void)m_scheduler->abort(it->second->sequence());
    finish(id, FinishReason::Aborted, {}, result);
  }
}

bool PagedEngine::greedy_on_device(const ForwardBatch& batch, const FlatBatch& flat) const {
  if (!m_backend->has_device_argmax() || flat.logits_rows.empty()) return false;
  for (const int32_t s : flat.logits_sequences) {
    const ScheduledSequence& e = batch.sequences[static_cast<size_t>(s)];
    if (e.num_draft_tokens > 0) return false;  // verification compares with the drafts' distributions
    const auto it = m_requests.find(e.request);
    if (it == m_requests.end()) return false;
    const SamplingParams& p = it->second->params().sampling;
    // Penalties change the logits before the argmax; the device takes the raw ones.
    if (!p.is_greedy() || p.repeat_penalty != 1.0f || p.frequency_penalty != 0.0f || p.presence_penalty != 0.0f) {
      return false;
    }
    if (it->second->params().num_top_logprobs >= 0) return false;  // log-probabilities need the logits
    // A bias changes the logits, a grammar rules tokens out: both before the argmax.
    if (!p.logit_bias.empty() || it->second->params().json_grammar) return false;
  }
  return true;
}

Status PagedEngine::run_forward(const ForwardBatch& batch, const FlatBatch& flat, ProfileBatch* profile,
                                int32_t* greedy_tokens) {
  // Sequences that ended since the last pass give up their recurrent state (if the model has any).
  m_backend->release_sequences(m_scheduler->take_removed());
  // Copy-on-write first: a shared block a sequence continues in is copied before anything writes.
  IWB_RETURN_IF_ERROR(m_backend->copy_blocks(batch.block_copies));
  const size_t num_logits = flat.logits_rows.size() * static_cast<size_t>(m_config.vocab_size);
  if (greedy_tokens == nullptr && m_logits.size() < num_logits) m_logits.resize(num_logits);
  auto run = [&] {
    return greedy_tokens != nullptr ? m_backend->forward_argmax(flat, greedy_tokens)
                                    : m_backend->forward(flat, m_logits.data());
  };
  if (profile == nullptr) return run();

  // The records are reserved before any kernel runs and handed over afterwards, even when the
  // pass failed part-way (they show how far it got). One record per kernel call of the batch.
  const Phase phase = batch.num_prefill_tokens > 0 ? Phase::Prefill : Phase::Decode;
  // An MTP drafter's target runs the last FFN and the output norm over every row, in the body:
  // at most the records of a step with logits.
  const bool has_logits_records = !flat.logits_rows.empty() || m_speculation.reads_hidden();
  m_backend->begin_profile(phase,
                           static_cast<size_t>(num_step_records(m_config, batch.num_tokens, 0, has_logits_records)));
  const Status status = run();
  ProfiledKernels records = m_backend->take_profile();
  profile->phase = phase;
  profile->num_tokens = static_cast<int32_t>(batch.num_tokens);
  profile->num_kv = 0;
  for (const ScheduledSequence& e : batch.sequences) profile->num_kv += e.sequence_length;
  profile->kernels = std::move(records.kernels);
  profile->num_dropped = records.num_dropped;
  return status;
}

Status PagedEngine::sample_tokens(const ForwardBatch& batch, const FlatBatch& flat, StepResult* result,
                                  const int32_t* greedy_tokens) {
  const auto vocab = static_cast<size_t>(m_config.vocab_size);
  std::vector<SequenceOutput> outputs;
  std::vector<std::pair<RequestId, FinishReason>> finishing;
  int32_t num_tokens = 0;
  for (size_t i = 0; i < flat.logits_rows.size(); ++i) {
    const ScheduledSequence& e = batch.sequences[static_cast<size_t>(flat.logits_sequences[i])];
    if (e.num_draft_tokens > 0) {  // speculation: K + 1 rows, verified together
      const size_t num_before = result->tokens.size();
      SequenceOutput output;
      std::optional<FinishReason> finish;
      const std::span<const float> rows(m_logits.data() + i * vocab,
                                        (static_cast<size_t>(e.num_draft_tokens) + 1) * vocab);
      m_speculation.verify(e, rows, *m_requests.at(e.request), m_tokenizer, result->stats.speculation.verify_seconds,
                           result, &output, &finish);
      IWB_RETURN_IF_ERROR(rewind_draft_states(e.sequence, output.num_accepted_draft_tokens));
      num_tokens += static_cast<int32_t>(result->tokens.size() - num_before);
      outputs.push_back(output);
      if (finish) finishing.emplace_back(e.request, *finish);
      i += static_cast<size_t>(e.num_draft_tokens);
      continue;
    }
    ++num_tokens;
    RequestState& r = *m_requests.at(e.request);
    // A greedy row without penalties: the device's argmax is what r.sample would choose.
    const int32_t token = greedy_tokens != nullptr
                              ? greedy_tokens[i]
                              : r.sample(std::span<const float>(m_logits.data() + i * vocab, vocab));
    if (token < 0) {
      // A structured reply with no token that may come next (a vocabulary that cannot write
      // what the grammar asks for): the request ends with the reason, the others go on.
      outputs.push_back({e.sequence, -1, true});
      finishing.emplace_back(e.request, FinishReason::Error);
      continue;
    }
    // The new token would run at position sequence_length: none left means a full context.
    RequestState::Accepted accepted = r.accept(token, e.sequence_length >= m_max_sequence_length, m_tokenizer);
    if (greedy_tokens == nullptr)
      r.add_logprobs(std::span<const float>(m_logits.data() + i * vocab, vocab), &accepted.event);
    result->tokens.push_back(std::move(accepted.event));
    outputs.push_back({e.sequence, token, accepted.finish.has_value()});
    if (accepted.finish) finishing.emplace_back(e.request, *accepted.finish);
  }
  result->stats.num_decode_tokens = num_tokens;
  // Finished sequences leave the scheduler here, their blocks freed (full prompt blocks stay
  // cached for later prompts).
  const Status status = m_scheduler->on_step_done(outputs);
  // An error here is only ever a structured reply that no token could continue.
  for (const auto& [id, reason] : finishing) {
    finish(id, reason, reason == FinishReason::Error ? m_requests.at(id)->no_token_fits_message() : std::string(),
           result);
  }
  return status;
}

void PagedEngine::finish(RequestId id, FinishReason reason, std::string error, StepResult* result) {
  const auto it = m_requests.find(id);
  if (it == m_requests.end()) return;
  m_speculation.release(it->second->sequence());
  result->finished.push_back(it->second->finished(reason, std::move(error)));
  m_requests.erase(it);
  m_inbox.mark_finished(id);
}

}  // namespace iwb
