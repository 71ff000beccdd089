// PagedEngine::logits_for_positions (every position's logits, for perplexity and KL divergence),
// its MTP head's logits (for comparing the head with llama.cpp's) and the activation observer
// switch (imatrix collection).
#include "backend/cpu/cpu_forward_backend.h"
#include "model/model_weights.h"
#include "runtime/paged_engine.h"

namespace iwb {

void PagedEngine::set_activation_observer(ActivationObserver* observer) {
  m_backend->set_activation_observer(observer);
}

Status PagedEngine::logits_for_positions(const std::vector<int32_t>& tokens, int64_t first_position,
                                         const LogitsSink& sink) {
  return run_positions(tokens, first_position, sink, {});
}

Status PagedEngine::run_positions(const std::vector<int32_t>& tokens, int64_t first_position, const LogitsSink& sink,
                                  const HiddenSink& hidden) {
  const ReleaseRemovedOnExit release{*this};  // the temporary sequence's state, on every path
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
    return make_error(
        ErrorCode::InvalidArgument,
        "the sequence is " + std::to_string(n) + " tokens but the context holds " + std::to_string(context_length()));
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
        return fail(make_error(ErrorCode::InvalidArgument, "position " + std::to_string(next_position) +
                                                               " came from the prefix cache and has no "
                                                               "logits: load the engine with prefix caching off"));
      }
      flat.logits_rows.push_back(static_cast<int32_t>(row));
      flat.logits_sequences.push_back(flat.token_sequences[row]);
      ++next_position;
    }
    if (Status s = prepare_state_checkpoints(plan.batch, &flat); !s) return fail(s);
    if (Status s = run_forward(plan.batch, flat, nullptr); !s) return fail(s);
    keep_state_checkpoints();
    if (hidden) hidden(flat.positions.front(), m_backend->hidden_states());
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

Status PagedEngine::mtp_logits_for_positions(const std::vector<int32_t>& tokens, const LogitsSink& sink) {
  if (m_config.num_nextn_layers <= 0) {
    return make_error(ErrorCode::Unsupported, "this model has no multi-token-prediction layers (nextn_predict_layers)");
  }
  if (m_backend->device_id() != "cpu") {
    return make_error(ErrorCode::Unsupported, "the MTP head runs on the CPU backend only");
  }
  const ModelConfig head_config = mtp_head_config(m_config);
  Result<ModelWeights> head_weights = bind_mtp_weights(*m_file, m_config, m_weights);
  if (!head_weights) return head_weights.status();
  const auto n = static_cast<int64_t>(tokens.size());
  const auto d = static_cast<size_t>(m_config.embedding_length);

  // The target's hidden states of every position (the backend keeps them for the pass only,
  // unless a drafter reads them anyway).
  std::vector<float> hidden(static_cast<size_t>(n) * d);
  const bool was_exporting = m_speculation.drafter() != nullptr && m_speculation.drafter()->reads_hidden_states();
  IWB_RETURN_IF_ERROR(m_backend->set_hidden_export(true));
  const Status target = run_positions(
      tokens, 0, [](int64_t, std::span<const float>) -> Status { return {}; },
      [&](int64_t first, std::span<const float> rows) {
        std::copy(rows.begin(), rows.end(), hidden.begin() + static_cast<ptrdiff_t>(static_cast<size_t>(first) * d));
      });
  (void)m_backend->set_hidden_export(was_exporting);
  IWB_RETURN_IF_ERROR(target);

  // The head over the same positions with a cache of its own (blocks in order: slot = position).
  KvPoolGeometry kv;
  kv.shape = kv_cache_shape(head_config);
  kv.block_size = m_kv.block_size;
  kv.num_blocks = (n + kv.block_size - 1) / kv.block_size;
  kv.type = m_kv.type;
  PlanOptions options;
  options.is_mtp_head = true;
  const int64_t max_batch = std::min<int64_t>(n, 512);
  Result<std::unique_ptr<CpuForwardBackend>> head =
      CpuForwardBackend::create(head_config, *head_weights, kv, num_threads(), max_batch, options);
  if (!head) return head.status();
  const auto vocab = static_cast<size_t>(m_config.vocab_size);
  std::vector<float> logits(static_cast<size_t>(max_batch) * vocab);
  std::vector<float> hidden_in;
  for (int64_t first = 0; first < n; first += max_batch) {
    const int64_t count = std::min(max_batch, n - first);
    FlatBatch flat;
    flat.max_blocks_per_sequence = kv.num_blocks;
    for (int32_t b = 0; b < kv.num_blocks; ++b) flat.block_tables.push_back(b);
    flat.sequence_lengths.push_back(static_cast<int32_t>(first + count));
    hidden_in.assign(static_cast<size_t>(count) * d, 0.0f);
    for (int64_t p = first; p < first + count; ++p) {
      flat.tokens.push_back(tokens[static_cast<size_t>(p)]);
      flat.positions.push_back(static_cast<int32_t>(p));
      flat.slot_mapping.push_back(p);
      flat.token_sequences.push_back(0);
      flat.logits_rows.push_back(static_cast<int32_t>(p - first));
      flat.logits_sequences.push_back(0);
      if (p > 0) {
        std::copy_n(hidden.begin() + static_cast<ptrdiff_t>(static_cast<size_t>(p - 1) * d), d,
                    hidden_in.begin() + static_cast<ptrdiff_t>(static_cast<size_t>(p - first) * d));
      }
    }
    IWB_RETURN_IF_ERROR((*head)->forward_mtp(flat, hidden_in.data(), logits.data()));
    for (int64_t i = 0; i < count; ++i) {
      IWB_RETURN_IF_ERROR(
          sink(first + i, std::span<const float>(logits.data() + static_cast<size_t>(i) * vocab, vocab)));
    }
  }
  return {};
}

}  // namespace iwb
