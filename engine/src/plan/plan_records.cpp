// The kernel records of a plan's ops (op_costs.h's formulas from the op's own shapes): the
// profiler's records on every backend and the cost model's predictions come from here.
#include "iwb/engine/plan/forward_plan.h"

#include <algorithm>
#include <cmath>

namespace iwb {

int num_op_records(const PlanOp& op) {
  switch (op.kind) {
    case PlanOpKind::Matmuls:
    case PlanOpKind::ExpertMatmuls:
    case PlanOpKind::HeadMatmuls: return op.num_products;
    case PlanOpKind::Rope: return op.is_query_only ? 1 : 2;
    case PlanOpKind::GatherRows:
    case PlanOpKind::Concat:
    case PlanOpKind::SplitQueryGate: return 0;
    default: return 1;
  }
}

double expected_active_experts(const ModelConfig& c, int64_t num_tokens) {
  if (c.num_experts <= 0) return 0;
  const double e = static_cast<double>(c.num_experts);
  const double miss = 1.0 - static_cast<double>(c.num_experts_used) / e;  // one token skips a given expert
  return e * (1.0 - std::pow(miss, static_cast<double>(num_tokens)));
}

KernelRecord op_record(const ForwardPlan& plan, const PlanOp& op, int part, int64_t num_rows,
                       std::span<const op_costs::AttentionSpan> spans, std::optional<int64_t> num_active_experts) {
  const ModelConfig& c = plan.config;
  const int layer = op.layer;
  switch (op.kind) {
    case PlanOpKind::Embedding:
      return op_costs::embedding(plan.token_embd_type, num_rows, c.embedding_length, c.embedding_scale != 1.0f);
    case PlanOpKind::RmsNorm:
      return op_costs::rmsnorm(op.name, layer, num_rows * op.rows_per_token, op.width, num_rows, true);
    case PlanOpKind::Matmuls: {
      const PlanProduct& p = op.products[static_cast<size_t>(part)];
      return op_costs::matmul(op.matmul_kind, p.name, layer, p.type, p.in_features, p.out_features, num_rows,
                              p.has_bias);
    }
    case PlanOpKind::Rope: {
      const int64_t head = c.layer_head_dim_k(layer), rotated = c.layer_rope_num_rotated(layer);
      return part == 0 ? op_costs::rope("rope_q", layer, num_rows, c.num_heads, head, rotated)
                       : op_costs::rope("rope_k", layer, num_rows, c.layer_num_kv_heads(layer), head, rotated);
    }
    // Latent attention's values are its keys' first values: the cache holds (and reads) keys
    // only, as its f16 default stores them (a cache of two types keeps values apart).
    case PlanOpKind::KvWrite:
      return op_costs::kv_write(layer, num_rows, c.layer_num_kv_heads(layer), c.layer_head_dim_k(layer),
                                c.layer_head_dim_v(layer), c.has_latent_attention());
    case PlanOpKind::Attention:
      return op_costs::batched_attention(layer, spans, c.num_heads, c.layer_num_kv_heads(layer),
                                         c.layer_head_dim_k(layer), c.layer_head_dim_v(layer),
                                         op.is_sliding ? c.sliding_window : 0, c.has_latent_attention());
    case PlanOpKind::GatedActivation:
      return op_costs::activation(layer, num_rows * op.rows_per_token, op.width, c.ffn_activation);
    case PlanOpKind::ResidualAdd:
    case PlanOpKind::LayerScale: return op_costs::add(op.name, layer, num_rows, c.embedding_length);
    case PlanOpKind::PerLayerInputs:  // a norm of every layer's slice, the embedding rows added
      return op_costs::rmsnorm(op.name, layer, num_rows * op.rows_per_token, op.width, num_rows, true);
    case PlanOpKind::Softcap: return op_costs::softcap(c.vocab_size, num_rows);
    case PlanOpKind::ExpertRouting:
      return op_costs::expert_gating(layer, num_rows, c.num_experts, c.num_experts_used, c.embedding_length);
    case PlanOpKind::ExpertMatmuls: {
      const PlanProduct& p = op.products[static_cast<size_t>(part)];
      const double active =
          num_active_experts ? static_cast<double>(*num_active_experts) : expected_active_experts(c, num_rows);
      return op_costs::expert_matmul(p.name, layer, p.type, p.in_features, p.out_features, num_rows, c.num_experts_used,
                                     active);
    }
    case PlanOpKind::ExpertCombine:
      return op_costs::expert_combine(layer, num_rows, c.num_experts_used, c.embedding_length);
    case PlanOpKind::LatentKv: return op_costs::rmsnorm(op.name, layer, num_rows, op.width, num_rows, true);
    case PlanOpKind::HeadMatmuls: {
      // Every head's matrix over every token: the bytes of num_heads matrices, a matmul all the same.
      const PlanProduct& p = op.products[static_cast<size_t>(part)];
      KernelRecord r = op_costs::expert_matmul(p.name, layer, p.type, p.in_features, p.out_features, num_rows,
                                               op.rows_per_token, static_cast<double>(op.rows_per_token));
      r.kind = OpKind::Matmul;
      r.shape.num_experts = 0;
      r.shape.num_experts_used = 0;
      r.shape.num_heads = static_cast<int32_t>(op.rows_per_token);
      return r;
    }
    case PlanOpKind::OutputGate: return op_costs::output_gate(layer, num_rows, op.width);
    case PlanOpKind::SharedExpertGate: return op_costs::shared_expert_gate(layer, num_rows, op.width);
    // Each sequence of the step runs its own recurrence (the cost model's prediction: one).
    case PlanOpKind::ShortConv:
      return op_costs::short_conv(layer, num_rows, std::max<int64_t>(1, static_cast<int64_t>(spans.size())),
                                  c.linear_conv_channels(), c.linear_conv_kernel);
    case PlanOpKind::DeltaNet:
      return op_costs::delta_net(layer, num_rows, std::max<int64_t>(1, static_cast<int64_t>(spans.size())),
                                 c.linear_num_key_heads, c.linear_num_value_heads, c.linear_head_dim);
    case PlanOpKind::GatherRows:
    case PlanOpKind::Concat:
    case PlanOpKind::SplitQueryGate: break;
  }
  return {};
}

int64_t num_plan_records(const ForwardPlan& plan, bool has_logits) {
  int64_t n = 0;
  for (const PlanOp& op : plan.body) n += num_op_records(op);
  if (has_logits) {
    for (const PlanOp& op : plan.logits) n += num_op_records(op);
  }
  return n;
}

}  // namespace iwb
