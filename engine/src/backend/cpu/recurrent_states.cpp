// RecurrentStates: one state per running sequence, checked against the step's positions.
#include "backend/cpu/recurrent_states.h"

#include <algorithm>
#include <string>

namespace iwb {

RecurrentStates::RecurrentStates(const ModelConfig& config) : m_config(config) {
  int64_t next = 0;
  m_slot.assign(static_cast<size_t>(config.num_layers), -1);
  for (int64_t il = 0; il < config.num_layers; ++il) {
    if (config.is_recurrent(il)) m_slot[static_cast<size_t>(il)] = next++;
  }
}

Result<RecurrentStates::State*> RecurrentStates::begin(SequenceId sequence, int64_t first_position) {
  auto it = m_states.find(sequence);
  if (first_position == 0) {
    if (it == m_states.end()) {
      it = m_states.emplace(sequence, State{std::vector<float>(state_floats(), 0.0f), 0}).first;
    } else {
      std::fill(it->second.values.begin(), it->second.values.end(), 0.0f);
      it->second.num_tokens = 0;
    }
    return &it->second;
  }
  const int64_t seen = it == m_states.end() ? 0 : it->second.num_tokens;
  if (it == m_states.end() || seen != first_position) {
    return make_error(ErrorCode::InvalidArgument,
                      "sequence " + std::to_string(sequence) + " continues at position " +
                          std::to_string(first_position) + " but its recurrent state has seen " +
                          (it == m_states.end() ? std::string("nothing")
                           : seen < 0           ? std::string("a failed step")
                                                : std::to_string(seen) + " tokens") +
                          ": a recurrent layer's state cannot be rewound, and comes from a prefix cache only "
                          "where a checkpoint was kept");
  }
  return &it->second;
}

void RecurrentStates::release(std::span<const SequenceId> sequences) {
  for (const SequenceId s : sequences) m_states.erase(s);
}

Status RecurrentStates::restore(SequenceId sequence, int64_t id, int64_t num_tokens) {
  const auto it = m_checkpoints.find(id);
  if (it == m_checkpoints.end()) {
    return make_error(ErrorCode::NotFound, "sequence " + std::to_string(sequence) +
                                               " was to start from recurrent-state checkpoint " + std::to_string(id) +
                                               ", which is not kept");
  }
  if (num_tokens <= 0) {
    return make_error(ErrorCode::InvalidArgument,
                      "a recurrent-state checkpoint holds at least one token, not " + std::to_string(num_tokens));
  }
  m_states[sequence] = State{it->second, num_tokens};
  return {};
}

std::vector<float> RecurrentStates::new_checkpoint() {
  if (m_spare.empty()) return std::vector<float>(state_floats(), 0.0f);
  std::vector<float> values = std::move(m_spare.back());
  m_spare.pop_back();
  return values;
}

void RecurrentStates::drop_checkpoints(std::span<const int64_t> ids) {
  for (const int64_t id : ids) {
    const auto it = m_checkpoints.find(id);
    if (it == m_checkpoints.end()) continue;
    if (m_spare.size() < kMaxSpareBuffers) m_spare.push_back(std::move(it->second));
    m_checkpoints.erase(it);
  }
}

uint64_t RecurrentStates::num_bytes() const {
  return static_cast<uint64_t>(m_states.size()) * m_config.recurrent_state_bytes();
}

}  // namespace iwb
