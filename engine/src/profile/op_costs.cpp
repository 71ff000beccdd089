// The cost formulas of each kernel kind (see op_costs.h for what is counted and why).
#include "iwb/engine/profile/op_costs.h"

#include <algorithm>
#include <cmath>

namespace iwb::op_costs {
namespace {

double d(int64_t v) { return static_cast<double>(v); }

KernelRecord base(OpKind kind, const char* name, int layer, GgmlType type, int64_t num_tokens) {
  KernelRecord r;
  r.kind = kind;
  r.name = name;
  r.layer = static_cast<int16_t>(layer);
  r.data_type = type;
  r.shape.num_tokens = num_tokens;
  return r;
}

// Bytes of `num_rows` rows of `row_length` values stored as `type`; rows that are not whole
// blocks (refused by the kernels) are counted at the type's average density.
double stored_bytes(GgmlType type, int64_t row_length, int64_t num_rows) {
  if (const auto row = ggml_row_bytes(type, row_length)) return static_cast<double>(*row) * d(num_rows);
  const GgmlTypeTraits& t = ggml_type_traits(type);
  return d(row_length) * d(num_rows) * static_cast<double>(t.bytes_per_block) / d(t.block_size);
}

}  // namespace

KernelRecord matmul(OpKind kind, const char* name, int layer, GgmlType weight_type, int64_t in_features,
                    int64_t out_features, int64_t num_tokens, bool has_bias) {
  KernelRecord r = base(kind, name, layer, weight_type, num_tokens);
  r.shape.rows = out_features;
  r.shape.cols = in_features;
  r.flops = 2.0 * d(num_tokens) * d(in_features) * d(out_features);
  r.bytes = stored_bytes(weight_type, in_features, out_features) + 4.0 * d(num_tokens) * d(in_features + out_features);
  if (has_bias) {
    r.flops += d(num_tokens) * d(out_features);
    r.bytes += 4.0 * d(out_features);
  }
  return r;
}

KernelRecord rmsnorm(const char* name, int layer, int64_t num_rows, int64_t dim, int64_t num_tokens, bool has_weight) {
  KernelRecord r = base(OpKind::RmsNorm, name, layer, GgmlType::F32, num_tokens);
  r.shape.rows = num_rows;
  r.shape.cols = dim;
  const double n = d(num_rows) * d(dim);
  r.flops = 4.0 * n;
  r.bytes = 8.0 * n + (has_weight ? 4.0 * d(dim) : 0.0);
  return r;
}

KernelRecord rope(const char* name, int layer, int64_t num_tokens, int64_t num_heads, int64_t head_dim,
                  int64_t num_rotated) {
  KernelRecord r = base(OpKind::Rope, name, layer, GgmlType::F32, num_tokens);
  r.shape.num_heads = static_cast<int32_t>(num_heads);
  r.shape.head_dim = static_cast<int32_t>(head_dim);
  r.flops = 3.0 * d(num_tokens) * d(num_heads) * d(num_rotated);
  r.bytes = 8.0 * d(num_tokens) * d(num_heads) * d(head_dim);
  return r;
}

KernelRecord kv_write(int layer, int64_t num_tokens, int64_t num_kv_heads, int64_t head_dim, int64_t head_dim_v,
                      bool is_value_in_key) {
  KernelRecord r = base(OpKind::KvWrite, "kv_write", layer, GgmlType::F16, num_tokens);
  r.shape.num_kv_heads = static_cast<int32_t>(num_kv_heads);
  r.shape.head_dim = static_cast<int32_t>(head_dim);
  r.shape.head_dim_v = static_cast<int32_t>(head_dim_v);
  const double elements = d(num_tokens) * d(num_kv_heads) * d(head_dim + (is_value_in_key ? 0 : head_dim_v));
  r.flops = 0;
  r.bytes = (4.0 + 2.0) * elements;
  return r;
}

KernelRecord attention(int layer, int64_t num_tokens, int64_t first_position, int64_t num_heads, int64_t num_kv_heads,
                       int64_t head_dim, int64_t head_dim_v, int64_t sliding_window, bool is_value_in_key) {
  KernelRecord r = base(OpKind::Attention, "attention", layer, GgmlType::F16, num_tokens);
  const int64_t last_position = first_position + num_tokens - 1;
  r.shape.num_kv = last_position + 1;
  r.shape.num_heads = static_cast<int32_t>(num_heads);
  r.shape.num_kv_heads = static_cast<int32_t>(num_kv_heads);
  r.shape.head_dim = static_cast<int32_t>(head_dim);
  r.shape.head_dim_v = static_cast<int32_t>(head_dim_v);
  r.shape.window = static_cast<int32_t>(sliding_window);
  // Keys a query at position p sees: p+1 (causal), at most the window.
  double scores = 0;
  for (int64_t p = first_position; p <= last_position; ++p) {
    scores += d(sliding_window > 0 ? std::min(p + 1, sliding_window) : p + 1);
  }
  r.flops = d(num_heads) * scores * (2.0 * d(head_dim + head_dim_v) + 5.0);
  const int64_t first_visible = sliding_window > 0 ? std::max<int64_t>(0, first_position - sliding_window + 1) : 0;
  const double rows = d(last_position - first_visible + 1);
  r.bytes = 2.0 * rows * d(num_kv_heads) * d(head_dim + (is_value_in_key ? 0 : head_dim_v)) +
            4.0 * d(num_tokens) * d(num_heads) * d(head_dim + head_dim_v);
  return r;
}

KernelRecord batched_attention(int layer, std::span<const AttentionSpan> spans, int64_t num_heads, int64_t num_kv_heads,
                               int64_t head_dim, int64_t head_dim_v, int64_t sliding_window, bool is_value_in_key) {
  KernelRecord r = base(OpKind::Attention, "attention", layer, GgmlType::F16, 0);
  for (const AttentionSpan& s : spans) {
    const KernelRecord one = attention(layer, s.num_tokens, s.first_position, num_heads, num_kv_heads, head_dim,
                                       head_dim_v, sliding_window, is_value_in_key);
    if (r.shape.num_tokens == 0)
      r.shape = one.shape;
    else
      r.shape.num_tokens += one.shape.num_tokens;
    r.shape.num_kv = std::max(r.shape.num_kv, one.shape.num_kv);
    r.flops += one.flops;
    r.bytes += one.bytes;
  }
  return r;
}

KernelRecord activation(int layer, int64_t num_tokens, int64_t n_ff, GatedActivation kind) {
  const char* name = kind == GatedActivation::SiLU        ? "swiglu"
                     : kind == GatedActivation::SwigluOai ? "swiglu_oai"
                                                          : "geglu";
  KernelRecord r = base(OpKind::Activation, name, layer, GgmlType::F32, num_tokens);
  r.shape.cols = n_ff;
  const double n = d(num_tokens) * d(n_ff);
  // As gated_activation_cost counts them.
  r.flops = (kind == GatedActivation::GeluTanh ? 9.0 : kind == GatedActivation::SwigluOai ? 8.0 : 5.0) * n;
  r.bytes = 12.0 * n;
  return r;
}

KernelRecord add(const char* name, int layer, int64_t num_tokens, int64_t dim) {
  KernelRecord r = base(OpKind::Add, name, layer, GgmlType::F32, num_tokens);
  r.shape.cols = dim;
  const double n = d(num_tokens) * d(dim);
  r.flops = n;
  r.bytes = 12.0 * n;
  return r;
}

KernelRecord embedding(GgmlType table_type, int64_t num_tokens, int64_t dim, bool is_scaled) {
  KernelRecord r = base(OpKind::Embedding, "token_embd", -1, table_type, num_tokens);
  r.shape.cols = dim;
  const double n = d(num_tokens) * d(dim);
  r.flops = is_scaled ? n : 0.0;
  r.bytes = stored_bytes(table_type, dim, num_tokens) + 4.0 * n + 4.0 * d(num_tokens);
  return r;
}

KernelRecord softcap(int64_t vocab_size, int64_t num_rows) {
  KernelRecord r = base(OpKind::Softcap, "logit_softcap", -1, GgmlType::F32, num_rows);
  r.shape.cols = vocab_size;
  r.flops = 3.0 * d(vocab_size) * d(num_rows);
  r.bytes = 8.0 * d(vocab_size) * d(num_rows);
  return r;
}

KernelRecord expert_matmul(const char* name, int layer, GgmlType weight_type, int64_t in_features, int64_t out_features,
                           int64_t num_tokens, int64_t num_experts_used, double num_active_experts) {
  KernelRecord r = base(OpKind::ExpertMatmul, name, layer, weight_type, num_tokens);
  r.shape.rows = out_features;
  r.shape.cols = in_features;
  r.shape.num_experts = static_cast<int32_t>(std::lround(num_active_experts));
  r.shape.num_experts_used = static_cast<int32_t>(num_experts_used);
  const double rows = d(num_tokens) * d(num_experts_used);
  r.flops = 2.0 * rows * d(in_features) * d(out_features);
  r.bytes = num_active_experts * stored_bytes(weight_type, in_features, out_features) +
            4.0 * rows * d(in_features + out_features);
  return r;
}

KernelRecord expert_gating(int layer, int64_t num_tokens, int64_t num_experts, int64_t num_experts_used, int64_t dim) {
  KernelRecord r = base(OpKind::Softmax, "ffn_moe_gating", layer, GgmlType::F32, num_tokens);
  r.shape.rows = num_tokens;
  r.shape.cols = num_experts;
  const double routed = d(num_tokens) * d(num_experts_used);
  r.flops = 5.0 * d(num_tokens) * d(num_experts) + 2.0 * routed;
  r.bytes = 4.0 * d(num_tokens) * d(num_experts) + 8.0 * routed + 4.0 * d(num_tokens) * d(dim) + 4.0 * routed * d(dim);
  return r;
}

KernelRecord expert_combine(int layer, int64_t num_tokens, int64_t num_experts_used, int64_t dim) {
  KernelRecord r = base(OpKind::Add, "ffn_moe_combine", layer, GgmlType::F32, num_tokens);
  r.shape.cols = dim;
  const double routed = d(num_tokens) * d(num_experts_used);
  r.flops = 2.0 * routed * d(dim);
  r.bytes = 4.0 * routed * d(dim) + 4.0 * routed + 4.0 * d(num_tokens) * d(dim);
  return r;
}

KernelRecord output_gate(int layer, int64_t num_tokens, int64_t width) {
  KernelRecord r = base(OpKind::Activation, "attn_output_gate", layer, GgmlType::F32, num_tokens);
  r.shape.cols = width;
  const double n = d(num_tokens) * d(width);
  r.flops = 5.0 * n;
  r.bytes = 12.0 * n;
  return r;
}

KernelRecord shared_expert_gate(int layer, int64_t num_tokens, int64_t dim) {
  KernelRecord r = base(OpKind::Activation, "ffn_shexp_gate", layer, GgmlType::F32, num_tokens);
  r.shape.cols = dim;
  r.flops = d(num_tokens) * (3.0 * d(dim) + 5.0);
  r.bytes = 16.0 * d(num_tokens) * d(dim) + 4.0 * d(dim);
  return r;
}

// The kernels count one call (one sequence); a step runs one call per sequence, each reading and
// writing its own state.
KernelRecord short_conv(int layer, int64_t num_tokens, int64_t num_sequences, int64_t channels, int64_t kernel) {
  KernelRecord r = base(OpKind::Recurrent, "ssm_conv", layer, GgmlType::F32, num_tokens);
  r.shape.rows = channels;
  r.shape.cols = kernel;
  const double n = d(num_tokens) * d(channels);
  const double state_bytes = 8.0 * d((kernel - 1) * channels);
  r.flops = n * (2.0 * d(kernel) + 4.0);  // the taps, then SiLU
  r.bytes = 8.0 * n + state_bytes * d(num_sequences) + 4.0 * d(channels * kernel);
  return r;
}

KernelRecord delta_net(int layer, int64_t num_tokens, int64_t num_sequences, int64_t num_key_heads,
                       int64_t num_value_heads, int64_t head_dim) {
  KernelRecord r = base(OpKind::Recurrent, "delta_net", layer, GgmlType::F32, num_tokens);
  r.shape.rows = num_value_heads;
  r.shape.cols = head_dim;
  r.shape.num_heads = static_cast<int32_t>(num_value_heads);
  r.shape.head_dim = static_cast<int32_t>(head_dim);
  const double state_bytes = 8.0 * d(num_value_heads) * d(head_dim) * d(head_dim);
  const double width = d((2 * num_key_heads + num_value_heads) * head_dim);
  r.flops = 7.0 * d(num_tokens) * d(num_value_heads) * d(head_dim) * d(head_dim);
  r.bytes = state_bytes * d(num_sequences) +
            4.0 * d(num_tokens) * (width + 2.0 * d(num_value_heads) + d(num_value_heads) * d(head_dim));
  return r;
}

}  // namespace iwb::op_costs
