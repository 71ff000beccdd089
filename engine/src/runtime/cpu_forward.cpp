// The CPU forward pass. One layer function serves the three architectures: what differs
// between them (biases, q/k norms, post-norms, GeGLU vs SwiGLU, RoPE layout and bases, sliding
// windows, embedding scale) is data in ModelConfig and ModelWeights, as in llama.cpp's graphs.
// Each kernel call is followed by `if (m_recorder.is_active()) m_recorder.add(...)`: the
// profiler's records, built from the same arguments (profile/cost_model.cpp lists the same
// calls in the same order for its predictions).
#include "runtime/cpu_forward.h"

#include "iwb/engine/profile/op_costs.h"
#include "iwb/kernels/activations.h"
#include "iwb/kernels/attention.h"
#include "iwb/kernels/embedding.h"
#include "iwb/kernels/matmul.h"
#include "iwb/kernels/rmsnorm.h"
#include "iwb/kernels/rope.h"

#include <algorithm>
#include <cmath>
#include <string>

namespace iwb {
namespace {

Status kernel_failed(const char* what, int64_t layer) {
  return make_error(ErrorCode::InvalidArgument,
                    std::string(what) + " refused its arguments" +
                        (layer >= 0 ? " in layer " + std::to_string(layer) : std::string()));
}

void add_in_place(float* x, const float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] += y[i];
}

}  // namespace

CpuForward::CpuForward(const ModelConfig& config, const ModelWeights& weights, int num_threads, int64_t max_batch)
    : m_config(config), m_weights(weights), m_num_threads(num_threads), m_max_batch(std::max<int64_t>(1, max_batch)) {
  const auto n = static_cast<size_t>(m_max_batch);
  m_x.resize(n * config.embedding_length);
  m_xn.resize(n * config.embedding_length);
  m_q.resize(n * config.q_width());
  m_k.resize(n * config.k_width());
  m_v.resize(n * config.v_width());
  m_attn.resize(n * config.attention_output_width());
  m_proj.resize(n * config.embedding_length);
  m_gate.resize(n * config.feed_forward_length);
  m_up.resize(n * config.feed_forward_length);
  m_positions.resize(n);
  m_final.resize(static_cast<size_t>(config.embedding_length));
}

Status CpuForward::forward(std::span<const int32_t> tokens, int64_t first_position, KvCache& kv, float* logits) {
  if (tokens.empty()) return make_error(ErrorCode::InvalidArgument, "nothing to run: no tokens");
  if (first_position != kv.num_positions()) {
    return make_error(ErrorCode::InvalidArgument, "the forward pass starts at position " +
                                                      std::to_string(first_position) + " but the KV cache holds " +
                                                      std::to_string(kv.num_positions()));
  }
  const auto num_tokens = static_cast<int64_t>(tokens.size());
  if (first_position + num_tokens > kv.capacity()) {
    return make_error(ErrorCode::InvalidArgument,
                      "positions up to " + std::to_string(first_position + num_tokens) +
                          " do not fit a context of " + std::to_string(kv.capacity()));
  }
  m_recorder.mark();
  for (int64_t start = 0; start < num_tokens; start += m_max_batch) {
    const int64_t count = std::min(m_max_batch, num_tokens - start);
    IWB_RETURN_IF_ERROR(run_batch(tokens.data() + start, count, first_position + start, kv));
    kv.commit(first_position + start + count);
    if (logits && start + count == num_tokens) {
      IWB_RETURN_IF_ERROR(compute_logits(m_x.data() + (count - 1) * m_config.embedding_length, logits));
    }
  }
  return {};
}

Status CpuForward::run_batch(const int32_t* tokens, int64_t n, int64_t first_position, KvCache& kv) {
  const ModelConfig& c = m_config;
  EmbeddingArgs embd{m_weights.token_embd.type, m_weights.token_embd.data, c.vocab_size, c.embedding_length,
                     tokens, n, c.embedding_scale, m_x.data()};
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
  if (m_recorder.is_active()) {
    m_recorder.add(op_costs::embedding(m_weights.token_embd.type, n, c.embedding_length, c.embedding_scale != 1.0f));
  }
  for (int64_t t = 0; t < n; ++t) m_positions[t] = static_cast<int32_t>(first_position + t);
  for (int64_t il = 0; il < c.num_layers; ++il) {
    IWB_RETURN_IF_ERROR(attention_block(il, n, first_position, kv));
    IWB_RETURN_IF_ERROR(ffn_block(il, n));
  }
  return {};
}

Status CpuForward::matmul(const char* name, int64_t layer, const WeightMatrix& w, const float* input,
                          int64_t num_tokens, const std::vector<float>& bias, float* output, OpKind kind) {
  MatmulArgs args{w.type, w.data, w.in_features, w.out_features, input, num_tokens,
                  bias.empty() ? nullptr : bias.data(), output, m_num_threads};
  if (!iwb::matmul(args)) return kernel_failed((std::string("the ") + name + " matmul").c_str(), layer);
  if (m_recorder.is_active()) {
    m_recorder.add(op_costs::matmul(kind, name, static_cast<int>(layer), w.type, w.in_features, w.out_features,
                                    num_tokens, !bias.empty()));
  }
  return {};
}

Status CpuForward::attention_block(int64_t il, int64_t n, int64_t first_position, KvCache& kv) {
  const ModelConfig& c = m_config;
  const LayerWeights& w = m_weights.layers[static_cast<size_t>(il)];
  const bool is_sliding = c.is_sliding_layer[static_cast<size_t>(il)];

  const int layer = static_cast<int>(il);
  KernelRecorder& rec = m_recorder;
  if (!rmsnorm({m_x.data(), w.attn_norm.data(), m_xn.data(), n, c.embedding_length, c.rms_norm_eps})) {
    return kernel_failed("the attention norm", il);
  }
  if (rec.is_active()) rec.add(op_costs::rmsnorm("attn_norm", layer, n, c.embedding_length, n, true));
  IWB_RETURN_IF_ERROR(matmul("attn_q", il, w.wq, m_xn.data(), n, w.bq, m_q.data()));
  IWB_RETURN_IF_ERROR(matmul("attn_k", il, w.wk, m_xn.data(), n, w.bk, m_k.data()));
  IWB_RETURN_IF_ERROR(matmul("attn_v", il, w.wv, m_xn.data(), n, w.bv, m_v.data()));
  if (c.has_qk_norm) {
    // Per-head norms: every head of every token is one row of head_dim_k values.
    if (!rmsnorm({m_q.data(), w.q_norm.data(), m_q.data(), n * c.num_heads, c.head_dim_k, c.rms_norm_eps})) {
      return kernel_failed("the q norm", il);
    }
    if (rec.is_active()) rec.add(op_costs::rmsnorm("q_norm", layer, n * c.num_heads, c.head_dim_k, n, true));
    if (!rmsnorm({m_k.data(), w.k_norm.data(), m_k.data(), n * c.num_kv_heads, c.head_dim_k, c.rms_norm_eps})) {
      return kernel_failed("the k norm", il);
    }
    if (rec.is_active()) rec.add(op_costs::rmsnorm("k_norm", layer, n * c.num_kv_heads, c.head_dim_k, n, true));
  }
  RopeArgs rope_args{m_q.data(), n, c.num_heads, c.head_dim_k, c.rope_num_rotated, m_positions.data(), c.rope_layout,
                     is_sliding ? c.rope_freq_base_swa : c.rope_freq_base,
                     is_sliding ? c.rope_freq_scale_swa : c.rope_freq_scale,
                     m_weights.rope_freqs.empty() ? nullptr : m_weights.rope_freqs.data()};
  if (!rope(rope_args)) return kernel_failed("RoPE on queries", il);
  if (rec.is_active()) rec.add(op_costs::rope("rope_q", layer, n, c.num_heads, c.head_dim_k, c.rope_num_rotated));
  rope_args.data = m_k.data();
  rope_args.num_heads = c.num_kv_heads;
  if (!rope(rope_args)) return kernel_failed("RoPE on keys", il);
  if (rec.is_active()) rec.add(op_costs::rope("rope_k", layer, n, c.num_kv_heads, c.head_dim_k, c.rope_num_rotated));

  IWB_RETURN_IF_ERROR(kv.write(il, first_position, n, m_k.data(), m_v.data()));
  if (rec.is_active()) rec.add(op_costs::kv_write(layer, n, c.num_kv_heads, c.head_dim_k, c.head_dim_v));
  const KvLayerView view = kv.layer(il);
  AttentionArgs attn;
  attn.q = m_q.data();
  attn.k = view.k;
  attn.v = view.v;
  attn.k_row_stride = view.k_row_stride;
  attn.v_row_stride = view.v_row_stride;
  attn.num_kv = first_position + n;
  attn.positions = m_positions.data();
  attn.num_tokens = n;
  attn.num_heads = c.num_heads;
  attn.num_kv_heads = c.num_kv_heads;
  attn.head_dim = c.head_dim_k;
  attn.head_dim_v = c.head_dim_v;
  attn.scale = c.attention_scale;
  attn.sliding_window = is_sliding ? c.sliding_window : 0;
  attn.softcap = c.attention_softcap;
  attn.output = m_attn.data();
  attn.num_threads = m_num_threads;
  if (!attention(attn)) return kernel_failed("attention", il);
  if (rec.is_active()) {
    rec.add(op_costs::attention(layer, n, first_position, c.num_heads, c.num_kv_heads, c.head_dim_k, c.head_dim_v,
                                attn.sliding_window));
  }

  IWB_RETURN_IF_ERROR(matmul("attn_output", il, w.wo, m_attn.data(), n, w.bo, m_proj.data()));
  if (c.has_post_norms) {
    if (!rmsnorm({m_proj.data(), w.post_attention_norm.data(), m_proj.data(), n, c.embedding_length, c.rms_norm_eps})) {
      return kernel_failed("the post-attention norm", il);
    }
    if (rec.is_active()) rec.add(op_costs::rmsnorm("post_attention_norm", layer, n, c.embedding_length, n, true));
  }
  add_in_place(m_x.data(), m_proj.data(), n * c.embedding_length);
  if (rec.is_active()) rec.add(op_costs::add("attn_residual", layer, n, c.embedding_length));
  return {};
}

Status CpuForward::ffn_block(int64_t il, int64_t n) {
  const ModelConfig& c = m_config;
  const LayerWeights& w = m_weights.layers[static_cast<size_t>(il)];
  static const std::vector<float> kNoBias;
  const int layer = static_cast<int>(il);
  KernelRecorder& rec = m_recorder;
  if (!rmsnorm({m_x.data(), w.ffn_norm.data(), m_xn.data(), n, c.embedding_length, c.rms_norm_eps})) {
    return kernel_failed("the FFN norm", il);
  }
  if (rec.is_active()) rec.add(op_costs::rmsnorm("ffn_norm", layer, n, c.embedding_length, n, true));
  IWB_RETURN_IF_ERROR(matmul("ffn_gate", il, w.ffn_gate, m_xn.data(), n, kNoBias, m_gate.data()));
  IWB_RETURN_IF_ERROR(matmul("ffn_up", il, w.ffn_up, m_xn.data(), n, kNoBias, m_up.data()));
  if (!gated_activation({m_gate.data(), m_up.data(), m_gate.data(), n * c.feed_forward_length, c.ffn_activation,
                         m_num_threads})) {
    return kernel_failed("the FFN activation", il);
  }
  if (rec.is_active()) rec.add(op_costs::activation(layer, n, c.feed_forward_length, c.ffn_activation));
  IWB_RETURN_IF_ERROR(matmul("ffn_down", il, w.ffn_down, m_gate.data(), n, kNoBias, m_proj.data()));
  if (c.has_post_norms) {
    if (!rmsnorm({m_proj.data(), w.post_ffw_norm.data(), m_proj.data(), n, c.embedding_length, c.rms_norm_eps})) {
      return kernel_failed("the post-FFN norm", il);
    }
    if (rec.is_active()) rec.add(op_costs::rmsnorm("post_ffw_norm", layer, n, c.embedding_length, n, true));
  }
  add_in_place(m_x.data(), m_proj.data(), n * c.embedding_length);
  if (rec.is_active()) rec.add(op_costs::add("ffn_residual", layer, n, c.embedding_length));
  return {};
}

Status CpuForward::compute_logits(const float* hidden, float* logits) {
  const ModelConfig& c = m_config;
  if (!rmsnorm({hidden, m_weights.output_norm.data(), m_final.data(), 1, c.embedding_length, c.rms_norm_eps})) {
    return kernel_failed("the output norm", -1);
  }
  if (m_recorder.is_active()) m_recorder.add(op_costs::rmsnorm("output_norm", -1, 1, c.embedding_length, 1, true));
  static const std::vector<float> kNoBias;
  IWB_RETURN_IF_ERROR(matmul("output", -1, m_weights.output, m_final.data(), 1, kNoBias, logits, OpKind::Logits));
  if (c.final_logit_softcap > 0.0f) {
    for (int64_t i = 0; i < c.vocab_size; ++i) logits[i] = c.final_logit_softcap * std::tanh(logits[i] / c.final_logit_softcap);
    if (m_recorder.is_active()) m_recorder.add(op_costs::softcap(c.vocab_size));
  }
  return {};
}

}  // namespace iwb
