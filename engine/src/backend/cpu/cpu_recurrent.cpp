// Qwen 3.5's own ops on the CPU (see forward_plan.h's SplitQueryGate, OutputGate, ShortConv and
// DeltaNet): the attention layers' output gate, and the recurrent layers' convolution and gated
// delta rule, each run over one sequence's tokens at a time with that sequence's state.
#include "backend/cpu/cpu_forward.h"
#include "iwb/kernels/delta_net.h"

#include <algorithm>
#include <cmath>
#include <string>

namespace iwb {
namespace {

// One sequence's `count` rows of a step in parts that end where a state save is due:
// run(first_row, rows) on each part (false: refused), keep(save) after the part a save ends.
template <class Save, class Run, class Keep>
bool in_parts(std::vector<Save>& saves, int64_t count, Run run, Keep keep) {
  int64_t done = 0;
  for (Save& save : saves) {
    if (save.rows > done && !run(done, save.rows - done)) return false;
    done = std::max(done, save.rows);
    keep(save);
  }
  return done >= count || run(done, count - done);
}

}  // namespace

// Every batch sequence's state, checked against its first position before any op runs (a step
// that cannot continue a state fails before it changes anything), and its token rows.
Status CpuForward::begin_recurrent_step(const FlatBatch& batch) {
  const size_t num_sequences = batch.sequence_lengths.size();
  if (batch.sequence_ids.size() != num_sequences) {
    return make_error(ErrorCode::InvalidArgument,
                      "the step names no sequence ids, which a model with recurrent layers needs for their state");
  }
  m_step_states.assign(num_sequences, nullptr);
  m_sequence_rows.assign(num_sequences + 1, 0);
  const auto n = static_cast<int64_t>(batch.tokens.size());
  // Rows are sequence by sequence in batch order (flatten()); a batch sequence without tokens
  // this step keeps its state as it is.
  int64_t row = 0;
  for (size_t s = 0; s < num_sequences; ++s) {
    m_sequence_rows[s] = row;
    while (row < n && batch.token_sequences[static_cast<size_t>(row)] == static_cast<int32_t>(s)) ++row;
  }
  m_sequence_rows[num_sequences] = row;
  if (row != n) return make_error(ErrorCode::InvalidArgument, "the step's tokens are not grouped by sequence");
  for (size_t s = 0; s < num_sequences; ++s) {
    const int64_t first = m_sequence_rows[s], count = m_sequence_rows[s + 1] - first;
    if (count == 0) continue;
    for (int64_t r = first + 1; r < first + count; ++r) {
      if (batch.positions[static_cast<size_t>(r)] != batch.positions[static_cast<size_t>(r - 1)] + 1) {
        return make_error(ErrorCode::InvalidArgument, "a recurrent layer needs each sequence's tokens in order");
      }
    }
    Result<RecurrentStates::State*> state =
        m_recurrent->begin(batch.sequence_ids[s], batch.positions[static_cast<size_t>(first)]);
    if (!state) return state.status();
    m_step_states[s] = *state;
  }
  m_step_saves.assign(num_sequences, {});
  for (const StateSave& save : batch.state_saves) {
    const auto s = static_cast<size_t>(save.sequence);
    if (save.sequence < 0 || s >= num_sequences || m_step_states[s] == nullptr) {
      return make_error(
          ErrorCode::InvalidArgument,
          "a state save names batch sequence " + std::to_string(save.sequence) + ", which has no tokens this step");
    }
    const int64_t first = m_sequence_rows[s], count = m_sequence_rows[s + 1] - first;
    const int64_t start = batch.positions[static_cast<size_t>(first)];
    if (save.num_tokens <= start || save.num_tokens > start + count) {
      return make_error(ErrorCode::InvalidArgument,
                        "a state save after " + std::to_string(save.num_tokens) + " tokens lies outside this step's " +
                            std::to_string(start + 1) + ".." + std::to_string(start + count) + " of sequence " +
                            std::to_string(batch.sequence_ids[s]));
    }
    m_step_saves[s].push_back({save.num_tokens - start, save.checkpoint, m_recurrent->new_checkpoint()});
  }
  for (std::vector<StepSave>& saves : m_step_saves) {
    std::stable_sort(saves.begin(), saves.end(), [](const StepSave& a, const StepSave& b) { return a.rows < b.rows; });
  }
  return {};
}

Status CpuForward::restore_state(SequenceId sequence, int64_t checkpoint, int64_t num_tokens) {
  if (!m_recurrent) return make_error(ErrorCode::InvalidArgument, "this model has no recurrent state to restore");
  return m_recurrent->restore(sequence, checkpoint, num_tokens);
}

void CpuForward::end_recurrent_step(const FlatBatch& batch, bool is_ok) {
  for (size_t s = 0; s < m_step_states.size(); ++s) {
    if (m_step_states[s] == nullptr) continue;
    const int64_t last = m_sequence_rows[s + 1] - 1;
    // A failed step left the states part-way through its layers: only a restart may use them.
    m_step_states[s]->num_tokens = is_ok ? batch.positions[static_cast<size_t>(last)] + 1 : -1;
  }
  // Saves of a failed step may be part-way through their layers: only a whole step's are kept.
  bool has_saves = false;
  for (std::vector<StepSave>& saves : m_step_saves) {
    for (StepSave& save : saves) {
      has_saves = true;
      if (is_ok) m_recurrent->keep_checkpoint(save.checkpoint, std::move(save.values));
    }
  }
  if (!has_saves) m_recurrent->drop_spare_buffers();
  m_step_saves.clear();
  m_step_states.clear();
}

Status CpuForward::run_short_conv(const PlanOp& op) {
  const ModelConfig& c = m_config;
  const LayerWeights& l = m_weights.layers[static_cast<size_t>(op.layer)];
  const int64_t channels = c.linear_conv_channels();
  for (size_t s = 0; s < m_step_states.size(); ++s) {
    if (m_step_states[s] == nullptr) continue;
    const int64_t first = m_sequence_rows[s], count = m_sequence_rows[s + 1] - first;
    float* state = m_recurrent->conv_state(*m_step_states[s], op.layer);
    const auto run = [&](int64_t from, int64_t rows) {
      return short_conv_silu({m_linear_mixed.data() + (first + from) * channels,
                              m_linear_conv.data() + (first + from) * channels, state, l.ssm_conv1d.data(), rows,
                              channels, c.linear_conv_kernel, m_num_threads});
    };
    const auto keep = [&](StepSave& save) {
      std::copy(state, state + c.recurrent_conv_state_floats(), m_recurrent->conv_state(save.values, op.layer));
    };
    if (!in_parts(m_step_saves[s], count, run, keep)) {
      return make_error(ErrorCode::InvalidArgument,
                        "the recurrent convolution refused its arguments in layer " + std::to_string(op.layer));
    }
  }
  record(op, 0, m_sequence_rows.empty() ? 0 : m_sequence_rows.back());
  return {};
}

Status CpuForward::run_delta_net(const PlanOp& op) {
  const ModelConfig& c = m_config;
  const LayerWeights& l = m_weights.layers[static_cast<size_t>(op.layer)];
  const int64_t channels = c.linear_conv_channels(), value = c.linear_value_width();
  const int64_t heads = c.linear_num_value_heads;
  for (size_t s = 0; s < m_step_states.size(); ++s) {
    if (m_step_states[s] == nullptr) continue;
    const int64_t first = m_sequence_rows[s], count = m_sequence_rows[s + 1] - first;
    float* state = m_recurrent->delta_state(*m_step_states[s], op.layer);
    const int64_t state_floats = c.recurrent_layer_state_floats() - c.recurrent_conv_state_floats();
    const auto run = [&](int64_t from, int64_t rows) {
      DeltaNetArgs args;
      args.qkv = m_linear_conv.data() + (first + from) * channels;
      args.alpha = m_linear_alpha.data() + (first + from) * heads;
      args.beta = m_linear_beta.data() + (first + from) * heads;
      args.dt_bias = l.ssm_dt_bias.data();
      args.a = l.ssm_a.data();
      args.state = state;
      args.output = m_linear_out.data() + (first + from) * value;
      args.num_tokens = rows;
      args.num_key_heads = c.linear_num_key_heads;
      args.num_value_heads = heads;
      args.head_dim = c.linear_head_dim;
      args.eps = c.rms_norm_eps;
      args.num_threads = m_num_threads;
      return delta_net(args);
    };
    const auto keep = [&](StepSave& save) {
      std::copy(state, state + state_floats, m_recurrent->delta_state(save.values, op.layer));
    };
    if (!in_parts(m_step_saves[s], count, run, keep)) {
      return make_error(ErrorCode::InvalidArgument,
                        "the gated delta rule refused its arguments in layer " + std::to_string(op.layer));
    }
  }
  record(op, 0, m_sequence_rows.empty() ? 0 : m_sequence_rows.back());
  return {};
}

// attn_q's rows hold [query, gate] per head: queries to Q, gates to AttnGate.
void CpuForward::run_split_query_gate(const PlanOp& op, int64_t n) {
  const float* from = m_q_gate.data();
  const int64_t heads = op.rows_per_token, d = op.width;
  for (int64_t t = 0; t < n; ++t) {
    for (int64_t h = 0; h < heads; ++h) {
      const float* head = from + (t * heads + h) * 2 * d;
      std::copy(head, head + d, m_q.data() + (t * heads + h) * d);
      std::copy(head + d, head + 2 * d, m_attn_gate.data() + (t * heads + h) * d);
    }
  }
}

// Attn *= sigmoid(gate), element by element (llama.cpp's attn_gated).
void CpuForward::run_output_gate(const PlanOp& op, int64_t n) {
  float* x = m_attn.data();
  const float* gate = m_attn_gate.data();
  for (int64_t i = 0; i < n * op.width; ++i) x[i] *= 1.0f / (1.0f + std::exp(-gate[i]));
}

}  // namespace iwb
