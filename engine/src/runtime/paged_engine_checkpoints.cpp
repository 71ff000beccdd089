// PagedEngine's recurrent-state checkpoints: prefix caching for models whose state is not all in
// KV blocks. The block manager offers a cached prefix only where StateCheckpoints has the state
// after it; the first step after such a hit starts from that state, and prompt chunks that pass
// a checkpoint position save the state there, as do decode steps that fill a block (the latest
// of each sequence kept, for a chat's next turn to resume after the reply). Verification steps
// of speculative decoding save the state after each guess, to go back to after the kept ones;
// the one after a block they fill is kept as a decode checkpoint when its guesses are.
#include "runtime/paged_engine.h"

#include <string>

namespace iwb {

Status PagedEngine::prepare_state_checkpoints(const ForwardBatch& batch, FlatBatch* flat) {
  m_pending_checkpoints.clear();
  drop_draft_states();  // a failed step's, never kept by the backend
  if (m_config.has_recurrent_layers()) {
    for (size_t i = 0; i < batch.sequences.size(); ++i) {
      const ScheduledSequence& e = batch.sequences[i];
      if (e.num_draft_tokens <= 0) continue;
      // Tokens num_context .. num_context + K: the state after the first 1 .. K of them (after
      // all K + 1 it is the live state, which every guess accepted leaves as it is).
      DraftStates& saves = m_draft_states[e.sequence];
      saves.first_tokens = e.num_context_tokens + 1;
      for (int64_t j = 0; j < e.num_draft_tokens; ++j) {
        saves.ids.push_back(m_checkpoints.next_id());
        flat->state_saves.push_back({static_cast<int32_t>(i), saves.first_tokens + j, saves.ids.back()});
      }
    }
  }
  if (!m_checkpoints.is_enabled()) return {};
  const BlockManager& blocks = m_scheduler->block_manager();
  for (size_t i = 0; i < batch.sequences.size(); ++i) {
    const ScheduledSequence& e = batch.sequences[i];
    const Sequence* seq = m_scheduler->find(e.sequence);
    if (seq == nullptr) continue;
    const std::span<const int32_t> tokens(seq->tokens);
    // Saves the state after the sequence's first `at` tokens, unless one is kept already.
    const auto save_at = [&](int64_t at, std::optional<SequenceId> decoding) {
      const std::optional<BlockHash> key = blocks.prefix_key(e.sequence, at);
      if (!key || at > static_cast<int64_t>(tokens.size())) return;
      const auto prefix = tokens.first(static_cast<size_t>(at));
      if (m_checkpoints.has(*key, prefix)) return;
      const int64_t id = m_checkpoints.next_id();
      flat->state_saves.push_back({static_cast<int32_t>(i), at, id});
      m_pending_checkpoints.push_back({*key, std::vector<int32_t>(prefix.begin(), prefix.end()), id, decoding});
    };
    if (!e.is_prefill) {
      // A decode step that fills a block: the state after it, the deepest a chat's next turn
      // (this reply in its prompt) can resume from. Only the latest of a sequence is kept.
      const int64_t at = e.sequence_length / batch.block_size * batch.block_size;
      if (at <= e.num_context_tokens) continue;
      if (e.num_draft_tokens == 0) {
        save_at(at, e.sequence);
        continue;
      }
      // With guesses, the block counts only if verification keeps them up to its end
      // (rewind_draft_states): the state after it is a draft save, or one more at the step's end.
      const auto found = m_draft_states.find(e.sequence);
      const std::optional<BlockHash> key = blocks.prefix_key(e.sequence, at);
      if (found == m_draft_states.end() || !key || at > static_cast<int64_t>(tokens.size())) continue;
      const auto prefix = tokens.first(static_cast<size_t>(at));
      if (m_checkpoints.has(*key, prefix)) continue;
      DraftStates& saves = found->second;
      const auto j = static_cast<size_t>(at - saves.first_tokens);
      const bool is_extra = j >= saves.ids.size();
      const int64_t id = is_extra ? m_checkpoints.next_id() : saves.ids[j];
      if (is_extra) flat->state_saves.push_back({static_cast<int32_t>(i), at, id});
      saves.block_end = PendingCheckpoint{*key, std::vector<int32_t>(prefix.begin(), prefix.end()), id, e.sequence};
      continue;
    }
    // The first chunk after a prefix-cache hit: the state after the hit goes in place.
    if (e.num_context_tokens > 0 && e.num_context_tokens == seq->num_cached_prompt_tokens) {
      const std::optional<BlockHash> key = blocks.prefix_key(e.sequence, e.num_context_tokens);
      const std::optional<int64_t> id =
          key ? m_checkpoints.use(*key, tokens.first(static_cast<size_t>(e.num_context_tokens))) : std::nullopt;
      if (!id) {
        return make_error(ErrorCode::NotFound,
                          "sequence " + std::to_string(e.sequence) + " took " + std::to_string(e.num_context_tokens) +
                              " tokens from the prefix cache, but no recurrent state is kept for them");
      }
      IWB_RETURN_IF_ERROR(m_backend->restore_state(e.sequence, *id, e.num_context_tokens));
    }
    for (const int64_t at : m_checkpoints.positions_of(seq->num_tokens(), batch.block_size)) {
      if (at > e.num_context_tokens && at <= e.sequence_length) save_at(at, std::nullopt);  // in this chunk
    }
  }
  return {};
}

Status PagedEngine::rewind_draft_states(SequenceId sequence, int32_t num_accepted) {
  const auto it = m_draft_states.find(sequence);
  if (it == m_draft_states.end()) return {};
  DraftStates saves = std::move(it->second);
  m_draft_states.erase(it);
  Status status;
  if (num_accepted >= 0 && static_cast<size_t>(num_accepted) < saves.ids.size()) {
    status = m_backend->restore_state(sequence, saves.ids[static_cast<size_t>(num_accepted)],
                                      saves.first_tokens + num_accepted);
  }
  std::vector<int64_t> dropped = saves.saved();
  if (status && saves.block_end &&
      static_cast<int64_t>(saves.block_end->prefix.size()) <= saves.first_tokens + num_accepted) {
    // (restore_state copied the state: the one kept may be the one the sequence went back to.)
    std::erase(dropped, saves.block_end->id);
    keep_checkpoint(*saves.block_end);
  }
  m_backend->drop_state_checkpoints(dropped);
  return status;
}

void PagedEngine::drop_draft_states() {
  for (const auto& [sequence, saves] : m_draft_states) m_backend->drop_state_checkpoints(saves.saved());
  m_draft_states.clear();
}

void PagedEngine::keep_checkpoint(const PendingCheckpoint& p) {
  std::vector<int64_t> dropped = m_checkpoints.add(p.key, p.prefix, p.id);
  if (p.decoding) {
    // The sequence's previous decode checkpoint goes: a reply keeps one state, not one a block.
    const auto [it, is_first] = m_decode_checkpoints.try_emplace(*p.decoding, DecodeCheckpoint{p.key, p.id});
    if (!is_first) {
      if (m_checkpoints.remove(it->second.key, it->second.id)) dropped.push_back(it->second.id);
      it->second = {p.key, p.id};
    }
  }
  m_backend->drop_state_checkpoints(dropped);
}

void PagedEngine::keep_state_checkpoints() {
  for (const PendingCheckpoint& p : m_pending_checkpoints) keep_checkpoint(p);
  m_pending_checkpoints.clear();
  // Ended sequences' entries are forgotten; their last checkpoints stay in the index.
  std::erase_if(m_decode_checkpoints, [&](const auto& entry) { return m_scheduler->find(entry.first) == nullptr; });
}

}  // namespace iwb
