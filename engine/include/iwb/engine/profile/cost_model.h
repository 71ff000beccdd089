// The analytic cost model: every kernel of one forward step of a model, with predicted FLOPs
// and minimum bytes, without running anything. Same op kinds, names, layers and shapes as the
// profiler's records (both use op_costs.h), so a measured point pairs with its prediction.
// Works from an opened GGUF (per-layer weight types, as quantization mixes pick them) or from
// a named shape preset with one weight type.
#pragma once

#include "iwb/engine/model/model_config.h"
#include "iwb/engine/plan/forward_plan.h"
#include "iwb/engine/profile/kernel_record.h"
#include "iwb/engine/status.h"
#include "iwb/kernels/ggml_type.h"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace iwb {

// What the cost model needs to know about a model.
struct ModelShape {
  std::string name;                      // preset name or model file name
  ModelConfig config;
  GgmlType token_embd_type = GgmlType::F32;
  GgmlType output_type = GgmlType::F32;  // the classifier (the embedding table's type when tied)
  bool is_output_tied = false;
  std::vector<LayerWeightTypes> layers;  // [num_layers]
  uint64_t weight_bytes = 0;             // all matrices as stored (the classifier once when tied; every
                                         // expert of a mixture of experts, routed to or not)
};

// One forward step to predict.
struct StepScenario {
  Phase phase = Phase::Decode;
  int64_t num_tokens = 1;         // tokens in the step (the batch size)
  int64_t num_cached_tokens = 0;  // positions already in the KV cache: the context after the step
                                  // is num_cached_tokens + num_tokens
  int64_t max_batch_tokens = 0;   // a prompt longer than this runs as chunks of this many, one
                                  // forward pass each (EngineOptions::max_batch_tokens); 0: one pass
  bool has_logits = true;         // the classifier runs for the step's last token
  int64_t num_logits_rows = 1;    // rows through the classifier (one per sequence sampling in the step)
};

// The shape of a GGUF model (opens and maps the file; reads no weights beyond norm vectors).
Result<ModelShape> model_shape_from_gguf(const std::string& path);

// Shapes of well-known models with every matrix (and the embedding table) in `weight_type`
// but a mixture of experts' router (F32, as llama.cpp keeps it): the synth presets
// (llama-3.2-1b, ..., qwen3-30b-a3b; model_shape_preset_names()).
// An error names the preset, or the dimension the type's block size does not divide.
Result<ModelShape> model_shape_preset(std::string_view preset, GgmlType weight_type);
const std::vector<std::string>& model_shape_preset_names();

// The forward plan of the shape (its matrices' types and biases in the records).
ForwardPlan forward_plan_of(const ModelShape& model);

// Every kernel of the step in the forward plan's order, as the backends run them, seconds = 0.
// Expert matmuls count the experts the step's tokens are expected to be routed to (exactly
// num_experts_used for a one-token decode step; see expected_active_experts). One
// sequence: a batched engine step over several sequences runs the same kernels with the
// tokens of all of them (attention summed over the sequences, op_costs::batched_attention).
Result<std::vector<KernelRecord>> predict_step(const ModelShape& model, const StepScenario& scenario);

// How many records a step runs: the profiler reserves this many before the step (an engine
// step is one forward pass: max_batch_tokens 0).
int64_t num_step_records(const ModelConfig& config, int64_t num_tokens, int64_t max_batch_tokens, bool has_logits);

// Totals over records.
struct StepCost {
  double flops = 0;
  double bytes = 0;
  double seconds = 0;
};
StepCost total_cost(const std::vector<KernelRecord>& records);

// Predicted cost of a whole request: its prompt prefill (num_prompt_tokens from an empty
// cache) and num_generated_tokens - 1 decode steps (the first generated token comes out of
// the prefill). What MBU and MFU divide by.
struct GenerationCost {
  StepCost prefill;
  StepCost decode;               // all decode steps together
  int64_t num_decode_steps = 0;
  // Most of the prefill's matrix FLOPs have quantized weights, which the CPU kernels multiply
  // as int8 dot products (MFU then divides by the int8 peak where one was measured).
  bool int8_dot_products = false;
};
Result<GenerationCost> predict_generation(const ModelShape& model, int64_t num_prompt_tokens,
                                          int64_t num_generated_tokens, int64_t max_batch_tokens = 0);

}  // namespace iwb
