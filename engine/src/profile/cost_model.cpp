// predict_step: the forward plan's records (plan/forward_plan.h) from a ModelShape, the same
// walk the backends make; the profiler test compares the two record by record.
#include "iwb/engine/profile/cost_model.h"

#include "iwb/engine/profile/metrics.h"
#include "iwb/engine/profile/op_costs.h"

#include <algorithm>

namespace iwb {
namespace {

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

ForwardPlan forward_plan_of(const ModelShape& m) {
  PlanWeightTypes types;
  types.token_embd = m.token_embd_type;
  types.output = m.output_type;
  types.layers = m.layers;
  return build_forward_plan(m.config, &types);
}

int64_t num_step_records(const ModelConfig& c, int64_t num_tokens, int64_t max_batch_tokens, bool has_logits) {
  const int64_t batch = max_batch_tokens > 0 ? max_batch_tokens : std::max<int64_t>(num_tokens, 1);
  const int64_t num_batches = (std::max<int64_t>(num_tokens, 1) + batch - 1) / batch;
  const ForwardPlan plan = build_forward_plan(c);
  return num_batches * num_plan_records(plan, false) + (num_plan_records(plan, has_logits) - num_plan_records(plan, false));
}

Result<std::vector<KernelRecord>> predict_step(const ModelShape& m, const StepScenario& s) {
  IWB_RETURN_IF_ERROR(check(m, s));
  const ForwardPlan plan = forward_plan_of(m);
  std::vector<KernelRecord> out;
  out.reserve(static_cast<size_t>(num_step_records(m.config, s.num_tokens, s.max_batch_tokens, s.has_logits)));
  const int64_t batch = s.max_batch_tokens > 0 ? s.max_batch_tokens : s.num_tokens;
  for (int64_t start = 0; start < s.num_tokens; start += batch) {
    const int64_t n = std::min(batch, s.num_tokens - start);
    const op_costs::AttentionSpan span{n, s.num_cached_tokens + start};
    for (const PlanOp& op : plan.body) {
      for (int part = 0; part < num_op_records(op); ++part) out.push_back(op_record(plan, op, part, n, {&span, 1}));
    }
  }
  if (s.has_logits) {
    for (const PlanOp& op : plan.logits) {
      for (int part = 0; part < num_op_records(op); ++part) out.push_back(op_record(plan, op, part, s.num_logits_rows));
    }
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
  g.int8_dot_products = int8_dot_products_dominate(*prefill);
  g.num_decode_steps = std::max<int64_t>(0, num_generated_tokens - 1);
  if (g.num_decode_steps == 0) return g;

  // Only attention depends on the context: price the first decode step whole, then add each
  // later step's attention difference instead of listing every step's kernels.
  Result<std::vector<KernelRecord>> first = predict_step(m, {Phase::Decode, 1, num_prompt_tokens, 0, true});
  if (!first) return first.status();
  const StepCost first_cost = total_cost(*first);
  const ForwardPlan plan = forward_plan_of(m);
  auto attention_cost = [&](int64_t cached) {
    StepCost a;
    const op_costs::AttentionSpan span{1, cached};
    for (const PlanOp& op : plan.body) {
      if (op.kind != PlanOpKind::Attention) continue;
      const KernelRecord r = op_record(plan, op, 0, 1, {&span, 1});
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
