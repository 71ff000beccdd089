// Batched decode steps from the forward plan (the same walk predict_step makes, with one
// attention span per sequence), timed per kernel under roofs.
#include "iwb/engine/profile/decode_prediction.h"

#include "iwb/engine/plan/forward_plan.h"
#include "iwb/engine/profile/op_costs.h"

#include <algorithm>

namespace iwb {

Result<std::vector<KernelRecord>> batched_decode_records(const ModelShape& model, int64_t num_sequences,
                                                         int64_t context_tokens) {
  if (num_sequences < 1) return make_error(ErrorCode::InvalidArgument, "a decode step needs at least one sequence");
  if (context_tokens < 0) return make_error(ErrorCode::InvalidArgument, "the cached context cannot be negative");
  if (model.config.num_layers <= 0 || static_cast<int64_t>(model.layers.size()) != model.config.num_layers) {
    return make_error(ErrorCode::InvalidArgument, "model shape '" + model.name + "' has no layers to cost");
  }
  const ForwardPlan plan = forward_plan_of(model);
  // Every sequence decodes one token at position context_tokens over its own cache.
  const std::vector<op_costs::AttentionSpan> spans(static_cast<size_t>(num_sequences),
                                                   op_costs::AttentionSpan{1, context_tokens});
  std::vector<KernelRecord> out;
  for (const PlanOp& op : plan.body) {
    for (int part = 0; part < num_op_records(op); ++part)
      out.push_back(op_record(plan, op, part, num_sequences, spans));
  }
  for (const PlanOp& op : plan.logits) {
    for (int part = 0; part < num_op_records(op); ++part) out.push_back(op_record(plan, op, part, num_sequences));
  }
  for (KernelRecord& r : out) r.phase = Phase::Decode;
  return out;
}

Result<double> roofline_seconds(const std::vector<KernelRecord>& records, const DeviceRoofs& roofs) {
  if (roofs.bandwidth_bytes_per_s <= 0 || roofs.peak_flops <= 0) {
    return make_error(ErrorCode::InvalidArgument, "the device's bandwidth and peak FLOP/s must both be positive");
  }
  double seconds = 0;
  for (const KernelRecord& r : records) {
    seconds += std::max(r.flops / roofs.peak_flops, r.bytes / roofs.bandwidth_bytes_per_s);
  }
  return seconds;
}

Result<DecodePrediction> predict_decode_throughput(const ModelShape& model, int64_t num_sequences,
                                                   int64_t context_tokens, const DeviceRoofs& roofs) {
  auto records = batched_decode_records(model, num_sequences, context_tokens);
  if (!records) return records.status();
  auto seconds = roofline_seconds(*records, roofs);
  if (!seconds) return seconds.status();
  DecodePrediction p;
  p.num_sequences = num_sequences;
  p.context_tokens = context_tokens;
  p.step_seconds = *seconds;
  double memory_seconds = 0;
  for (const KernelRecord& r : *records) {
    p.flops += r.flops;
    p.bytes += r.bytes;
    const double compute = r.flops / roofs.peak_flops, memory = r.bytes / roofs.bandwidth_bytes_per_s;
    if (memory >= compute) memory_seconds += memory;
  }
  p.memory_bound_fraction = p.step_seconds > 0 ? memory_seconds / p.step_seconds : 0;
  p.tokens_per_s = p.step_seconds > 0 ? static_cast<double>(num_sequences) / p.step_seconds : 0;
  return p;
}

int64_t mean_decode_context(int64_t input_len, int64_t output_len) {
  return std::max<int64_t>(0, input_len) + std::max<int64_t>(0, output_len) / 2;
}

}  // namespace iwb
