// The engine's speculative decoding, apart from batching: the drafter and its settings, the
// drafts of the step about to run, and the target's verdict on each afterwards (greedy: the
// target's own choices; sampling: acceptance.h's rejection rule), with adaptive K from the
// measured acceptance and step costs. PagedEngine calls it before scheduling and after the pass.
#pragma once

#include "iwb/engine/paged/scheduler.h"
#include "iwb/engine/runtime/engine.h"
#include "iwb/engine/spec/drafter.h"
#include "runtime/request_state.h"

#include <memory>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

namespace iwb {

using RequestStates = std::unordered_map<RequestId, std::unique_ptr<RequestState>>;

class SpeculationControl {
 public:
  // The limits a draft must respect: the vocabulary (guesses outside it are cut), the longest
  // sequence (no guess runs past it), and, where > 0, the guesses of one step in all (a model
  // with recurrent layers saves its state after each guess: PagedEngine::prepare_state_checkpoints).
  SpeculationControl(int64_t vocab_size, int64_t max_sequence_length, int64_t max_step_guesses = 0)
      : m_vocab_size(vocab_size), m_max_sequence_length(max_sequence_length), m_max_step_guesses(max_step_guesses) {}

  // Takes the drafter (null: off) and its settings; every request's adaptive K starts over.
  Status set(std::unique_ptr<spec::Drafter> drafter, const spec::SpeculativeConfig& config, RequestStates& requests);
  const spec::SpeculativeConfig& config() const { return m_config; }
  bool is_on() const { return m_drafter != nullptr; }
  spec::Drafter* drafter() const { return m_drafter.get(); }
  bool reads_hidden() const { return m_drafter != nullptr && m_drafter->reads_hidden_states(); }
  uint64_t drafter_bytes() const { return m_drafter ? m_drafter->num_bytes() : 0; }
  // A sequence ended: the drafter forgets its cache.
  void release(SequenceId sequence) {
    if (m_drafter) m_drafter->release(sequence);
  }

  // Before the scheduler plans the step: guesses for the running sequences about to decode,
  // handed to the scheduler; draft time and errors go to result->stats.
  void propose(Scheduler& scheduler, RequestStates& requests, StepResult* result);
  // After the pass: the target's verdict on one sequence's K guesses, whose K + 1 logits rows
  // are `logits` [(K + 1) x vocab]. Emits the tokens into `result`, its output for the
  // scheduler into `output`, and the reason when the request ends into `finish`.
  void verify(const ScheduledSequence& entry, std::span<const float> logits, RequestState& request,
              const tokenizer::Tokenizer& tokenizer, double verify_seconds, StepResult* result, SequenceOutput* output,
              std::optional<FinishReason>* finish);
  // A decode step without drafts took `seconds`: the baseline adaptive K weighs against.
  void note_plain_step(double seconds) {
    m_plain_step_seconds = m_plain_step_seconds > 0 ? 0.8 * m_plain_step_seconds + 0.2 * seconds : seconds;
  }
  // The step is over: its drafts' distributions are no longer needed.
  void end_step() { m_drafts.clear(); }

 private:
  int32_t draft_length(RequestState& request, const Sequence& sequence) const;
  // Trims the requests' K, the longest first, until they ask for at most m_max_step_guesses
  // guesses in all; requests left with none are dropped.
  void fit_step_guesses(std::vector<spec::DraftRequest>* requests) const;

  int64_t m_vocab_size;
  int64_t m_max_sequence_length;
  int64_t m_max_step_guesses;
  spec::SpeculativeConfig m_config;
  std::unique_ptr<spec::Drafter> m_drafter;
  std::unordered_map<SequenceId, spec::Draft> m_drafts;  // this step's drafts (their distributions)
  double m_plain_step_seconds = 0;                       // running mean of decode steps without drafts (adaptive K)
};

}  // namespace iwb
