// A drafter that runs a (small) model of its own: the draft model, the target requantized to
// fewer bits, or the target's multi-token-prediction head. It keeps a paged KV cache per
// speculating sequence and, each step, first catches up on the tokens the target accepted
// since (rolling back its own rejected guesses by truncating the block table), then guesses K
// tokens one forward pass at a time, all sequences of the step batched together. It runs on a
// ForwardBackend of the target's device.
//
// An MTP head's pass at position p reads token p and the target's hidden state at p - 1
// (llama.cpp's draft-mtp): it catches up as the target's hidden states arrive
// (observe_hidden_states, right after each target step), keeping only the last row for the next
// position; its guesses after the first read its own hidden state in place of the target's.
// Its cache is a prefix cache too: a finished sequence's full blocks stay findable, so a later
// request with the same prefix (a chat's next turn) starts from them, as the target starts from
// its own. The head also keeps the target's state at each full block's last position, which a
// later sequence's first computed position reads when its target took that prefix from its
// cache. Where it has neither, the head reads zeros, as llama.cpp's first position does, and
// that sequence's blocks are not offered to others.
#pragma once

#include "backend/forward_backend.h"
#include "iwb/engine/gguf/gguf_file.h"
#include "iwb/engine/model/model_config.h"
#include "iwb/engine/paged/block_manager.h"
#include "iwb/engine/spec/drafter.h"
#include "model/model_weights.h"

#include <deque>
#include <functional>
#include <memory>
#include <random>
#include <unordered_map>
#include <vector>

namespace iwb::spec {

// A model to draft with: its config and weights, and whatever their bytes live in.
struct DraftModel {
  std::unique_ptr<gguf::GgufFile> file;  // the draft model's file (null for a self-draft)
  ModelConfig config;
  ModelWeights weights;
  std::vector<std::vector<uint8_t>> buffers;  // requantized matrices (self-draft)
  uint64_t owned_bytes = 0;                   // bytes of the above
  bool is_mtp_head = false;                   // config/weights: mtp_head_config, bind_mtp_weights
};

class ModelDrafter final : public Drafter {
 public:
  // The draft model's forward pass on placement.device (the CPU, or a CUDA device with the
  // weights uploaded there) with its own paged KV cache.
  static Result<std::unique_ptr<ModelDrafter>> create(std::unique_ptr<DraftModel> model, std::string name,
                                                      const DraftPlacement& placement);

  std::string name() const override { return m_name; }
  Result<std::vector<Draft>> draft(std::span<const DraftRequest> requests) override;
  void release(uint64_t key) override;
  uint64_t num_bytes() const override;
  bool reads_hidden_states() const override { return m_model->is_mtp_head; }
  Status observe_hidden_states(std::span<const HiddenStates> states) override;

 private:
  struct SequenceState {
    SequenceId id = 0;
    std::vector<int32_t> computed;  // tokens whose K/V the draft cache holds, in order
    uint64_t last_used = 0;
    std::mt19937_64 rng;
    // MTP head: the target's hidden state at pending_position (-1: none yet).
    std::vector<float> pending_hidden;
    int64_t pending_position = -1;
    // Its cache rows may be offered to later sequences (prefix caching): not after an MTP head
    // read zeros for a state it never saw.
    bool is_cacheable = true;
  };
  // Tokens of one sequence for a forward pass, at positions first .. first + tokens.size() - 1;
  // for an MTP head, each token's hidden input row [tokens x n_embd].
  struct Chunk {
    SequenceId sequence = 0;
    int64_t first = 0;
    std::span<const int32_t> tokens;
    bool wants_logits = false;
    std::span<const float> hidden;
  };
  // A sequence being caught up: its tokens (then the guesses so far) and, for an MTP head, the
  // hidden input row of each of them from `first` on.
  struct Active {
    size_t request = 0;
    SequenceState* state = nullptr;
    std::vector<int32_t> history;
    std::vector<float> hidden;  // MTP: [history.size() - computed.size() x n_embd], then the chain row
  };

  ModelDrafter(std::unique_ptr<DraftModel> model, std::string name)
      : m_model(std::move(model)), m_name(std::move(name)) {}

  // Rolls the state back to its common prefix with `tokens` (at most keep_at_most of them) and
  // reserves slots up to all of them; frees least recently used other sequences when the cache
  // is full. False: no room.
  bool reserve(SequenceState& state, std::span<const int32_t> tokens, uint64_t protect_from, int64_t keep_at_most);
  // Every token of every active sequence its cache lacks, in passes under the token budget;
  // each sequence's last token gives a row of m_logits when wants_logits (`on_logits(active,
  // row)` then runs, in pass order).
  Status catch_up(std::vector<Active>& active, bool wants_logits,
                  const std::function<void(Active&, size_t)>& on_logits);
  // MTP head: the hidden input rows of `state`'s tokens from `from` to `to` (exclusive): the
  // target's pending row where it is the one before, zeros where none is known; `rows` holds the
  // target's rows of positions first_row.. when not empty.
  std::vector<float> mtp_inputs(SequenceState& state, std::span<const int32_t> tokens, int64_t from, int64_t to,
                                int64_t first_row, std::span<const float> rows) const;
  // MTP head: the target's states at the last position of each full block of `tokens` among
  // the rows of positions first_row.., kept (m_block_states) for a later sequence whose target
  // takes that prefix from its cache; keys by block_keys.
  void keep_block_states(std::span<const int32_t> tokens, int64_t first_row, std::span<const float> rows);
  std::vector<uint64_t> block_keys(std::span<const int32_t> tokens) const;
  // The slot of the sequence's next token (copying a block shared from the cache first). False:
  // no room.
  bool append(SequenceState& state, int32_t token);
  // Its computed tokens' full blocks become findable by later sequences.
  void mark_computed(SequenceState& state);
  // One forward pass; logits rows (in chunk order, for chunks that want them) go to m_logits.
  Status run(const std::vector<Chunk>& chunks);
  int32_t choose(SequenceState& state, std::span<const float> logits, std::span<const int32_t> history,
                 const SamplingParams& sampling, Draft* draft);

  std::unique_ptr<DraftModel> m_model;
  std::string m_name;
  std::unique_ptr<ForwardBackend> m_backend;  // owns the draft KV data and the scratch
  std::unique_ptr<BlockManager> m_blocks;
  std::vector<float> m_logits;
  std::vector<float> m_hidden_in;                                   // MTP: the pass's hidden input rows
  std::vector<int32_t> m_logits_token_rows;                         // the pass's token row of each logits row
  std::unordered_map<uint64_t, std::vector<float>> m_block_states;  // MTP: a prefix's last target state
  std::deque<uint64_t> m_block_state_order;                         // their keys, oldest first
  std::unordered_map<uint64_t, SequenceState> m_sequences;
  SequenceId m_next_sequence = 1;
  uint64_t m_clock = 0;
};

}  // namespace iwb::spec
