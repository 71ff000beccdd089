// PagedEngine's choice of drafter (a draft model, the requantized target or its MTP head, on the
// target's device; or prompt lookup). Drafting and verification are SpeculationControl's.
#include "runtime/paged_engine.h"

#include <algorithm>
#include <chrono>

namespace iwb {

// The target's recurrent layers go back to the state after the tokens verification kept
// (rewind_draft_states); a drafter made of them would have to as well, which ModelDrafter cannot.
Status PagedEngine::refuse_recurrent_drafter(const char* what) const {
  return make_error(ErrorCode::Unsupported,
                    std::string(what) + " would run the recurrent layers of this " + m_config.architecture_name +
                        " model, whose state cannot take back the guesses the target rejects; draft with prompt "
                        "lookup, the model's MTP head (--spec mtp) or a draft model without recurrent layers");
}

Status PagedEngine::set_speculation(const spec::SpeculativeConfig& config) {
  IWB_RETURN_IF_ERROR(spec::validate(config));
  if (m_config.has_recurrent_layers()) {
    if (config.kind == spec::DrafterKind::SelfDraft) return refuse_recurrent_drafter("self-drafting");
    // Qwen 3.5's MTP block is an attention layer (mtp_head_config): its drafter has no state to
    // take back. A head with recurrent layers of its own would.
    if (config.kind == spec::DrafterKind::Mtp && m_config.num_nextn_layers > 0 &&
        mtp_head_config(m_config).has_recurrent_layers()) {
      return refuse_recurrent_drafter("this MTP head");
    }
  }
  std::unique_ptr<spec::Drafter> drafter;
  // The drafter runs where the target runs, with a cache as large as the target's.
  spec::DraftPlacement placement;
  placement.device = m_backend->device_id();
  placement.num_threads = num_threads();
  placement.num_kv_positions = m_kv.num_slots();
  placement.kv_block_size = m_kv.block_size;
  switch (config.kind) {
    case spec::DrafterKind::None: break;
    case spec::DrafterKind::PromptLookup:
      drafter = spec::make_prompt_lookup_drafter(config.lookup_max_ngram, config.lookup_min_ngram);
      break;
    case spec::DrafterKind::DraftModel: {
      Result<std::unique_ptr<spec::Drafter>> d =
          spec::open_draft_model(config.draft_model_path, m_tokenizer, placement);
      if (!d) return d.status();
      drafter = std::move(*d);
      break;
    }
    case spec::DrafterKind::SelfDraft: {
      Result<std::unique_ptr<spec::Drafter>> d =
          spec::make_self_drafter(*m_file, m_config, m_weights, config.self_draft_type, placement);
      if (!d) return d.status();
      drafter = std::move(*d);
      break;
    }
    case spec::DrafterKind::Mtp: {
      Result<std::unique_ptr<spec::Drafter>> d =
          spec::make_mtp_drafter(*m_file, m_config, m_weights, placement, config.draft_model_path);
      if (!d) return d.status();
      drafter = std::move(*d);
      break;
    }
  }
  return set_drafter(std::move(drafter), config);
}

Status PagedEngine::set_drafter(std::unique_ptr<spec::Drafter> drafter, const spec::SpeculativeConfig& config) {
  // An MTP head reads the target's hidden states: the backend keeps them while it drafts.
  const bool reads_hidden = drafter != nullptr && drafter->reads_hidden_states();
  IWB_RETURN_IF_ERROR(m_speculation.set(std::move(drafter), config, m_requests));
  if (Status s = m_backend->set_hidden_export(reads_hidden); !s) {
    (void)m_speculation.set(nullptr, {}, m_requests);
    return s;
  }
  return {};
}

void PagedEngine::hand_over_hidden_states(const ForwardBatch& batch, StepResult* result) {
  spec::Drafter* drafter = m_speculation.drafter();
  if (drafter == nullptr || !drafter->reads_hidden_states()) return;
  const std::span<const float> rows = m_backend->hidden_states();
  const auto d = static_cast<size_t>(m_config.embedding_length);
  std::vector<spec::HiddenStates> states;
  size_t row = 0;
  for (const ScheduledSequence& e : batch.sequences) {
    const size_t first_row = row;
    row += e.tokens.size();
    const Sequence* seq = m_scheduler->find(e.sequence);
    if (seq == nullptr || e.positions.empty()) continue;  // finished in this step
    // The rows the step kept: a prompt chunk's, a decode token's, or the verified token and
    // the guesses accepted after it (the sequence holds them and the token sampled after).
    const int64_t first = e.positions.front();
    const int64_t kept =
        std::min<int64_t>(static_cast<int64_t>(e.tokens.size()), static_cast<int64_t>(seq->tokens.size()) - first - 1);
    if (kept <= 0 || rows.size() < (first_row + static_cast<size_t>(kept)) * d) continue;
    states.push_back({e.sequence, first, seq->tokens, rows.subspan(first_row * d, static_cast<size_t>(kept) * d)});
  }
  if (states.empty()) return;
  const auto start = std::chrono::steady_clock::now();
  const Status status = drafter->observe_hidden_states(states);
  result->stats.speculation.draft_seconds +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (!status) {
    std::string& message = result->stats.speculation_error;
    message = drafter->name();
    message.append(": ").append(status.message());
  }
}

}  // namespace iwb
