// predict_step: the CPU forward pass's kernel sequence (runtime/cpu_forward.cpp), written out
// from a ModelShape. A kernel added to the forward pass must be added here too; the profiler
// test compares the two record by record.
#include "iwb/engine/profile/cost_model.h"

#include "iwb/engine/profile/op_costs.h"

#include <algorithm>

namespace iwb {
namespace {

int64_t records_per_layer(const ModelConfig& c) {
  // norm, q, k, v, rope q, rope k, kv write, attention, output, residual; norm, gate, up,
  // activation, down, residual.
  return 16 + (c.has_qk_norm ? 2 : 0) + (c.has_post_norms ? 2 : 0);
}

void add_layer(const ModelShape& m, int64_t il, int64_t n, int64_t first_position, std::vector<KernelRecord>* out) {
  const ModelConfig& c = m.config;
  const LayerWeightTypes& t = m.layers[static_cast<size_t>(il)];
  const int layer = static_cast<int>(il);
  const int64_t d = c.embedding_length;
  auto& r = *out;
  r.push_back(op_costs::rmsnorm("attn_norm", layer, n, d, n, true));
  r.push_back(op_costs::matmul(OpKind::Matmul, "attn_q", layer, t.wq, d, c.q_width(), n, t.has_bq));
  r.push_back(op_costs::matmul(OpKind::Matmul, "attn_k", layer, t.wk, d, c.k_width(), n, t.has_bk));
  r.push_back(op_costs::matmul(OpKind::Matmul, "attn_v", layer, t.wv, d, c.v_width(), n, t.has_bv));
  if (c.has_qk_norm) {
    r.push_back(op_costs::rmsnorm("q_norm", layer, n * c.num_heads, c.head_dim_k, n, true));
    r.push_back(op_costs::rmsnorm("k_norm", layer, n * c.num_kv_heads, c.head_dim_k, n, true));
  }
  r.push_back(op_costs::rope("rope_q", layer, n, c.num_heads, c.head_dim_k, c.rope_num_rotated));
  r.push_back(op_costs::rope("rope_k", layer, n, c.num_kv_heads, c.head_dim_k, c.rope_num_rotated));
  r.push_back(op_costs::kv_write(layer, n, c.num_kv_heads, c.head_dim_k, c.head_dim_v));
  const bool is_sliding = static_cast<size_t>(il) < c.is_sliding_layer.size() && c.is_sliding_layer[il];
  r.push_back(op_costs::attention(layer, n, first_position, c.num_heads, c.num_kv_heads, c.head_dim_k, c.head_dim_v,
                                  is_sliding ? c.sliding_window : 0));
  r.push_back(op_costs::matmul(OpKind::Matmul, "attn_output", layer, t.wo, c.attention_output_width(), d, n, t.has_bo));
  if (c.has_post_norms) r.push_back(op_costs::rmsnorm("post_attention_norm", layer, n, d, n, true));
  r.push_back(op_costs::add("attn_residual", layer, n, d));
  r.push_back(op_costs::rmsnorm("ffn_norm", layer, n, d, n, true));
  r.push_back(op_costs::matmul(OpKind::Matmul, "ffn_gate", layer, t.ffn_gate, d, c.feed_forward_length, n, false));
  r.push_back(op_costs::matmul(OpKind::Matmul, "ffn_up", layer, t.ffn_up, d, c.feed_forward_length, n, false));
  r.push_back(op_costs::activation(layer, n, c.feed_forward_length, c.ffn_activation));
  r.push_back(op_costs::matmul(OpKind::Matmul, "ffn_down", layer, t.ffn_down, c.feed_forward_length, d, n, false));
  if (c.has_post_norms) r.push_back(op_costs::rmsnorm("post_ffw_norm", layer, n, d, n, true));
  r.push_back(op_costs::add("ffn_residual", layer, n, d));
}

Status check(const ModelShape& m, const StepScenario& s) {
  if (s.num_tokens < 1) return make_error(ErrorCode::InvalidArgument, "a step needs at least one token");
  if (s.num_cached_tokens < 0) return make_error(ErrorCode::InvalidArgument, "the cached token count cannot be negative");
  if (s.max_batch_tokens < 0) return make_error(ErrorCode::InvalidArgument, "the batch size cannot be negative");
  if (s.has_logits && (s.num_logits_rows < 1 || s.num_logits_rows > s.num_tokens)) {
    return make_error(ErrorCode::InvalidArgument, "the classifier runs for 1 to num_tokens rows");
  }
  if (m.config.num_layers <= 0 || static_cast<int64_t>(m.layers.size()) != m.config.num_layers) {
    return make_error(ErrorCode::InvalidArgument, "model shape '" + m.name + "' lists " +
                                                      std::to_string(m.layers.size()) + " layers' weight types for " +
                                                      std::to_string(m.config.num_layers) + " layers");
  }
  return {};
}

}  // namespace

int64_t num_step_records(const ModelConfig& c, int64_t num_tokens, int64_t max_batch_tokens, bool has_logits) {
  const int64_t batch = max_batch_tokens > 0 ? max_batch_tokens : std::max<int64_t>(num_tokens, 1);
  const int64_t num_batches = (std::max<int64_t>(num_tokens, 1) + batch - 1) / batch;
  const int64_t logits = has_logits ? 2 + (c.final_logit_softcap > 0.0f ? 1 : 0) : 0;
  return num_batches * (1 + c.num_layers * records_per_layer(c)) + logits;
}

Result<std::vector<KernelRecord>> predict_step(const ModelShape& m, const StepScenario& s) {
  IWB_RETURN_IF_ERROR(check(m, s));
  const ModelConfig& c = m.config;
  std::vector<KernelRecord> out;
  out.reserve(static_cast<size_t>(num_step_records(c, s.num_tokens, s.max_batch_tokens, s.has_logits)));
  const int64_t batch = s.max_batch_tokens > 0 ? s.max_batch_tokens : s.num_tokens;
  for (int64_t start = 0; start < s.num_tokens; start += batch) {
    const int64_t n = std::min(batch, s.num_tokens - start);
    out.push_back(op_costs::embedding(m.token_embd_type, n, c.embedding_length, c.embedding_scale != 1.0f));
    for (int64_t il = 0; il < c.num_layers; ++il) add_layer(m, il, n, s.num_cached_tokens + start, &out);
  }
  if (s.has_logits) {
    const int64_t rows = s.num_logits_rows;
    out.push_back(op_costs::rmsnorm("output_norm", -1, rows, c.embedding_length, rows, true));
    out.push_back(op_costs::matmul(OpKind::Logits, "output", -1, m.output_type, c.embedding_length, c.vocab_size, rows,
                                   false));
    if (c.final_logit_softcap > 0.0f) out.push_back(op_costs::softcap(c.vocab_size, rows));
  }
  for (KernelRecord& r : out) r.phase = s.phase;
  return out;
}

StepCost total_cost(const std::vector<KernelRecord>& records) {
  StepCost t;
  for (const KernelRecord& r : records) {
    t.flops += r.flops;
    t.bytes += r.bytes;
    t.seconds += r.seconds;
  }
  return t;
}

Result<GenerationCost> predict_generation(const ModelShape& m, int64_t num_prompt_tokens, int64_t num_generated_tokens,
                                          int64_t max_batch_tokens) {
  if (num_prompt_tokens < 1) return make_error(ErrorCode::InvalidArgument, "a request needs at least one prompt token");
  if (num_generated_tokens < 0) return make_error(ErrorCode::InvalidArgument, "the generated token count cannot be negative");
  GenerationCost g;
  Result<std::vector<KernelRecord>> prefill =
      predict_step(m, {Phase::Prefill, num_prompt_tokens, 0, max_batch_tokens, true});
  if (!prefill) return prefill.status();
  g.prefill = total_cost(*prefill);
  g.num_decode_steps = std::max<int64_t>(0, num_generated_tokens - 1);
  if (g.num_decode_steps == 0) return g;

  // Only attention depends on the context: price the first decode step whole, then add each
  // later step's attention difference instead of listing every step's kernels.
  Result<std::vector<KernelRecord>> first = predict_step(m, {Phase::Decode, 1, num_prompt_tokens, 0, true});
  if (!first) return first.status();
  const StepCost first_cost = total_cost(*first);
  const ModelConfig& c = m.config;
  auto attention_cost = [&](int64_t cached) {
    StepCost a;
    for (int64_t il = 0; il < c.num_layers; ++il) {
      const bool is_sliding = static_cast<size_t>(il) < c.is_sliding_layer.size() && c.is_sliding_layer[il];
      const KernelRecord r = op_costs::attention(static_cast<int>(il), 1, cached, c.num_heads, c.num_kv_heads,
                                                 c.head_dim_k, c.head_dim_v, is_sliding ? c.sliding_window : 0);
      a.flops += r.flops;
      a.bytes += r.bytes;
    }
    return a;
  };
  const StepCost first_attention = attention_cost(num_prompt_tokens);
  for (int64_t i = 0; i < g.num_decode_steps; ++i) {
    const StepCost a = attention_cost(num_prompt_tokens + i);
    g.decode.flops += first_cost.flops - first_attention.flops + a.flops;
    g.decode.bytes += first_cost.bytes - first_attention.bytes + a.bytes;
  }
  return g;
}

}  // namespace iwb
