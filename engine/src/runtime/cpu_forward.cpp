// The CPU forward pass over one scheduler step (every sequence's tokens through each matmul
// together, attention per sequence through block tables). One layer function serves the three
// architectures: what differs between them (biases, q/k norms, post-norms, GeGLU vs SwiGLU, RoPE
// layout and bases, sliding windows, embedding scale) is data in ModelConfig and ModelWeights,
// as in llama.cpp's graphs.
// Each kernel call is followed by `if (m_recorder.is_active()) m_recorder.add(...)`: the
// profiler's records, built from the same arguments (profile/cost_model.cpp lists the same
// calls in the same order for its predictions).
#include "runtime/cpu_forward.h"

#include "iwb/engine/profile/op_costs.h"
#include "iwb/kernels/activations.h"
#include "iwb/kernels/embedding.h"
#include "iwb/kernels/matmul.h"
#include "iwb/kernels/paged_attention.h"
#include "iwb/kernels/rmsnorm.h"
#include "iwb/kernels/rope.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <initializer_list>
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

struct GroupProduct {
  const WeightMatrix* weight;
  const std::vector<float>* bias;
  float* output;
};

// Products of one input in one kernel call (q/k/v, gate/up): the input is quantized once and
// the threads fork and join once, which decode feels (a few microseconds per parallel region,
// tens with OMP_WAIT_POLICY=passive, against ~30 us per matrix of a 1.5B model).
bool matmul_one_input(std::initializer_list<GroupProduct> products, const float* input, int64_t num_tokens,
                      int num_threads, std::vector<uint8_t>& scratch, bool is_exact) {
  std::array<MatmulArgs, 3> args;
  if (products.size() > args.size()) return false;
  size_t count = 0;
  for (const GroupProduct& p : products) {
    const WeightMatrix& w = *p.weight;
    args[count] = MatmulArgs{w.type, w.data, w.in_features, w.out_features, input, num_tokens,
                             p.bias->empty() ? nullptr : p.bias->data(), p.output, num_threads};
    args[count].scratch = scratch.data();
    args[count].scratch_bytes = scratch.size();
    args[count].is_exact = is_exact;
    ++count;
  }
  return matmul_group({args.data(), count});
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
  m_final.resize(n * config.embedding_length);
  m_spans.reserve(n);
  size_t matmul_scratch = 0;
  auto need = [&](const WeightMatrix& w) {
    matmul_scratch = std::max(matmul_scratch, matmul_scratch_bytes(w.type, w.in_features, m_max_batch));
  };
  for (const LayerWeights& l : weights.layers) {
    for (const WeightMatrix* w : {&l.wq, &l.wk, &l.wv, &l.wo, &l.ffn_gate, &l.ffn_up, &l.ffn_down}) need(*w);
  }
  need(weights.output);
  m_matmul_scratch.resize(matmul_scratch);
}

uint64_t CpuForward::scratch_bytes() const {
  const size_t floats = m_x.size() + m_xn.size() + m_q.size() + m_k.size() + m_v.size() + m_attn.size() + m_proj.size() +
                        m_gate.size() + m_up.size() + m_final.size();
  return static_cast<uint64_t>(floats) * sizeof(float) + m_matmul_scratch.size();
}

Status CpuForward::check_batch(const FlatBatch& b, const PagedKvStorage& kv) const {
  const auto n = static_cast<int64_t>(b.tokens.size());
  if (n == 0) return make_error(ErrorCode::InvalidArgument, "nothing to run: no tokens");
  if (n > m_max_batch) {
    return make_error(ErrorCode::InvalidArgument, "a step of " + std::to_string(n) + " tokens exceeds the forward pass's " +
                                                      std::to_string(m_max_batch) + "-token scratch");
  }
  if (b.positions.size() != b.tokens.size() || b.slot_mapping.size() != b.tokens.size() ||
      b.token_sequences.size() != b.tokens.size() || b.logits_rows.size() > b.tokens.size()) {
    return make_error(ErrorCode::InvalidArgument, "the step's token arrays differ in length");
  }
  if (kv.shape().num_layers != m_config.num_layers || kv.k_row() != m_config.k_width() ||
      kv.v_row() != m_config.v_width()) {
    return make_error(ErrorCode::InvalidArgument, "the KV cache was made for another model shape");
  }
  for (const int32_t row : b.logits_rows) {
    if (row < 0 || row >= n) return make_error(ErrorCode::InvalidArgument, "a logits row is outside the step's tokens");
  }
  return {};
}

Status CpuForward::forward(const FlatBatch& batch, PagedKvStorage& kv, float* logits) {
  IWB_RETURN_IF_ERROR(check_batch(batch, kv));
  const ModelConfig& c = m_config;
  const auto n = static_cast<int64_t>(batch.tokens.size());
  m_recorder.mark();
  const int32_t* tokens = batch.tokens.data();
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
  for (int64_t il = 0; il < c.num_layers; ++il) {
    IWB_RETURN_IF_ERROR(attention_block(il, batch, kv));
    IWB_RETURN_IF_ERROR(ffn_block(il, n));
  }
  if (logits != nullptr && !batch.logits_rows.empty()) IWB_RETURN_IF_ERROR(compute_logits(batch, logits));
  return {};
}

Status CpuForward::matmul(const char* name, int64_t layer, const WeightMatrix& w, const float* input,
                          int64_t num_tokens, const std::vector<float>& bias, float* output, OpKind kind) {
  if (m_observer != nullptr) m_observer->observe_matmul_input(name, layer, input, num_tokens, w.in_features);
  MatmulArgs args{w.type, w.data, w.in_features, w.out_features, input, num_tokens,
                  bias.empty() ? nullptr : bias.data(), output, m_num_threads};
  args.scratch = m_matmul_scratch.data();
  args.scratch_bytes = m_matmul_scratch.size();
  args.is_exact = m_is_batch_invariant;
  if (!iwb::matmul(args)) return kernel_failed((std::string("the ") + name + " matmul").c_str(), layer);
  if (m_recorder.is_active()) {
    m_recorder.add(op_costs::matmul(kind, name, static_cast<int>(layer), w.type, w.in_features, w.out_features,
                                    num_tokens, !bias.empty()));
  }
  return {};
}

Status CpuForward::attention_block(int64_t il, const FlatBatch& batch, PagedKvStorage& kv) {
  const ModelConfig& c = m_config;
  const auto n = static_cast<int64_t>(batch.tokens.size());
  const LayerWeights& w = m_weights.layers[static_cast<size_t>(il)];
  const bool is_sliding = c.is_sliding_layer[static_cast<size_t>(il)];

  const int layer = static_cast<int>(il);
  KernelRecorder& rec = m_recorder;
  if (!rmsnorm({m_x.data(), w.attn_norm.data(), m_xn.data(), n, c.embedding_length, c.rms_norm_eps})) {
    return kernel_failed("the attention norm", il);
  }
  if (rec.is_active()) rec.add(op_costs::rmsnorm("attn_norm", layer, n, c.embedding_length, n, true));
  // One call for q, k and v, except while profiling (each matmul keeps its own record and time)
  // or observing inputs.
  if (!rec.is_active() && m_observer == nullptr) {
    if (!matmul_one_input({{&w.wq, &w.bq, m_q.data()}, {&w.wk, &w.bk, m_k.data()}, {&w.wv, &w.bv, m_v.data()}},
                          m_xn.data(), n, m_num_threads, m_matmul_scratch, m_is_batch_invariant)) {
      return kernel_failed("the attn_q/attn_k/attn_v matmuls", il);
    }
  } else {
    IWB_RETURN_IF_ERROR(matmul("attn_q", il, w.wq, m_xn.data(), n, w.bq, m_q.data()));
    IWB_RETURN_IF_ERROR(matmul("attn_k", il, w.wk, m_xn.data(), n, w.bk, m_k.data()));
    IWB_RETURN_IF_ERROR(matmul("attn_v", il, w.wv, m_xn.data(), n, w.bv, m_v.data()));
  }
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
  RopeArgs rope_args{m_q.data(), n, c.num_heads, c.head_dim_k, c.rope_num_rotated, batch.positions.data(), c.rope_layout,
                     is_sliding ? c.rope_freq_base_swa : c.rope_freq_base,
                     is_sliding ? c.rope_freq_scale_swa : c.rope_freq_scale,
                     m_weights.rope_freqs.empty() ? nullptr : m_weights.rope_freqs.data()};
  if (!rope(rope_args)) return kernel_failed("RoPE on queries", il);
  if (rec.is_active()) rec.add(op_costs::rope("rope_q", layer, n, c.num_heads, c.head_dim_k, c.rope_num_rotated));
  rope_args.data = m_k.data();
  rope_args.num_heads = c.num_kv_heads;
  if (!rope(rope_args)) return kernel_failed("RoPE on keys", il);
  if (rec.is_active()) rec.add(op_costs::rope("rope_k", layer, n, c.num_kv_heads, c.head_dim_k, c.rope_num_rotated));

  IWB_RETURN_IF_ERROR(kv.write(il, batch.slot_mapping, m_k.data(), m_v.data()));
  if (rec.is_active()) rec.add(op_costs::kv_write(layer, n, c.num_kv_heads, c.head_dim_k, c.head_dim_v));
  // Every sequence's queries over its own keys and values, through its block table.
  PagedAttentionArgs attn;
  attn.q = m_q.data();
  attn.k_cache = kv.k_data(il);
  attn.v_cache = kv.v_data(il);
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
  attn.num_kv_heads = c.num_kv_heads;
  attn.head_dim = c.head_dim_k;
  attn.head_dim_v = c.head_dim_v;
  attn.scale = c.attention_scale;
  attn.sliding_window = is_sliding ? c.sliding_window : 0;
  attn.softcap = c.attention_softcap;
  attn.output = m_attn.data();
  attn.num_threads = m_num_threads;
  attn.kv_type = kv.type();
  if (!paged_attention(attn)) return kernel_failed("paged attention", il);
  if (rec.is_active()) {
    // Tokens of a sequence are contiguous in the batch, at consecutive positions.
    m_spans.clear();
    for (int64_t t = 0; t < n; ++t) {
      if (t == 0 || batch.token_sequences[t] != batch.token_sequences[t - 1]) m_spans.push_back({0, batch.positions[t]});
      ++m_spans.back().num_tokens;
    }
    rec.add(op_costs::batched_attention(layer, m_spans, c.num_heads, c.num_kv_heads, c.head_dim_k, c.head_dim_v,
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
  if (!rec.is_active() && m_observer == nullptr) {
    if (!matmul_one_input({{&w.ffn_gate, &kNoBias, m_gate.data()}, {&w.ffn_up, &kNoBias, m_up.data()}}, m_xn.data(), n,
                          m_num_threads, m_matmul_scratch, m_is_batch_invariant)) {
      return kernel_failed("the ffn_gate/ffn_up matmuls", il);
    }
  } else {
    IWB_RETURN_IF_ERROR(matmul("ffn_gate", il, w.ffn_gate, m_xn.data(), n, kNoBias, m_gate.data()));
    IWB_RETURN_IF_ERROR(matmul("ffn_up", il, w.ffn_up, m_xn.data(), n, kNoBias, m_up.data()));
  }
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

Status CpuForward::compute_logits(const FlatBatch& batch, float* logits) {
  const ModelConfig& c = m_config;
  const int64_t d = c.embedding_length;
  const auto rows = static_cast<int64_t>(batch.logits_rows.size());
  // Only the rows that sample go through the classifier, gathered first (the copy is not a kernel).
  for (int64_t r = 0; r < rows; ++r) {
    const float* hidden = m_x.data() + static_cast<int64_t>(batch.logits_rows[r]) * d;
    std::copy(hidden, hidden + d, m_xn.data() + r * d);
  }
  if (!rmsnorm({m_xn.data(), m_weights.output_norm.data(), m_final.data(), rows, d, c.rms_norm_eps})) {
    return kernel_failed("the output norm", -1);
  }
  if (m_recorder.is_active()) m_recorder.add(op_costs::rmsnorm("output_norm", -1, rows, d, rows, true));
  static const std::vector<float> kNoBias;
  IWB_RETURN_IF_ERROR(matmul("output", -1, m_weights.output, m_final.data(), rows, kNoBias, logits, OpKind::Logits));
  if (c.final_logit_softcap > 0.0f) {
    const float cap = c.final_logit_softcap;
    for (int64_t i = 0; i < rows * c.vocab_size; ++i) logits[i] = cap * std::tanh(logits[i] / cap);
    if (m_recorder.is_active()) m_recorder.add(op_costs::softcap(c.vocab_size, rows));
  }
  return {};
}

}  // namespace iwb
