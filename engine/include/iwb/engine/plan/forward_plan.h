// The one description of the transformer forward pass: the model config (and its weights'
// stored types) yields a flat list of ops — norm, matmuls, RoPE, KV write, attention,
// activation, residual add; for mixture-of-experts layers the router, top-k gating, expert
// matmuls and their weighted sum — that the CPU backend, the CUDA backend and the cost model
// all walk. A new op or architecture is added here once; each backend only knows how to run an op.
#pragma once

#include "iwb/engine/model/model_config.h"
#include "iwb/engine/profile/kernel_record.h"
#include "iwb/engine/profile/op_costs.h"
#include "iwb/engine/status.h"
#include "iwb/kernels/ggml_type.h"

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

namespace iwb {

// Stored types of one layer's matrices, and which biases it has.
struct LayerWeightTypes {
  GgmlType wq = GgmlType::F32, wk = GgmlType::F32, wv = GgmlType::F32, wo = GgmlType::F32;
  GgmlType ffn_gate = GgmlType::F32, ffn_up = GgmlType::F32, ffn_down = GgmlType::F32;
  bool has_bq = false, has_bk = false, has_bv = false, has_bo = false;
  // Mixture of experts: the router and the expert tensors (every expert stored alike).
  GgmlType ffn_gate_inp = GgmlType::F32;
  GgmlType ffn_gate_exps = GgmlType::F32, ffn_up_exps = GgmlType::F32, ffn_down_exps = GgmlType::F32;
  bool has_router_bias = false, has_expert_biases = false;  // gpt-oss
  // glm4moe's shared experts (F32 where the layer has none).
  GgmlType ffn_gate_shexp = GgmlType::F32, ffn_up_shexp = GgmlType::F32, ffn_down_shexp = GgmlType::F32;
  // Latent attention (deepseek2): attn_q_a, attn_kv_a_mqa, and the per-head attn_k_b / attn_v_b.
  GgmlType wq_a = GgmlType::F32, wkv_a = GgmlType::F32, wk_b = GgmlType::F32, wv_b = GgmlType::F32;
  GgmlType nextn_eh_proj = GgmlType::F32;                           // an MTP head's nextn.eh_proj
  bool has_output_scale = false;                                    // Gemma 4's layer_output_scale
  GgmlType ple_inp_gate = GgmlType::F32, ple_proj = GgmlType::F32;  // Gemma 4's per-layer embedding
  // Qwen 3.5's recurrent layer: attn_qkv, attn_gate, ssm_beta, ssm_alpha, ssm_out.
  GgmlType linear_qkv = GgmlType::F32, linear_gate = GgmlType::F32;
  GgmlType ssm_beta = GgmlType::F32, ssm_alpha = GgmlType::F32, ssm_out = GgmlType::F32;
};

// The types a plan's records carry: what each backend stores (a device may convert a type it
// has no kernel for), so a record names the bytes that really move.
struct PlanWeightTypes {
  GgmlType token_embd = GgmlType::F32;
  GgmlType output = GgmlType::F32;                // the classifier (the embedding table's type when tied)
  GgmlType per_layer_model_proj = GgmlType::F32;  // Gemma 4's per-layer inputs' projection
  std::vector<LayerWeightTypes> layers;           // [num_layers]; empty: F32 and no biases everywhere
};

// The step's activations, each [rows x width]: the residual stream and the buffers between ops.
// In the body the rows are the step's tokens; in the logits section they are the rows that
// sample (Final holds their residual rows, gathered from X). The Expert* buffers hold num_experts_used
// rows per token, grouped by expert (all rows routed to expert 0, then expert 1, ...).
enum class PlanBuffer : uint8_t {
  X,             // residual stream [n_embd]
  Xn,            // normalised block input [n_embd]
  Q,             // [q_width]
  K,             // [k_width]
  V,             // [v_width]
  Attn,          // attention output [attention_output_width]
  Proj,          // a block's output before the residual add [n_embd]
  Gate,          // [n_ff]; the activation's output too
  Up,            // [n_ff]
  Final,         // the residual rows that sample, normalised in place at the end [n_embd]
  Logits,        // [vocab]
  RouterLogits,  // the router's score of each expert [num_experts]
  ExpertIn,      // a token's normalised FFN input, once per expert it was routed to [n_embd]
  ExpertGate,    // [expert_ff]; the activation's output too
  ExpertUp,      // [expert_ff]
  ExpertOut,     // an expert's output for a token, before the weighted sum [n_embd]
  SharedGate,    // the shared experts' gate [shared_expert_width]; the activation's output too
  SharedUp,      // [shared_expert_width]
  // Latent attention (deepseek2).
  QLatent,    // attn_q_a's output, normed in place [q_lora_rank]
  KvLatent,   // attn_kv_a_mqa's output: the latent, then the key's RoPE values [latent_kv_width]
  QHeads,     // each head's query before absorption, [nope, rope] per head [q_heads_width]
  AttnHeads,  // each head's output after attn_v_b [attention_heads_width]
  // Multi-token prediction (PlanOptions).
  Hidden,    // every token's last hidden state, the output norm's rows [n_embd]
  HiddenIn,  // the MTP head's input: the target's Hidden row of the token before [n_embd]
  Joined,    // the MTP head's [normed embedding, normed HiddenIn] [2 * n_embd]
  MoeOut,    // the routed experts' weighted sum beside a dense FFN (Gemma 4) [n_embd]
  // Gemma 4's per-layer embeddings (E2B / E4B).
  PleProj,  // per_layer_model_proj's output, token by token [num_layers x per_layer]
  PleIn,    // every layer's input rows, layer by layer: layer l's [tokens x per_layer] at l * tokens
  PleGate,  // a layer's inp_gate output; the activation's output too [per_layer]
  // Qwen 3.5's attention output gate and recurrent layers.
  QGate,        // attn_q's output: per head its query, then its gate [2 * q_width]
  AttnGate,     // the gates of QGate, head by head [attention_output_width]
  LinearMixed,  // attn_qkv's output: query heads, key heads, value heads [linear_conv_channels]
  LinearConv,   // LinearMixed through the causal convolution and SiLU [linear_conv_channels]
  LinearGate,   // attn_gate's output (z); the activation's output too [linear_value_width]
  LinearBeta,   // ssm_beta's output [linear_num_value_heads]
  LinearAlpha,  // ssm_alpha's output [linear_num_value_heads]
  LinearOut,    // the delta rule's output, normed per head in place [linear_value_width]
};

// Weight vectors an RMS norm multiplies by.
enum class PlanNorm : uint8_t {
  AttnNorm,
  QNorm,
  KNorm,
  PostAttentionNorm,
  FfnNorm,
  PostFfwNorm,
  OutputNorm,
  QANorm,      // attn_q_a_norm (latent attention's query latent)
  KvANorm,     // attn_kv_a_norm (its key/value latent)
  NextnENorm,  // nextn.enorm (an MTP head's token embedding)
  NextnHNorm,  // nextn.hnorm (the target's hidden state it reads)
  // Gemma 4.
  Unit,              // no weight: a plain RMS normalisation (the values, per head)
  RouterNorm,        // the router's input: ffn_gate_inp.scale / sqrt(n_embd)
  PostFfwNorm1,      // post_ffw_norm_1: the dense FFN's output beside the experts
  PreFfwNorm2,       // pre_ffw_norm_2: the experts' input
  PostFfwNorm2,      // post_ffw_norm_2: the experts' weighted sum
  PerLayerPostNorm,  // a layer's post_norm of its per-layer embedding's projection
  SsmNorm,           // Qwen 3.5: ssm_norm, the recurrent output's norm per value head
};

// Weight matrices (their biases go with them). FfnGateInp is the router; the *Exps are
// expert tensors (one matrix per expert).
enum class PlanMatrix : uint8_t {
  Wq,
  Wk,
  Wv,
  Wo,
  FfnGate,
  FfnUp,
  FfnDown,
  Output,
  FfnGateInp,
  FfnGateExps,
  FfnUpExps,
  FfnDownExps,
  FfnGateShexp,  // glm4moe's shared experts: one dense SwiGLU FFN in each expert layer
  FfnUpShexp,
  FfnDownShexp,
  WqA,          // attn_q_a (latent attention; Wq is then attn_q_b, or attn_q without a query latent)
  WkvA,         // attn_kv_a_mqa
  WkB,          // attn_k_b: one matrix per head (HeadMatmuls)
  WvB,          // attn_v_b: one matrix per head
  NextnEhProj,  // nextn.eh_proj: an MTP head's Joined -> its layer's input
  // Gemma 4's per-layer embeddings: the model's per_layer_model_proj (X -> PleProj), and each
  // layer's inp_gate (X -> PleGate) and proj (PleGate -> Proj).
  PerLayerModelProj,
  PleInpGate,
  PleProjection,
  // Qwen 3.5's recurrent layer: attn_qkv (Xn -> LinearMixed), attn_gate (Xn -> LinearGate),
  // ssm_beta and ssm_alpha (Xn -> LinearBeta, LinearAlpha), ssm_out (LinearGate -> Proj).
  LinearQkv,
  LinearGateProj,
  SsmBeta,
  SsmAlpha,
  SsmOut,
};

enum class PlanOpKind : uint8_t {
  Embedding,        // X = token_embd[tokens] (* embedding_scale)
  RmsNorm,          // output = rmsnorm(input) * norm, rows of `width` (per-head norms: heads per token rows)
  Matmuls,          // products of one input: product.output = input . W^T (+ bias), 1 to 3 of them
  Rope,             // Q and K rotated in place at the tokens' positions (one record each)
  KvWrite,          // K and V into the paged cache at the step's slots
  Attention,        // Attn = every sequence's queries over its own cached keys and values
  GatedActivation,  // output = act(input) * multiplier, rows_per_token rows of `width` per token
  ResidualAdd,      // output += input (X += Proj; Final += Proj in the logits section)
  GatherRows,       // output = the rows of input that sample (Final from X: a copy, not a kernel, no record)
  Softcap,          // Logits = c * tanh(Logits / c)
  // Mixture of experts. The routing (which experts, their weights, the grouping) lives in the
  // backend from ExpertRouting to ExpertCombine of the same layer.
  ExpertRouting,  // per token: softmax over RouterLogits, the top num_experts_used experts,
                  // their weights (renormalised when the model says so); ExpertIn = Xn's rows
                  // copied once per routed expert, grouped by expert
  ExpertMatmuls,  // products of ExpertIn (or ExpertGate): each expert's rows times that
                  // expert's matrix, every expert a token was routed to in one call
  ExpertCombine,  // Proj = per token, the sum of its ExpertOut rows times their weights
                  // (is_accumulating: Proj += it, after the shared experts wrote Proj)
  // Latent attention (deepseek2).
  LatentKv,     // from KvLatent: V = rmsnorm(latent) * attn_kv_a_norm, K = [V, the RoPE values]
  HeadMatmuls,  // per head h of num_heads (input and output split into num_heads equal rows):
                // output_h[0, out) = input_h[0, in) . W_h^T, and output_h[out, ...) = input_h[in,
                // ...) copied (attn_k_b: the query's RoPE values follow its absorbed latent)
  Concat,       // output = [input, appended] per token (the MTP head's Joined; a copy, no record)
  LayerScale,   // output *= the layer's layer_output_scale (Gemma 4), at the end of the layer
  // Gemma 4's per-layer inputs (llama.cpp's get_per_layer_inputs and project_per_layer_inputs):
  // PleIn = (rmsnorm(PleProj / sqrt(n_embd)) * per_layer_proj_norm + per_layer_token_embd[token]
  // * sqrt(per_layer)) / sqrt(2), per layer's slice, laid out layer by layer.
  PerLayerInputs,
  // Qwen 3.5's attention output gate: Q and AttnGate from QGate's halves of each head (a copy,
  // no record); after the attention, Attn *= sigmoid(AttnGate).
  SplitQueryGate,
  OutputGate,
  // Qwen 3.5's recurrent layer (kernels/delta_net.h), over each sequence's tokens in order with
  // that sequence's recurrent state: LinearConv = silu(causal conv of LinearMixed), then
  // LinearOut = the gated delta rule over LinearConv's heads, LinearAlpha and LinearBeta.
  ShortConv,
  DeltaNet,
  // Qwen 3.5 MoE's gated shared expert: output (the shared expert's rows) *= sigmoid(input .
  // ffn_gate_inp_shexp), one gate value per token.
  SharedExpertGate,
};

struct PlanProduct {
  const char* name = "";  // the record name: "attn_q", "ffn_down", "output"
  PlanMatrix matrix = PlanMatrix::Wq;
  PlanBuffer output = PlanBuffer::Q;
  GgmlType type = GgmlType::F32;
  int64_t in_features = 0;
  int64_t out_features = 0;
  bool has_bias = false;
};

struct PlanOp {
  PlanOpKind kind = PlanOpKind::Embedding;
  const char* name = "";  // record name of norms and residual adds
  int32_t layer = -1;     // -1: before or after the layers
  PlanBuffer input = PlanBuffer::X;
  PlanBuffer output = PlanBuffer::X;
  // RmsNorm: the weight, rows per token (1, num_heads or num_kv_heads) and the row width.
  // GatedActivation: rows per token (1, or num_experts_used over the expert buffers), width.
  PlanNorm norm = PlanNorm::AttnNorm;
  int64_t rows_per_token = 1;
  int64_t width = 0;
  PlanBuffer multiplier = PlanBuffer::Up;  // GatedActivation: what act(input) is multiplied by
  // Matmuls.
  std::array<PlanProduct, 3> products{};
  int32_t num_products = 0;
  OpKind matmul_kind = OpKind::Matmul;  // Logits for the classifier, ExpertMatmul for ExpertMatmuls
  // Rope and Attention: the layer's sliding window applies (its own RoPE base and scale).
  bool is_sliding = false;
  // ExpertCombine: adds to its output (the shared experts' part) instead of overwriting it
  // (writes Proj, or MoeOut beside Gemma 4's dense FFN).
  bool is_accumulating = false;
  // Concat: the buffer whose rows follow input's in output's. SplitQueryGate: where the second
  // half of each of input's rows_per_token rows goes (the first half, `width` values, to output).
  PlanBuffer appended = PlanBuffer::X;
  // Attention: the layer whose cache it reads (Gemma 4's shared KV layers read an earlier
  // layer's); -1: its own. Rope: only the queries (a layer that reads another's cache).
  int32_t kv_layer = -1;
  bool is_query_only = false;
  // GatedActivation: the multiplier is this layer's slice of PleIn (Gemma 4's per-layer input).
  bool is_multiplier_layer_slice = false;

  int32_t cache_layer() const { return kv_layer >= 0 ? kv_layer : layer; }

  std::span<const PlanProduct> matmuls() const { return {products.data(), static_cast<size_t>(num_products)}; }
};

// Variants of the pass for multi-token prediction (llama.cpp's embeddings_nextn and graph_mtp).
struct PlanOptions {
  // The body runs every layer whole and ends with Hidden = output_norm(X) for every token (what
  // an MTP head reads); the logits section gathers Hidden's rows that sample for the classifier.
  // (Gemma 4 with per-layer embeddings runs the last layer whole in the body too, without
  // exporting anything: its per-layer inputs are laid out for every token.)
  bool exports_hidden = false;
  // The config is mtp_head_config's: the body starts X = nextn.eh_proj([enorm(embedding),
  // hnorm(HiddenIn)]) before its one layer, and exports Hidden (the head's own, for its next
  // guess) with its shared head norm as OutputNorm.
  bool is_mtp_head = false;
};

struct ForwardPlan {
  ModelConfig config;
  PlanOptions options;
  GgmlType token_embd_type = GgmlType::F32;
  // Run once per forward pass over all of its tokens: the embedding, then every layer but the
  // last one's feed-forward block.
  std::vector<PlanOp> body;
  // Run over the rows that sample only (not at all in a step without them): gather them, the
  // last layer's feed-forward block, the output norm, the classifier, softcap.
  std::vector<PlanOp> logits;
};

// The plan of `config`'s architecture. `types` names each matrix's type and biases (records
// carry them); null: F32 and no biases (enough to count records).
ForwardPlan build_forward_plan(const ModelConfig& config, const PlanWeightTypes* types = nullptr,
                               const PlanOptions& options = {});

// Checks the plan's wiring: every buffer is written before it is read, widths agree between
// ops (a norm's rows, a matmul's in/out features and the buffers they read and write), and each
// layer writes its keys and values before its attention reads the cache. The logits section
// reads the token rows only through GatherRows (any other op there must read what the section
// wrote over the rows that sample), and runs no attention or KV write. An error names the op.
Status check_forward_plan(const ForwardPlan& plan);

// Kernel records one op makes: one per product of Matmuls and ExpertMatmuls, two for Rope
// (queries, keys; one when it rotates queries only), none for GatherRows and Concat, else one.
int num_op_records(const PlanOp& op);

// The record of part `part` (< num_op_records) of `op` over `num_rows` token rows (the step's
// tokens for body ops, the rows that sample for logits ops). Attention takes every sequence's
// span of queries; other ops ignore `spans`. ExpertMatmuls read only the experts the step's
// tokens were routed to: `num_active_experts` of them (a backend's count for its step), or
// without it the expected count when num_rows tokens pick experts uniformly at random (the
// cost model's prediction: exactly num_experts_used for one token). seconds = 0.
KernelRecord op_record(const ForwardPlan& plan, const PlanOp& op, int part, int64_t num_rows,
                       std::span<const op_costs::AttentionSpan> spans = {},
                       std::optional<int64_t> num_active_experts = std::nullopt);

// Distinct experts `num_tokens` tokens touch on average when each picks num_experts_used of
// num_experts uniformly: E * (1 - (1 - k/E)^n).
double expected_active_experts(const ModelConfig& config, int64_t num_tokens);

// Records of a whole forward pass: body ops, then logits ops when num_logits_rows > 0.
int64_t num_plan_records(const ForwardPlan& plan, bool has_logits);

}  // namespace iwb
