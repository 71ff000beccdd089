// The CPU forward pass over one scheduler step: a walk over the model's ForwardPlan, each op
// run with the CPU kernels (every sequence's tokens through each matmul together, attention
// per sequence through block tables). While profiling, each kernel call is followed by its
// record from the plan (op_record), the same record the cost model predicts.
#include "backend/cpu/cpu_forward.h"

#include "iwb/engine/profile/op_costs.h"
#include "iwb/kernels/activations.h"
#include "iwb/kernels/embedding.h"
#include "iwb/kernels/matmul.h"
#include "iwb/kernels/paged_attention.h"
#include "iwb/kernels/rmsnorm.h"
#include "iwb/kernels/rope.h"
#include "plan/plan_weights.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <string>

namespace iwb {
namespace {

Status kernel_failed(const std::string& what, int64_t layer) {
  return make_error(
      ErrorCode::InvalidArgument,
      what + " refused its arguments" + (layer >= 0 ? " in layer " + std::to_string(layer) : std::string()));
}

// x += scale * y (granite scales each block's output; every other model adds it as it is).
void add_in_place(float* x, const float* y, int64_t n, float scale) {
  if (scale == 1.0f) {
    for (int64_t i = 0; i < n; ++i) x[i] += y[i];
  } else {
    for (int64_t i = 0; i < n; ++i) x[i] += scale * y[i];
  }
}

const std::vector<float> kNoBias;

}  // namespace

CpuForward::CpuForward(const ModelConfig& config, const ModelWeights& weights, int num_threads, int64_t max_batch,
                       const PlanOptions& options)
    : m_config(config),
      m_weights(weights),
      m_num_threads(num_threads),
      m_max_batch(std::max<int64_t>(1, max_batch)),
      m_experts(config, std::max<int64_t>(1, max_batch)) {
  const PlanWeightTypes types = plan::weight_types_of(weights);
  m_plan = build_forward_plan(config, &types, options);
  const auto n = static_cast<size_t>(m_max_batch);
  if (options.is_mtp_head) {
    m_hidden_in.resize(n * config.embedding_length);
    m_joined.resize(2 * n * config.embedding_length);
  }
  set_exports_hidden(m_plan.options.exports_hidden);
  m_x.resize(n * config.embedding_length);
  m_xn.resize(n * config.embedding_length);
  // The widest layer's (Gemma 4's sliding and global layers differ).
  m_q.resize(n * config.max_q_width());
  m_k.resize(n * config.max_k_width());
  m_v.resize(n * config.max_v_width());
  m_attn.resize(n * config.max_attention_output_width());
  m_proj.resize(n * config.embedding_length);
  if (config.has_parallel_dense_ffn) m_moe_out.resize(n * config.embedding_length);
  if (config.has_per_layer_embeddings()) {  // Gemma 4 E2B / E4B
    m_ple_proj.resize(n * static_cast<size_t>(config.per_layer_inputs_width()));
    m_ple_rows.resize(n * static_cast<size_t>(config.per_layer_inputs_width()));
    m_ple_in.resize(n * static_cast<size_t>(config.per_layer_inputs_width()));
    m_ple_gate.resize(n * static_cast<size_t>(config.per_layer_embedding_length));
  }
  // A mixture of experts has no dense FFN but in its leading dense layers (its rows live in
  // CpuExperts' grouped buffers); its shared experts have buffers of their own.
  const auto dense_ff = static_cast<size_t>(config.has_dense_layers() ? config.feed_forward_length : 0);
  m_gate.resize(n * dense_ff);
  m_up.resize(n * dense_ff);
  m_shared_gate.resize(n * static_cast<size_t>(config.shared_expert_width()));
  m_shared_up.resize(n * static_cast<size_t>(config.shared_expert_width()));
  m_final.resize(n * config.embedding_length);
  if (config.has_latent_attention()) {
    m_q_latent.resize(n * static_cast<size_t>(config.q_lora_rank));
    m_kv_latent.resize(n * static_cast<size_t>(config.latent_kv_width()));
    m_q_heads.resize(n * static_cast<size_t>(config.q_heads_width()));
    m_attn_heads.resize(n * static_cast<size_t>(config.attention_heads_width()));
    const auto head_width = static_cast<size_t>(std::max(config.kv_lora_rank, config.mla_head_dim_k));
    m_head_in.resize(n * head_width);
    m_head_out.resize(n * head_width);
  }
  if (config.has_attention_output_gate) {
    m_q_gate.resize(2 * n * config.max_q_width());
    m_attn_gate.resize(n * config.max_attention_output_width());
  }
  if (config.has_recurrent_layers()) {
    const auto channels = static_cast<size_t>(config.linear_conv_channels());
    const auto value = static_cast<size_t>(config.linear_value_width());
    const auto heads = static_cast<size_t>(config.linear_num_value_heads);
    m_linear_mixed.resize(n * channels);
    m_linear_conv.resize(n * channels);
    m_linear_gate.resize(n * value);
    m_linear_out.resize(n * value);
    m_linear_beta.resize(n * heads);
    m_linear_alpha.resize(n * heads);
    m_recurrent = std::make_unique<RecurrentStates>(config);
  }
  m_spans.reserve(n);
  size_t matmul_scratch = 0;
  auto need = [&](const WeightMatrix& w) {
    matmul_scratch = std::max(matmul_scratch, matmul_scratch_bytes(w.type, w.in_features, m_max_batch));
  };
  need(weights.per_layer_model_proj);
  for (const LayerWeights& l : weights.layers) {
    for (const WeightMatrix* w : {&l.wq,
                                  &l.wk,
                                  &l.wv,
                                  &l.wo,
                                  &l.ffn_gate,
                                  &l.ffn_up,
                                  &l.ffn_down,
                                  &l.ffn_gate_inp,
                                  &l.ffn_gate_shexp,
                                  &l.ffn_up_shexp,
                                  &l.ffn_down_shexp,
                                  &l.wq_a,
                                  &l.wkv_a,
                                  &l.nextn_eh_proj,
                                  &l.ple_inp_gate,
                                  &l.ple_proj,
                                  &l.linear_qkv,
                                  &l.linear_gate,
                                  &l.ssm_beta,
                                  &l.ssm_alpha,
                                  &l.ssm_out}) {
      need(*w);
    }
    for (const ExpertMatrices* h : {&l.wk_b, &l.wv_b}) {
      if (h->num_experts > 0) need(h->expert(0));
    }
    // An expert multiplies at most every token of the step (a token picks an expert once).
    for (const ExpertMatrices* e : {&l.ffn_gate_exps, &l.ffn_up_exps, &l.ffn_down_exps}) {
      if (e->num_experts > 0) need(e->expert(0));
    }
  }
  need(weights.output);
  m_matmul_scratch.resize(matmul_scratch);
}

void CpuForward::set_exports_hidden(bool on) {
  if (on != m_plan.options.exports_hidden) {
    const PlanWeightTypes types = plan::weight_types_of(m_weights);
    PlanOptions options = m_plan.options;
    options.exports_hidden = on;
    m_plan = build_forward_plan(m_config, &types, options);
  }
  // An MTP head's plan exports whatever is asked (build_forward_plan).
  m_hidden_width = m_plan.options.exports_hidden ? static_cast<size_t>(m_config.embedding_length) : 0;
  m_hidden.resize(static_cast<size_t>(m_max_batch) * m_hidden_width);
  m_hidden.shrink_to_fit();
  m_num_hidden_rows = 0;
}

uint64_t CpuForward::scratch_bytes() const {
  const size_t floats = m_x.size() + m_xn.size() + m_q.size() + m_k.size() + m_v.size() + m_attn.size() +
                        m_proj.size() + m_gate.size() + m_up.size() + m_shared_gate.size() + m_shared_up.size() +
                        m_final.size() + m_q_latent.size() + m_kv_latent.size() + m_q_heads.size() +
                        m_attn_heads.size() + m_head_in.size() + m_head_out.size() + m_hidden.size() +
                        m_hidden_in.size() + m_joined.size() + m_moe_out.size() + m_ple_proj.size() +
                        m_ple_rows.size() + m_ple_in.size() + m_ple_gate.size() + m_q_gate.size() + m_attn_gate.size() +
                        m_linear_mixed.size() + m_linear_conv.size() + m_linear_gate.size() + m_linear_out.size() +
                        m_linear_beta.size() + m_linear_alpha.size();
  return static_cast<uint64_t>(floats) * sizeof(float) + m_matmul_scratch.size() + m_experts.scratch_bytes();
}

Status CpuForward::check_batch(const FlatBatch& b, const PagedKvStorage& kv) const {
  const auto n = static_cast<int64_t>(b.tokens.size());
  if (n == 0) return make_error(ErrorCode::InvalidArgument, "nothing to run: no tokens");
  if (n > m_max_batch) {
    return make_error(ErrorCode::InvalidArgument, "a step of " + std::to_string(n) +
                                                      " tokens exceeds the forward pass's " +
                                                      std::to_string(m_max_batch) + "-token scratch");
  }
  if (b.positions.size() != b.tokens.size() || b.slot_mapping.size() != b.tokens.size() ||
      b.token_sequences.size() != b.tokens.size() || b.logits_rows.size() > b.tokens.size()) {
    return make_error(ErrorCode::InvalidArgument, "the step's token arrays differ in length");
  }
  bool is_shape_same = kv.shape().num_layers == m_config.num_layers;
  for (int64_t il = 0; is_shape_same && il < m_config.num_layers; ++il) {
    const bool has_own = m_config.has_own_kv(il);  // a shared KV layer stores nothing
    is_shape_same = kv.k_row(il) == (has_own ? m_config.layer_k_width(il) : 0) &&
                    kv.v_row(il) == (has_own ? m_config.layer_v_width(il) : 0);
  }
  if (!is_shape_same) return make_error(ErrorCode::InvalidArgument, "the KV cache was made for another model shape");
  for (const int32_t row : b.logits_rows) {
    if (row < 0 || row >= n) return make_error(ErrorCode::InvalidArgument, "a logits row is outside the step's tokens");
  }
  return {};
}

Status CpuForward::forward(const FlatBatch& batch, PagedKvStorage& kv, float* logits, const float* hidden_in) {
  IWB_RETURN_IF_ERROR(check_batch(batch, kv));
  const auto n = static_cast<int64_t>(batch.tokens.size());
  m_num_hidden_rows = 0;
  if (m_plan.options.is_mtp_head) {
    if (hidden_in == nullptr) {
      return make_error(ErrorCode::InvalidArgument, "the MTP head runs without the target's hidden states");
    }
    std::copy(hidden_in, hidden_in + n * m_config.embedding_length, m_hidden_in.begin());
  }
  if (m_recorder.is_active()) plan::attention_spans(batch, m_spans);
  if (m_recurrent) IWB_RETURN_IF_ERROR(begin_recurrent_step(batch));
  m_experts.begin_pass();
  m_recorder.mark();
  for (const PlanOp& op : m_plan.body) {
    if (Status s = run_op(op, batch, kv, n, logits); !s) {
      if (m_recurrent) end_recurrent_step(batch, false);
      return s;
    }
  }
  if (m_recurrent) end_recurrent_step(batch, true);
  if (m_plan.options.exports_hidden) m_num_hidden_rows = static_cast<size_t>(n);
  if (logits != nullptr && !batch.logits_rows.empty()) {
    const auto rows = static_cast<int64_t>(batch.logits_rows.size());
    for (const PlanOp& op : m_plan.logits) IWB_RETURN_IF_ERROR(run_op(op, batch, kv, rows, logits));
  }
  return {};
}

float* CpuForward::buffer(PlanBuffer b, float* logits) {
  switch (b) {
    case PlanBuffer::X: return m_x.data();
    case PlanBuffer::Xn: return m_xn.data();
    case PlanBuffer::Q: return m_q.data();
    case PlanBuffer::K: return m_k.data();
    case PlanBuffer::V: return m_v.data();
    case PlanBuffer::Attn: return m_attn.data();
    case PlanBuffer::Proj: return m_proj.data();
    case PlanBuffer::Gate: return m_gate.data();
    case PlanBuffer::Up: return m_up.data();
    case PlanBuffer::Final: return m_final.data();
    case PlanBuffer::Logits: return logits;
    case PlanBuffer::RouterLogits: return m_experts.router_logits();
    case PlanBuffer::ExpertIn: return m_experts.expert_in();
    case PlanBuffer::ExpertGate: return m_experts.expert_gate();
    case PlanBuffer::ExpertUp: return m_experts.expert_up();
    case PlanBuffer::ExpertOut: return m_experts.expert_out();
    case PlanBuffer::SharedGate: return m_shared_gate.data();
    case PlanBuffer::SharedUp: return m_shared_up.data();
    case PlanBuffer::QLatent: return m_q_latent.data();
    case PlanBuffer::KvLatent: return m_kv_latent.data();
    case PlanBuffer::QHeads: return m_q_heads.data();
    case PlanBuffer::AttnHeads: return m_attn_heads.data();
    case PlanBuffer::Hidden: return m_hidden.data();
    case PlanBuffer::HiddenIn: return m_hidden_in.data();
    case PlanBuffer::Joined: return m_joined.data();
    case PlanBuffer::MoeOut: return m_moe_out.data();
    case PlanBuffer::PleProj: return m_ple_proj.data();
    case PlanBuffer::PleIn: return m_ple_in.data();
    case PlanBuffer::PleGate: return m_ple_gate.data();
    case PlanBuffer::QGate: return m_q_gate.data();
    case PlanBuffer::AttnGate: return m_attn_gate.data();
    case PlanBuffer::LinearMixed: return m_linear_mixed.data();
    case PlanBuffer::LinearConv: return m_linear_conv.data();
    case PlanBuffer::LinearGate: return m_linear_gate.data();
    case PlanBuffer::LinearBeta: return m_linear_beta.data();
    case PlanBuffer::LinearAlpha: return m_linear_alpha.data();
    case PlanBuffer::LinearOut: return m_linear_out.data();
  }
  return nullptr;
}

const std::vector<float>& CpuForward::norm_weight(const PlanOp& op) const {
  if (op.norm == PlanNorm::OutputNorm) return m_weights.output_norm;
  return plan::layer_norm(m_weights.layers[static_cast<size_t>(op.layer)], op.norm);
}

Status CpuForward::run_op(const PlanOp& op, const FlatBatch& batch, PagedKvStorage& kv, int64_t n, float* logits) {
  const ModelConfig& c = m_config;
  const int64_t il = op.layer;
  switch (op.kind) {
    case PlanOpKind::Embedding: {
      const int32_t* tokens = batch.tokens.data();
      EmbeddingArgs embd{m_weights.token_embd.type,
                         m_weights.token_embd.data,
                         c.vocab_size,
                         c.embedding_length,
                         tokens,
                         n,
                         c.embedding_scale,
                         m_x.data()};
      if (!embedding_lookup(embd)) {
        for (int64_t t = 0; t < n; ++t) {
          if (tokens[t] < 0 || tokens[t] >= c.vocab_size) {
            return make_error(ErrorCode::InvalidArgument, "token id " + std::to_string(tokens[t]) +
                                                              " is outside the vocabulary (" +
                                                              std::to_string(c.vocab_size) + " tokens)");
          }
        }
        return kernel_failed("the embedding lookup", -1);
      }
      record(op, 0, n);
      return {};
    }
    case PlanOpKind::RmsNorm:
      if (!rmsnorm({buffer(op.input, logits), op.norm == PlanNorm::Unit ? nullptr : norm_weight(op).data(),
                    buffer(op.output, logits), n * op.rows_per_token, op.width, c.rms_norm_eps, m_num_threads})) {
        return kernel_failed(std::string("the ") + op.name, il);
      }
      record(op, 0, n);
      return {};
    case PlanOpKind::Matmuls: return run_matmuls(op, n, logits);
    case PlanOpKind::Rope: {
      const bool is_sliding = op.is_sliding;
      // Latent attention rotates each head's last values: the rows start that far in (each head
      // row is still head_dim_k apart, and the last one ends inside the buffer).
      const int64_t offset = c.rope_head_offset();
      // Gemma 4's proportional RoPE: rope_freqs on the global layers only.
      const bool has_freqs = !m_weights.rope_freqs.empty() && !(is_sliding && c.is_rope_freqs_global_only);
      RopeArgs args{m_q.data() + offset,
                    n,
                    c.num_heads,
                    c.layer_head_dim_k(il),
                    c.layer_rope_num_rotated(il),
                    batch.positions.data(),
                    c.rope_layout,
                    is_sliding ? c.rope_freq_base_swa : c.rope_freq_base,
                    is_sliding ? c.rope_freq_scale_swa : c.rope_freq_scale,
                    has_freqs ? m_weights.rope_freqs.data() : nullptr};
      // YaRN (gpt-oss: every layer; olmo2's OLMo 3: the global layers only).
      const bool is_unscaled = is_sliding && c.is_sliding_rope_unscaled;
      args.ext_factor = is_unscaled ? 0.0f : c.rope_ext_factor;
      args.attn_factor = is_unscaled ? 1.0f : c.rope_yarn_attn_factor;
      args.beta_fast = c.rope_beta_fast;
      args.beta_slow = c.rope_beta_slow;
      args.original_context = c.rope_yarn_original_context;
      args.num_threads = m_num_threads;
      if (!rope(args)) return kernel_failed("RoPE on queries", il);
      record(op, 0, n);
      if (op.is_query_only) return {};  // a shared KV layer's keys are another layer's, rotated there
      args.data = m_k.data() + offset;
      args.num_heads = c.layer_num_kv_heads(il);
      if (!rope(args)) return kernel_failed("RoPE on keys", il);
      record(op, 1, n);
      return {};
    }
    case PlanOpKind::KvWrite:
      IWB_RETURN_IF_ERROR(kv.write(il, batch.slot_mapping, m_k.data(), m_v.data()));
      record(op, 0, n);
      return {};
    case PlanOpKind::Attention: return run_attention(op, batch, kv, n);
    case PlanOpKind::GatedActivation: {
      // Gemma 4's per-layer gate multiplies by this layer's slice of the per-layer inputs.
      const float* multiplier = buffer(op.multiplier, logits) + (op.is_multiplier_layer_slice ? il * n * op.width : 0);
      if (!gated_activation({buffer(op.input, logits), multiplier, buffer(op.output, logits),
                             n * op.rows_per_token * op.width, c.ffn_activation, m_num_threads})) {
        return kernel_failed("the FFN activation", il);
      }
      record(op, 0, n);
      return {};
    }
    case PlanOpKind::PerLayerInputs: return run_per_layer_inputs(op, batch, n);
    case PlanOpKind::ExpertRouting: {
      const std::vector<float>& bias = m_weights.layers[static_cast<size_t>(il)].exp_probs_b;
      IWB_RETURN_IF_ERROR(
          m_experts.route(il, buffer(op.input, logits), bias.empty() ? nullptr : bias.data(), m_xn.data(), n));
      record(op, 0, n);
      return {};
    }
    case PlanOpKind::ExpertMatmuls: return run_expert_matmuls(op, n);
    case PlanOpKind::LatentKv: return run_latent_kv(op, n);
    case PlanOpKind::HeadMatmuls: return run_head_matmuls(op, n);
    case PlanOpKind::ExpertCombine: {
      const std::vector<float>& scales = m_weights.layers[static_cast<size_t>(il)].ffn_down_exps_scale;
      m_experts.combine(n, buffer(op.output, logits), op.is_accumulating, scales.empty() ? nullptr : scales.data());
      record(op, 0, n);
      return {};
    }
    case PlanOpKind::LayerScale: {
      const float scale = m_weights.layers[static_cast<size_t>(il)].output_scale.value_or(1.0f);
      float* x = buffer(op.output, logits);
      for (int64_t i = 0; i < n * c.embedding_length; ++i) x[i] *= scale;
      record(op, 0, n);
      return {};
    }
    case PlanOpKind::ResidualAdd:
      add_in_place(buffer(op.output, logits), buffer(op.input, logits), n * c.embedding_length, c.residual_scale);
      record(op, 0, n);
      return {};
    case PlanOpKind::GatherRows: {
      // Only the rows that sample go on (the last FFN, the classifier), gathered first (the copy
      // is not a kernel).
      const int64_t d = c.embedding_length;
      const float* from = buffer(op.input, logits);
      float* to = buffer(op.output, logits);
      for (int64_t r = 0; r < n; ++r) {
        const float* hidden = from + static_cast<int64_t>(batch.logits_rows[static_cast<size_t>(r)]) * d;
        std::copy(hidden, hidden + d, to + r * d);
      }
      return {};
    }
    case PlanOpKind::Concat: {
      const float* first = buffer(op.input, logits);
      const float* second = buffer(op.appended, logits);
      float* to = buffer(op.output, logits);
      const int64_t w = op.width;  // both halves are n_embd wide (the MTP head's join)
      for (int64_t r = 0; r < n; ++r) {
        std::copy(first + r * w, first + (r + 1) * w, to + 2 * r * w);
        std::copy(second + r * w, second + (r + 1) * w, to + (2 * r + 1) * w);
      }
      return {};
    }
    case PlanOpKind::SplitQueryGate: run_split_query_gate(op, n); return {};
    case PlanOpKind::OutputGate:
      run_output_gate(op, n);
      record(op, 0, n);
      return {};
    case PlanOpKind::SharedExpertGate: {
      // Qwen 3.5 MoE: each token's shared expert output times sigmoid(its normed row . gate).
      const std::vector<float>& w = m_weights.layers[static_cast<size_t>(il)].ffn_gate_inp_shexp;
      const float* x = buffer(op.input, logits);
      float* y = buffer(op.output, logits);
      for (int64_t t = 0; t < n; ++t) {
        double dot = 0;
        for (int64_t i = 0; i < op.width; ++i)
          dot += static_cast<double>(x[t * op.width + i]) * w[static_cast<size_t>(i)];
        const auto g = static_cast<float>(1.0 / (1.0 + std::exp(-dot)));
        for (int64_t i = 0; i < op.width; ++i) y[t * op.width + i] *= g;
      }
      record(op, 0, n);
      return {};
    }
    case PlanOpKind::ShortConv: return run_short_conv(op);
    case PlanOpKind::DeltaNet: return run_delta_net(op);
    case PlanOpKind::Softcap: {
      const float cap = c.final_logit_softcap;
      for (int64_t i = 0; i < n * c.vocab_size; ++i) logits[i] = cap * std::tanh(logits[i] / cap);
      record(op, 0, n);
      return {};
    }
  }
  return make_error(ErrorCode::InvalidArgument, "an op the CPU backend does not know");
}

Status CpuForward::run_matmuls(const PlanOp& op, int64_t n, float* logits) {
  const int64_t il = op.layer;
  const float* input = buffer(op.input, logits);
  auto args_of = [&](const PlanProduct& p) {
    const WeightMatrix& w = matrix(p, il);
    const bool is_model_matrix = p.matrix == PlanMatrix::Output || p.matrix == PlanMatrix::PerLayerModelProj;
    const std::vector<float>& bias =
        is_model_matrix ? kNoBias : plan::layer_bias(m_weights.layers[static_cast<size_t>(il)], p.matrix, kNoBias);
    MatmulArgs args{w.type,
                    w.data,
                    w.in_features,
                    w.out_features,
                    input,
                    n,
                    bias.empty() ? nullptr : bias.data(),
                    buffer(p.output, logits),
                    m_num_threads};
    args.scratch = m_matmul_scratch.data();
    args.scratch_bytes = m_matmul_scratch.size();
    args.is_exact = m_is_batch_invariant;
    return args;
  };
  // Products of one input in one kernel call (q/k/v, gate/up): the input is quantized once and
  // the threads fork and join once, which decode feels (a few microseconds per parallel region,
  // tens with OMP_WAIT_POLICY=passive, against ~30 us per matrix of a 1.5B model). Not while
  // profiling (each matmul keeps its own record and time) or observing inputs.
  if (op.num_products > 1 && !m_recorder.is_active() && m_observer == nullptr) {
    std::array<MatmulArgs, 3> group;
    for (int i = 0; i < op.num_products; ++i)
      group[static_cast<size_t>(i)] = args_of(op.products[static_cast<size_t>(i)]);
    if (!matmul_group({group.data(), static_cast<size_t>(op.num_products)})) {
      std::string names;
      for (const PlanProduct& p : op.matmuls()) names += (names.empty() ? "" : "/") + std::string(p.name);
      return kernel_failed("the " + names + " matmuls", il);
    }
    return {};
  }
  for (int i = 0; i < op.num_products; ++i) {
    const PlanProduct& p = op.products[static_cast<size_t>(i)];
    const MatmulArgs args = args_of(p);
    if (m_observer != nullptr) m_observer->observe_matmul_input(p.name, il, input, n, args.in_features);
    if (!iwb::matmul(args)) return kernel_failed(std::string("the ") + p.name + " matmul", il);
    record(op, i, n);
  }
  return {};
}

const WeightMatrix& CpuForward::matrix(const PlanProduct& p, int64_t il) const {
  if (p.matrix == PlanMatrix::Output) return m_weights.output;
  if (p.matrix == PlanMatrix::PerLayerModelProj) return m_weights.per_layer_model_proj;
  const LayerWeights& l = m_weights.layers[static_cast<size_t>(il)];
  return p.matrix == PlanMatrix::FfnGateInp ? l.ffn_gate_inp : plan::layer_matrix(l, p.matrix);
}

Status CpuForward::run_expert_matmuls(const PlanOp& op, int64_t n) {
  const int64_t il = op.layer;
  const LayerWeights& l = m_weights.layers[static_cast<size_t>(il)];
  const float* input = buffer(op.input, nullptr);
  // Expert e's rows (those routed to it, grouped) times a view of expert e's matrices.
  auto args_of = [&](const PlanProduct& p, int64_t e) {
    const WeightMatrix w = plan::layer_experts(l, p.matrix).expert(e);
    const int64_t first = m_experts.first_row(e);
    const std::vector<float>& biases = plan::layer_expert_bias(l, p.matrix, kNoBias);
    MatmulArgs args{w.type,
                    w.data,
                    w.in_features,
                    w.out_features,
                    input + first * w.in_features,
                    m_experts.num_rows(e),
                    biases.empty() ? nullptr : biases.data() + e * w.out_features,
                    buffer(p.output, nullptr) + first * w.out_features,
                    m_num_threads};
    args.scratch = m_matmul_scratch.data();
    args.scratch_bytes = m_matmul_scratch.size();
    args.is_exact = m_is_batch_invariant;
    return args;
  };
  auto failed = [&](const PlanProduct& p, int64_t e) {
    return kernel_failed(std::string("the ") + p.name + " matmul of expert " + std::to_string(e), il);
  };
  if (m_observer != nullptr) {
    for (const PlanProduct& p : op.matmuls()) {
      const WeightMatrix all = plan::layer_experts(l, p.matrix).expert(0);
      for (const int32_t e : m_experts.active_experts()) {
        m_observer->observe_expert_matmul_input(p.name, il, e, m_config.num_experts,
                                                input + m_experts.first_row(e) * all.in_features, m_experts.num_rows(e),
                                                all.in_features);
      }
    }
  }
  if (op.num_products > 1 && !m_recorder.is_active()) {
    // gate and up of one expert share its rows: one grouped call per expert.
    std::array<MatmulArgs, 3> group;
    for (const int32_t e : m_experts.active_experts()) {
      for (int i = 0; i < op.num_products; ++i)
        group[static_cast<size_t>(i)] = args_of(op.products[static_cast<size_t>(i)], e);
      if (!matmul_group({group.data(), static_cast<size_t>(op.num_products)})) return failed(op.products[0], e);
    }
    return {};
  }
  // One record per product over all of its experts (as the plan counts them).
  for (int i = 0; i < op.num_products; ++i) {
    const PlanProduct& p = op.products[static_cast<size_t>(i)];
    for (const int32_t e : m_experts.active_experts()) {
      if (!iwb::matmul(args_of(p, e))) return failed(p, e);
    }
    record_experts(op, i, n);
  }
  return {};
}

Status CpuForward::run_attention(const PlanOp& op, const FlatBatch& batch, PagedKvStorage& kv, int64_t n) {
  const ModelConfig& c = m_config;
  const int64_t il = op.layer;
  // Every sequence's queries over its own keys and values, through its block table.
  // Its own layer's cache, or (Gemma 4's shared KV layers) an earlier layer's of the same shape.
  const int64_t cache = op.cache_layer();
  PagedAttentionArgs attn;
  attn.q = m_q.data();
  attn.k_cache = kv.k_data(cache);
  attn.v_cache = kv.v_data(cache);
  attn.v_row_units = kv.shares_values() ? kv.k_units(cache) : 0;  // latent attention: values in the key rows
  attn.num_blocks = kv.num_blocks();
  attn.block_size = kv.block_size();
  attn.block_tables = batch.block_tables.data();
  attn.max_blocks_per_sequence = batch.max_blocks_per_sequence;
  attn.sequence_lengths = batch.sequence_lengths.data();
  attn.num_sequences = static_cast<int64_t>(batch.sequence_lengths.size());
  attn.token_sequences = batch.token_sequences.data();
  attn.positions = batch.positions.data();
  attn.num_tokens = n;
  attn.num_heads = c.num_heads;
  attn.num_kv_heads = c.layer_num_kv_heads(il);
  attn.head_dim = c.layer_head_dim_k(il);
  attn.head_dim_v = c.layer_head_dim_v(il);
  attn.scale = c.attention_scale;
  attn.sliding_window = op.is_sliding ? c.sliding_window : 0;
  attn.softcap = c.attention_softcap;
  attn.output = m_attn.data();
  attn.num_threads = m_num_threads;
  attn.k_type = kv.types().k;
  attn.v_type = kv.types().v;
  attn.k_scale = kv.k_scale(cache);
  attn.v_scale = kv.v_scale(cache);
  const std::vector<float>& sinks = m_weights.layers[static_cast<size_t>(il)].attn_sinks;
  attn.sinks = sinks.empty() ? nullptr : sinks.data();
  attn.is_batch_invariant = m_is_batch_invariant;
  if (!paged_attention(attn)) return kernel_failed("paged attention", il);
  record(op, 0, n);
  return {};
}

Status CpuForward::run_per_layer_inputs(const PlanOp& op, const FlatBatch& batch, int64_t n) {
  // llama.cpp's get_per_layer_inputs and project_per_layer_inputs: each token's rows of
  // per_layer_token_embd (times sqrt(per_layer)), plus per_layer_model_proj's output scaled by
  // 1 / sqrt(n_embd) and RMS-normed per layer's slice, all times 1 / sqrt(2), laid out layer
  // by layer for the layers' gates.
  const ModelConfig& c = m_config;
  const int64_t p = op.width, layers = op.rows_per_token, width = p * layers;
  EmbeddingArgs rows{m_weights.per_layer_token_embd.type,
                     m_weights.per_layer_token_embd.data,
                     c.vocab_size,
                     width,
                     batch.tokens.data(),
                     n,
                     std::sqrt(static_cast<float>(p)),
                     m_ple_rows.data()};
  if (!embedding_lookup(rows)) return kernel_failed("the per-layer embedding lookup", -1);
  float* proj = m_ple_proj.data();
  const float projection_scale = 1.0f / std::sqrt(static_cast<float>(c.embedding_length));
  for (int64_t i = 0; i < n * width; ++i) proj[i] *= projection_scale;
  if (!rmsnorm({proj, m_weights.per_layer_proj_norm.data(), proj, n * layers, p, c.rms_norm_eps, m_num_threads})) {
    return kernel_failed("the per-layer projection norm", -1);
  }
  const float input_scale = 1.0f / std::sqrt(2.0f);
  for (int64_t t = 0; t < n; ++t) {
    for (int64_t l = 0; l < layers; ++l) {
      const float* a = proj + t * width + l * p;
      const float* b = m_ple_rows.data() + t * width + l * p;
      float* out = m_ple_in.data() + (l * n + t) * p;
      for (int64_t i = 0; i < p; ++i) out[i] = (a[i] + b[i]) * input_scale;
    }
  }
  record(op, 0, n);
  return {};
}

}  // namespace iwb
