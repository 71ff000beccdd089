// PagedEngine::logits_for_positions (every position's logits, for perplexity and KL divergence)
// and the activation observer switch (imatrix collection).
#include "runtime/paged_engine.h"

namespace iwb {

void PagedEngine::set_activation_observer(ActivationObserver* observer) { m_backend->set_activation_observer(observer); }

Status PagedEngine::logits_for_positions(const std::vector<int32_t>& tokens, int64_t first_position,
                                       const LogitsSink& sink) {
  if (has_unfinished_requests()) {
    return make_error(ErrorCode::InvalidArgument, "logits_for_positions needs an idle engine: a request is running");
  }
  const auto n = static_cast<int64_t>(tokens.size());
  if (n == 0) return make_error(ErrorCode::InvalidArgument, "no tokens to compute logits for");
  if (first_position < 0 || first_position >= n) {
    return make_error(ErrorCode::InvalidArgument, "the first position with logits (" + std::to_string(first_position) +
                                                      ") is outside the " + std::to_string(n) + " tokens");
  }
  if (n > context_length()) {
    return make_error(ErrorCode::InvalidArgument, "the sequence is " + std::to_string(n) +
                                                      " tokens but the context holds " + std::to_string(context_length()));
  }
  for (const int32_t t : tokens) {
    if (t < 0 || t >= m_config.vocab_size) {
      return make_error(ErrorCode::InvalidArgument, "token id " + std::to_string(t) + " is outside the vocabulary (" +
                                                        std::to_string(m_config.vocab_size) + " tokens)");
    }
  }
  // A temporary sequence (request 0) through the ordinary steps, like logits_for; every row of
  // its chunks at or after first_position gets logits.
  Result<SequenceId> sequence = m_scheduler->add_sequence(0, tokens);
  if (!sequence) return sequence.status();
  auto fail = [&](Status s) {
    (void)m_scheduler->abort(*sequence);
    return s;
  };
  const auto vocab = static_cast<size_t>(m_config.vocab_size);
  int64_t next_position = first_position;
  bool is_done = false;
  while (!is_done) {
    const ScheduledStep plan = m_scheduler->schedule();
    if (!plan.failed.empty()) return make_error(ErrorCode::InvalidArgument, plan.failed.front().message);
    if (plan.batch.empty()) {
      return fail(make_error(ErrorCode::OutOfMemory, "the sequence could not be scheduled: no KV blocks are free"));
    }
    FlatBatch flat = flatten(plan.batch);
    is_done = !flat.logits_rows.empty();  // the last chunk of the prompt
    flat.logits_rows.clear();
    flat.logits_sequences.clear();
    for (size_t row = 0; row < flat.positions.size(); ++row) {
      if (flat.positions[row] < first_position) continue;
      if (flat.positions[row] != next_position) {
        return fail(make_error(ErrorCode::InvalidArgument,
                               "position " + std::to_string(next_position) + " came from the prefix cache and has no "
                               "logits: load the engine with prefix caching off"));
      }
      flat.logits_rows.push_back(static_cast<int32_t>(row));
      flat.logits_sequences.push_back(flat.token_sequences[row]);
      ++next_position;
    }
    if (Status s = run_forward(plan.batch, flat, nullptr); !s) return fail(s);
    for (size_t i = 0; i < flat.logits_rows.size(); ++i) {
      const int64_t position = flat.positions[static_cast<size_t>(flat.logits_rows[i])];
      if (Status s = sink(position, std::span<const float>(m_logits.data() + i * vocab, vocab)); !s) return fail(s);
    }
    std::vector<SequenceOutput> outputs;
    if (is_done) outputs.push_back({*sequence, -1, /*is_finished=*/true});
    IWB_RETURN_IF_ERROR(m_scheduler->on_step_done(outputs));
  }
  if (next_position != n) {
    return make_error(ErrorCode::InvalidArgument, "positions " + std::to_string(next_position) + ".." +
                                                      std::to_string(n - 1) + " got no logits (prefix cache?)");
  }
  return {};
}

}  // namespace iwb
