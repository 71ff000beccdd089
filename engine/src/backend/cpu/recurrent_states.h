// The recurrent layers' state of every running sequence (Qwen 3.5's gated delta net), in host
// memory beside the paged KV cache: per sequence and recurrent layer, the convolution's last
// inputs and every value head's state. A sequence's state holds exactly the tokens it has seen,
// so a step must continue where the last one ended, or start again at position 0 (a new or
// recomputed sequence); it cannot be rewound. Checkpoints are copies of states at block
// boundaries, kept for prefix caching: a later sequence whose prompt starts with the same
// tokens starts from one instead of from position 0.
#pragma once

#include "iwb/engine/model/model_config.h"
#include "iwb/engine/paged/paged_types.h"
#include "iwb/engine/status.h"

#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

namespace iwb {

class RecurrentStates {
 public:
  struct State {
    std::vector<float> values;  // [recurrent layers x recurrent_layer_state_floats()]
    int64_t num_tokens = 0;     // positions the state has seen; -1: broken by a failed step
  };

  explicit RecurrentStates(const ModelConfig& config);

  // The state of `sequence` for a step whose first token is at `first_position`: zeroed at 0,
  // else the state the sequence's last step left, which must have seen exactly that many tokens.
  Result<State*> begin(SequenceId sequence, int64_t first_position);
  // The convolution's and the delta rule's part of layer il's state (il a recurrent layer).
  float* conv_state(State& s, int64_t il) const { return s.values.data() + offset(il); }
  float* delta_state(State& s, int64_t il) const {
    return s.values.data() + offset(il) + m_config.recurrent_conv_state_floats();
  }

  void release(std::span<const SequenceId> sequences);
  size_t num_sequences() const { return m_states.size(); }
  uint64_t num_bytes() const;

  // A state's worth of floats for a checkpoint being written during a step: a dropped
  // checkpoint's buffer where one is spare (the step writes every float of it before it is
  // kept), else a new one. Speculative decoding saves a state per guess every verification
  // step and drops them after it: fresh buffers cost their page faults each time (on the 9B,
  // 50 MiB a state).
  std::vector<float> new_checkpoint();
  float* conv_state(std::vector<float>& values, int64_t il) const { return values.data() + offset(il); }
  float* delta_state(std::vector<float>& values, int64_t il) const {
    return values.data() + offset(il) + m_config.recurrent_conv_state_floats();
  }
  void keep_checkpoint(int64_t id, std::vector<float> values) { m_checkpoints[id] = std::move(values); }
  // `sequence`'s state becomes checkpoint `id`, having seen num_tokens tokens.
  Status restore(SequenceId sequence, int64_t id, int64_t num_tokens);
  void drop_checkpoints(std::span<const int64_t> ids);
  size_t num_checkpoints() const { return m_checkpoints.size(); }
  // Kept checkpoints and spare buffers alike.
  uint64_t num_checkpoint_bytes() const {
    return (m_checkpoints.size() + m_spare.size()) * m_config.recurrent_state_bytes();
  }
  // Frees the spare buffers (after a step that saved nothing: speculation is not under way).
  void drop_spare_buffers() { m_spare.clear(); }

 private:
  size_t state_floats() const {
    return static_cast<size_t>(m_config.num_recurrent_layers() * m_config.recurrent_layer_state_floats());
  }
  int64_t offset(int64_t il) const { return m_slot[static_cast<size_t>(il)] * m_config.recurrent_layer_state_floats(); }

  const ModelConfig& m_config;
  std::vector<int64_t> m_slot;  // [num_layers]: the layer's index among the recurrent ones
  std::unordered_map<SequenceId, State> m_states;
  std::unordered_map<int64_t, std::vector<float>> m_checkpoints;
  static constexpr size_t kMaxSpareBuffers = 8;
  std::vector<std::vector<float>> m_spare;  // dropped checkpoints' buffers, for new_checkpoint
};

}  // namespace iwb
