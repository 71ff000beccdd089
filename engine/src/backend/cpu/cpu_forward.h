// The CPU backend's forward pass over one scheduler step: it walks the model's ForwardPlan
// (plan/forward_plan.h), running each op with the CPU kernels. The step's tokens of every
// sequence go through each matmul together; attention reads each sequence's paged cache
// through its block table; the classifier runs for the rows that sample only; a
// mixture-of-experts layer groups the step's tokens by expert (cpu_experts.h). Scratch is
// sized once for `max_batch` tokens, the step's token budget.
#pragma once

#include "backend/cpu/cpu_experts.h"
#include "backend/cpu/recurrent_states.h"
#include "iwb/engine/model/model_config.h"
#include "iwb/engine/paged/forward_batch.h"
#include "iwb/engine/paged/paged_kv_storage.h"
#include "iwb/engine/plan/forward_plan.h"
#include "iwb/engine/profile/op_costs.h"
#include "iwb/engine/profile/profiler.h"
#include "iwb/engine/runtime/activation_observer.h"
#include "iwb/engine/status.h"
#include "model/model_weights.h"

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

namespace iwb {

class CpuForward {
 public:
  CpuForward(const ModelConfig& config, const ModelWeights& weights, int num_threads, int64_t max_batch = 128,
             const PlanOptions& options = {});

  // Runs the step's tokens (at most max_batch) at their positions, writes their keys and values
  // to the slots batch.slot_mapping names, and the vocabulary logits of the rows
  // batch.logits_rows lists to `logits` [logits_rows.size() x vocab_size]. Every earlier
  // position of each sequence must already be in `kv`. An MTP head's plan reads `hidden_in`,
  // one row of n_embd per token (the target's hidden state of the token before).
  Status forward(const FlatBatch& batch, PagedKvStorage& kv, float* logits, const float* hidden_in = nullptr);

  // A plan that exports hidden states (PlanOptions::exports_hidden): every token's row of the
  // last forward(), [tokens x n_embd]; empty otherwise.
  std::span<const float> hidden_states() const { return {m_hidden.data(), m_num_hidden_rows * m_hidden_width}; }
  // Rebuilds the plan with (or without) the hidden-state export, for the MTP drafter's target.
  void set_exports_hidden(bool on);

  const ForwardPlan& plan() const { return m_plan; }
  int num_threads() const { return m_num_threads; }
  int64_t max_batch() const { return m_max_batch; }
  uint64_t scratch_bytes() const;

  // Active while the engine profiles a step: every kernel call then adds a KernelRecord.
  KernelRecorder& recorder() { return m_recorder; }

  // Batch-invariant matmuls (MatmulArgs::is_exact): a token's result does not depend on how
  // many tokens share the pass, at the speed of the dequantizing path.
  bool is_batch_invariant() const { return m_is_batch_invariant; }
  void set_batch_invariant(bool is_batch_invariant) { m_is_batch_invariant = is_batch_invariant; }

  // Shown every weight matmul's input while set (imatrix collection); null: off. Expert
  // matmuls show each expert's routed rows (observe_expert_matmul_input).
  void set_activation_observer(ActivationObserver* observer) { m_observer = observer; }

  // Mixture of experts: tokens each layer routed to each expert in the last forward(),
  // [num_layers x num_experts]; empty for a dense model.
  std::span<const int32_t> expert_counts() const { return m_experts.pass_counts(); }

  // Recurrent layers (Qwen 3.5): the sequences' states end with them (finished, aborted or
  // failed), and what the live ones hold.
  void release_sequences(std::span<const SequenceId> sequences) {
    if (m_recurrent) m_recurrent->release(sequences);
  }
  uint64_t recurrent_state_bytes() const { return m_recurrent ? m_recurrent->num_bytes() : 0; }
  // Prefix caching's checkpoints of states (FlatBatch::state_saves keeps them).
  Status restore_state(SequenceId sequence, int64_t checkpoint, int64_t num_tokens);
  void drop_state_checkpoints(std::span<const int64_t> checkpoints) {
    if (m_recurrent) m_recurrent->drop_checkpoints(checkpoints);
  }
  uint64_t recurrent_checkpoint_bytes() const { return m_recurrent ? m_recurrent->num_checkpoint_bytes() : 0; }
  size_t recurrent_num_checkpoints() const { return m_recurrent ? m_recurrent->num_checkpoints() : 0; }

 private:
  Status check_batch(const FlatBatch& batch, const PagedKvStorage& kv) const;
  // One op of the plan over `num_rows` rows (the step's tokens, or the rows that sample).
  Status run_op(const PlanOp& op, const FlatBatch& batch, PagedKvStorage& kv, int64_t num_rows, float* logits);
  Status run_matmuls(const PlanOp& op, int64_t num_rows, float* logits);
  Status run_per_layer_inputs(const PlanOp& op, const FlatBatch& batch, int64_t n);
  Status run_attention(const PlanOp& op, const FlatBatch& batch, PagedKvStorage& kv, int64_t num_rows);
  Status run_expert_matmuls(const PlanOp& op, int64_t num_rows);
  // Latent attention (cpu_latent_attention.cpp).
  Status run_latent_kv(const PlanOp& op, int64_t num_rows);
  Status run_head_matmuls(const PlanOp& op, int64_t num_rows);
  // Recurrent layers and the attention output gate (cpu_recurrent.cpp).
  Status begin_recurrent_step(const FlatBatch& batch);
  void end_recurrent_step(const FlatBatch& batch, bool is_ok);
  Status run_short_conv(const PlanOp& op);
  Status run_delta_net(const PlanOp& op);
  void run_split_query_gate(const PlanOp& op, int64_t num_rows);
  void run_output_gate(const PlanOp& op, int64_t num_rows);
  const WeightMatrix& matrix(const PlanProduct& p, int64_t layer) const;
  float* buffer(PlanBuffer b, float* logits);
  const std::vector<float>& norm_weight(const PlanOp& op) const;
  void record(const PlanOp& op, int part, int64_t num_rows) {
    if (m_recorder.is_active()) m_recorder.add(op_record(m_plan, op, part, num_rows, m_spans));
  }
  // An expert matmul's record counts the experts this layer's tokens were routed to.
  void record_experts(const PlanOp& op, int part, int64_t num_rows) {
    if (m_recorder.is_active()) {
      const auto active = static_cast<int64_t>(m_experts.active_experts().size());
      m_recorder.add(op_record(m_plan, op, part, num_rows, m_spans, active));
    }
  }

  const ModelConfig& m_config;
  const ModelWeights& m_weights;
  ForwardPlan m_plan;
  int m_num_threads;
  bool m_is_batch_invariant = false;
  int64_t m_max_batch;
  KernelRecorder m_recorder;
  ActivationObserver* m_observer = nullptr;

  // Scratch, [max_batch x width] each.
  std::vector<float> m_x;   // residual stream [n_embd]
  std::vector<float> m_xn;  // normalised input of a block [n_embd]
  std::vector<float> m_q, m_k, m_v;
  std::vector<float> m_attn;                      // attention output [num_heads * head_dim_v]
  std::vector<float> m_proj;                      // block output before the residual add [n_embd]
  std::vector<float> m_gate, m_up;                // [n_ff]
  std::vector<float> m_shared_gate, m_shared_up;  // [shared_expert_width] (glm4moe)
  std::vector<float> m_final;                     // normalised hidden states of the rows that sample [n_embd]
  CpuExperts m_experts;                           // routing and the grouped expert rows (mixture of experts)
  // Latent attention (deepseek2): the query latent, the key/value latent, the queries before
  // absorption, the heads' outputs after attn_v_b, and one head's rows gathered for its product.
  std::vector<float> m_q_latent, m_kv_latent, m_q_heads, m_attn_heads;
  std::vector<float> m_head_in, m_head_out;
  // Multi-token prediction: every token's hidden state (exported), an MTP head's input rows and
  // their join with its normed embeddings [2 * n_embd].
  std::vector<float> m_hidden, m_hidden_in, m_joined;
  std::vector<float> m_moe_out;  // Gemma 4: the experts' sum beside the dense FFN
  // Gemma 4's per-layer embeddings: the projection, the table's rows, the inputs layer by
  // layer, a layer's gate.
  std::vector<float> m_ple_proj, m_ple_rows, m_ple_in, m_ple_gate;
  // Qwen 3.5: attn_q's queries and gates, the gates alone; the recurrent layers' buffers
  // (PlanBuffer's Linear*), the states of the sequences, and during a step each batch
  // sequence's state and first token row ([num_sequences + 1]).
  std::vector<float> m_q_gate, m_attn_gate;
  std::vector<float> m_linear_mixed, m_linear_conv, m_linear_gate, m_linear_beta, m_linear_alpha, m_linear_out;
  std::unique_ptr<RecurrentStates> m_recurrent;
  std::vector<RecurrentStates::State*> m_step_states;
  std::vector<int64_t> m_sequence_rows;
  // A state save due this step: after `rows` of the sequence's rows, into `values`.
  struct StepSave {
    int64_t rows = 0;
    int64_t checkpoint = 0;
    std::vector<float> values;
  };
  std::vector<std::vector<StepSave>> m_step_saves;  // [num_sequences], by rows
  size_t m_num_hidden_rows = 0;
  size_t m_hidden_width = 0;
  // The attention record's per-sequence spans, filled while profiling (reused, so profiling
  // allocates nothing per step).
  std::vector<op_costs::AttentionSpan> m_spans;
  // The matmuls' 8-bit activations (matmul_scratch_bytes for the widest input, max_batch rows),
  // so the token path allocates nothing.
  std::vector<uint8_t> m_matmul_scratch;
};

}  // namespace iwb
