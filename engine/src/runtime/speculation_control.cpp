// SpeculationControl: drafting before the step, verification after it, adaptive K (see
// speculation_control.h).
#include "runtime/speculation_control.h"

#include "iwb/engine/spec/acceptance.h"

#include <algorithm>
#include <chrono>

namespace iwb {

Status SpeculationControl::set(std::unique_ptr<spec::Drafter> drafter, const spec::SpeculativeConfig& config,
                               RequestStates& requests) {
  if (drafter != nullptr && (config.num_draft_tokens < 1 || config.num_draft_tokens > spec::kMaxDraftTokens)) {
    return make_error(ErrorCode::InvalidArgument, "the number of draft tokens must be 1 to " +
                                                      std::to_string(spec::kMaxDraftTokens) + ", not " +
                                                      std::to_string(config.num_draft_tokens));
  }
  m_drafter = std::move(drafter);
  m_config = m_drafter ? config : spec::SpeculativeConfig{};
  m_drafts.clear();
  for (auto& [id, request] : requests) request->set_adaptive_draft_tokens(0);
  return {};
}

int32_t SpeculationControl::draft_length(RequestState& r, const Sequence& seq) const {
  const GenerationRequest& p = r.params();
  int32_t k = p.num_draft_tokens < 0 ? m_config.num_draft_tokens : std::min(p.num_draft_tokens, spec::kMaxDraftTokens);
  // A structured reply speculates when greedy: verification takes the target's own choice,
  // which sample() holds to the grammar, so a guess the grammar rules out is simply rejected.
  // Sampled verification compares distributions the grammar would have to reshape: not done.
  if (k <= 0 || (p.json_grammar && !p.sampling.is_greedy())) return 0;
  if (m_config.is_adaptive) {
    if (r.adaptive_draft_tokens() == 0) r.set_adaptive_draft_tokens(k);
    k = std::clamp(r.adaptive_draft_tokens(), 1, k);
  }
  // No guesses past the token limit (the step emits at most K + 1) or the context (the guesses
  // run at positions n .. n + K - 1 for a sequence of n tokens).
  if (p.max_new_tokens > 0) k = std::min(k, p.max_new_tokens - r.num_generated() - 1);
  k = static_cast<int32_t>(std::min<int64_t>(k, m_max_sequence_length - seq.num_tokens()));
  return std::max(k, 0);
}

void SpeculationControl::fit_step_guesses(std::vector<spec::DraftRequest>* requests) const {
  if (m_max_step_guesses <= 0) return;
  int64_t total = 0;
  for (const spec::DraftRequest& r : *requests) total += r.num_draft_tokens;
  while (total > m_max_step_guesses) {
    // The last of the longest gives up one guess: the earlier sequences keep the larger share
    // of an uneven split.
    int32_t longest = 0;
    for (const spec::DraftRequest& r : *requests) longest = std::max(longest, r.num_draft_tokens);
    const auto last = std::find_if(requests->rbegin(), requests->rend(),
                                   [&](const spec::DraftRequest& r) { return r.num_draft_tokens == longest; });
    --last->num_draft_tokens;
    --total;
  }
  std::erase_if(*requests, [](const spec::DraftRequest& r) { return r.num_draft_tokens <= 0; });
}

void SpeculationControl::propose(Scheduler& scheduler, RequestStates& states, StepResult* result) {
  m_drafts.clear();
  std::vector<spec::DraftRequest> requests;
  for (const SequenceId id : scheduler.running()) {
    if (!scheduler.is_waiting_to_decode(id)) continue;
    const Sequence* seq = scheduler.find(id);
    const auto it = states.find(seq->request);
    if (it == states.end()) continue;
    const int32_t k = draft_length(*it->second, *seq);
    if (k <= 0) continue;
    requests.push_back({id, seq->tokens, k, it->second->params().sampling, m_config.draft_min_probability});
  }
  fit_step_guesses(&requests);
  if (requests.empty()) return;
  const auto start = std::chrono::steady_clock::now();
  Result<std::vector<spec::Draft>> drafts = m_drafter->draft(requests);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  result->stats.speculation.draft_seconds = seconds;
  if (!drafts) {
    // Appended piecewise: GCC 12 warns (wrongly, -Wrestrict) on the chained operator+.
    std::string& message = result->stats.speculation_error;
    message = m_drafter->name();
    message.append(": ").append(drafts.error_message());
    return;
  }
  for (size_t i = 0; i < requests.size() && i < drafts->size(); ++i) {
    spec::Draft& d = (*drafts)[i];
    // Guesses beyond K or outside the vocabulary are cut (the draft stops at the first bad one).
    size_t keep = std::min(d.tokens.size(), static_cast<size_t>(requests[i].num_draft_tokens));
    for (size_t j = 0; j < keep; ++j) {
      if (d.tokens[j] < 0 || d.tokens[j] >= m_vocab_size) keep = j;
    }
    d.tokens.resize(keep);
    if (d.probabilities.size() > keep) d.probabilities.resize(keep);
    const SequenceId id = requests[i].key;
    RequestState& r = *states.at(scheduler.find(id)->request);
    r.speculation().draft_seconds += seconds;
    if (keep == 0 || !scheduler.set_draft(id, d.tokens)) continue;
    m_drafts[id] = std::move(d);
  }
}

void SpeculationControl::verify(const ScheduledSequence& e, std::span<const float> rows, RequestState& r,
                                const tokenizer::Tokenizer& tokenizer, double verify_seconds, StepResult* result,
                                SequenceOutput* output, std::optional<FinishReason>* finish) {
  const auto vocab = static_cast<size_t>(m_vocab_size);
  const auto k = static_cast<size_t>(e.num_draft_tokens);
  const std::span<const int32_t> guesses(e.tokens.data() + e.tokens.size() - k, k);
  const auto found = m_drafts.find(e.sequence);
  const spec::Draft* draft = found != m_drafts.end() ? &found->second : nullptr;
  const bool is_greedy = r.params().sampling.is_greedy();

  int32_t num_accepted = 0, num_emitted = 0, token = -1;
  for (size_t j = 0; j <= k; ++j) {
    const std::span<const float> logits = rows.subspan(j * vocab, vocab);
    bool is_accepted = false;
    if (j == k) {
      token = r.sample(logits);  // every guess accepted: the target's own next token comes free
    } else if (is_greedy) {
      token = r.sample(logits);  // the target's choice, penalties included, as plain decoding makes it
      is_accepted = token == guesses[j];
    } else {
      const std::vector<TokenProb> target = r.candidates(logits);
      const spec::SparseDistribution drafted = draft != nullptr && j < draft->probabilities.size()
                                                   ? spec::SparseDistribution(draft->probabilities[j])
                                                   : spec::SparseDistribution();
      is_accepted = spec::accept_draft_token(target, drafted, guesses[j], r.uniform());
      token = is_accepted ? guesses[j] : spec::sample_residual(target, drafted, guesses[j], r.uniform());
    }
    if (token < 0) {  // a structured reply that no token of the vocabulary can continue
      *finish = FinishReason::Error;
      break;
    }
    // The token runs at position num_context_tokens + 1 + j.
    const bool is_context_full = e.num_context_tokens + 1 + static_cast<int64_t>(j) >= m_max_sequence_length;
    RequestState::Accepted accepted = r.accept(token, is_context_full, tokenizer);
    accepted.event.is_draft = is_accepted;
    r.add_logprobs(logits, &accepted.event);
    result->tokens.push_back(std::move(accepted.event));
    ++num_emitted;
    num_accepted += is_accepted ? 1 : 0;
    if (accepted.finish) {
      *finish = accepted.finish;
      break;
    }
    if (!is_accepted) break;
  }
  spec::SpeculationStats step;
  step.record(static_cast<int32_t>(k), num_accepted, num_emitted);
  step.verify_seconds = verify_seconds;
  result->stats.speculation.record(static_cast<int32_t>(k), num_accepted, num_emitted);
  r.speculation().add(step);
  if (m_config.is_adaptive) {
    // K follows the request's measured acceptance and costs (at least 1, to keep measuring).
    const spec::SpeculationStats& s = r.speculation();
    const spec::SpeculationCosts costs = spec::measured_costs(s, m_plain_step_seconds);
    const int32_t max_k = r.params().num_draft_tokens > 0 ? r.params().num_draft_tokens : m_config.num_draft_tokens;
    const spec::DraftLengthSuggestion best = spec::suggest_draft_length(s.acceptance_rate(), costs, max_k);
    r.set_adaptive_draft_tokens(std::max(1, best.num_draft_tokens));
  }
  *output = SequenceOutput{e.sequence, token, finish->has_value(), num_accepted};
}

}  // namespace iwb
