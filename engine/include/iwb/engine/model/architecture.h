// One row per architecture the engine runs: what sets it apart from llama (RoPE layout, the
// activation, biases, per-head q/k norms, post-norms, embedding scale, sliding-window layers).
// The GGUF loader, the cost model's presets and `iwb synth` all read these rows, and the
// forward plan switches its ops on the flags they set, so a new architecture that reuses
// existing ops is one row here.
#pragma once

#include "iwb/kernels/activations.h"
#include "iwb/kernels/rope.h"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace iwb {

enum class ModelArchitecture {
  Llama,
  Qwen2,
  Gemma3,
  Qwen3,
  Phi3,
  Qwen3Moe,
  GptOss,
  Gemma2,
  SmolLM3,
  Olmo2,
  Granite,
  Glm4Moe,
  Deepseek2,
  Gemma4,
  Qwen35,
  Qwen35Moe
};

struct ArchitectureTraits {
  ModelArchitecture id = ModelArchitecture::Llama;
  const char* name = "";  // general.architecture
  RopeLayout rope_layout = RopeLayout::Normal;
  GatedActivation ffn_activation = GatedActivation::SiLU;
  bool requires_qkv_bias = false;  // q/k/v biases are required tensors (qwen2)
  bool has_qk_norm = false;        // per-head RMS norms of q and k before RoPE
  // The q and k norms run over each token's whole q and k (weights of q_width and k_width), not
  // per head (olmo2).
  bool is_qk_norm_full_width = false;
  // Norms before attention and before the FFN (attn_norm, ffn_norm); olmo2 has none: its blocks
  // read the residual stream as it is and norm their outputs (post-norms).
  bool has_pre_norms = true;
  bool has_post_norms = false;        // norms of the attention and FFN outputs
  bool has_scaled_embedding = false;  // embeddings times sqrt(n_embd)
  // Sliding-window layers: of every `sliding_period` layers all but the last slide (gemma3: 6);
  // 0: none. The window itself is a GGUF key (<arch>.attention.sliding_window).
  int32_t sliding_period = 0;
  // The window when the file gives none (gemma2: 4096, llama.cpp's default); 0: no window then.
  int64_t default_sliding_window = 0;
  // The file must give the window (gpt-oss: llama.cpp refuses a file without it).
  bool is_sliding_window_required = false;
  // Every `no_rope_layer_step`-th layer (il + 1 a multiple of it) has no RoPE at all (smollm3:
  // 4, llama.cpp's n_no_rope_layer_step; NoPE); 0: every layer rotates.
  int32_t no_rope_layer_step = 0;
  bool has_head_dim_key = false;  // files carry attention.key_length (the head size is not width / heads)
  // ffn_up holds gate and up stacked ([n_embd, 2 * n_ff]: gate rows first) and there is no
  // ffn_gate (phi3); the loader binds the two halves as the gate and up matrices.
  bool has_fused_gate_up = false;
  // Mixture of experts: every layer's FFN is <arch>.expert_count routed experts of which each
  // token uses <arch>.expert_used_count (softmax over the router's logits, top-k), no shared
  // expert. is_expert_weight_normalized: the top-k weights are divided by their sum (qwen3moe).
  bool has_experts = false;
  bool is_expert_weight_normalized = false;
  // gpt-oss (llama.cpp's LLAMA_EXPERT_GATING_FUNC_TYPE_SOFTMAX_WEIGHT): the top k are chosen by
  // the router's logits and their weights are the softmax over those k logits alone.
  bool is_expert_softmax_over_top_k = false;
  // gpt-oss: the router has a bias (ffn_gate_inp.bias) and every expert matrix one per expert
  // (ffn_{gate,up,down}_exps.bias, [width x num_experts]).
  bool has_expert_biases = false;
  // GLM-4.5 (llama.cpp's glm4moe; DeepSeek V3's routing): the router's scores through a sigmoid
  // unless the file's <arch>.expert_gating_func says softmax; the top k chosen by score plus a
  // per-expert selection bias (exp_probs_b.bias) but weighted by the unbiased scores, which
  // <arch>.expert_weights_norm and <arch>.expert_weights_scale may renormalise and scale;
  // <arch>.expert_shared_count shared experts (ffn_*_shexp, one SwiGLU FFN of that many
  // experts' width) that every token goes through; the first <arch>.leading_dense_block_count
  // layers with a dense FFN; and <arch>.nextn_predict_layers multi-token-prediction layers after
  // the trunk, counted in block_count, which the forward pass does not run.
  bool has_deepseek_routing = false;
  // The gating function when the file has no <arch>.expert_gating_func: sigmoid (glm4moe) or
  // softmax (deepseek2: DeepSeek V2's files predate the key).
  bool is_expert_gating_sigmoid_by_default = true;
  // The selection biases (exp_probs_b.bias) are bound where the file has them (deepseek2: DeepSeek
  // V2 has none, V3 and later have); otherwise they are required (glm4moe).
  bool is_selection_bias_optional = false;
  // q and k norms (per head) are bound where the file has them (GLM-4.5 355B has, Air has not).
  bool is_qk_norm_optional = false;
  // Multi-head latent attention (DeepSeek V2/V3, Kimi K2, GLM-4.7-Flash: llama.cpp's deepseek2
  // with attn_k_b / attn_v_b). Keys and values are one shared latent per token: the cache holds
  // <arch>.attention.kv_lora_rank normed latent values plus the roped part of the key
  // (rope.dimension_count), one KV head of attention.key_length; queries are absorbed into the
  // latent space per head through attn_k_b, and each head's output leaves it through attn_v_b.
  bool has_latent_attention = false;
  // gpt-oss: a per-head sink logit (attn_sinks.weight) joins every attention softmax.
  bool has_attention_sinks = false;
  // The sliding layers use the global RoPE base and scaling (gpt-oss), not base 10000 unscaled.
  bool is_sliding_rope_global = false;
  // The sliding layers rotate without the file's RoPE scaling (factor 1, no YaRN; olmo2's OLMo 3).
  bool is_sliding_rope_unscaled = false;
  // Soft-capping of the attention scores and of the final logits, cap * tanh(x / cap), with
  // llama.cpp's defaults (50 and 30) where the file gives no <arch>.attn_logit_softcapping or
  // <arch>.final_logit_softcapping (gemma2).
  bool has_logit_softcaps = false;
  // Granite's four multipliers, read from the file: <arch>.embedding_scale (embeddings),
  // residual_scale (each block's output before its residual add), attention.scale (q.k, in place
  // of 1/sqrt(head size)), logit_scale (the logits are divided by it; required).
  bool has_granite_scales = false;
  // The pre-FFN norm's tensor: ffn_norm, or post_attention_norm (gpt-oss names it so).
  const char* ffn_norm_name = "ffn_norm";
  // Gemma 4 (llama.cpp's gemma4 graph): the sliding layers have a head size and RoPE width of
  // their own (attention.key_length_swa, value_length_swa, rope.dimension_count_swa) and the
  // KV heads may differ per layer (attention.head_count_kv an array); the values are RMS-normed
  // without a weight, and are the keys' projection where a layer has no attn_v; rope_freqs
  // (proportional RoPE) applies to the global layers only; q.k is not scaled (the q norm does
  // it); each layer's output may be scaled (layer_output_scale); the expert layers run the
  // dense FFN beside the experts (see ModelConfig::has_parallel_dense_ffn).
  bool is_gemma4 = false;
  // Qwen 3.5 (llama.cpp's qwen35 graph): most layers are recurrent (a gated delta net over a
  // fixed-size state per sequence, <arch>.ssm.* keys; every <arch>.full_attention_interval-th
  // layer attends), and the attention layers gate their output: attn_q gives each head's query
  // and a gate beside it, and the output is multiplied by sigmoid(gate) before attn_output.
  bool has_recurrent_layers = false;
  bool has_attention_output_gate = false;
  // Qwen3-Next / Qwen 3.5 MoE: one shared expert beside the routed ones, of
  // <arch>.expert_shared_feed_forward_length, its output multiplied by
  // sigmoid(ffn_gate_inp_shexp . x) (one gate value per token).
  bool has_gated_shared_expert = false;
};

// Every architecture, in the order supported_architectures() lists them.
const std::vector<ArchitectureTraits>& architectures();
// The row of `name`; null when the engine does not run it.
const ArchitectureTraits* find_architecture(std::string_view name);

// "llama", "qwen2", "gemma3", "qwen3", "phi3", "qwen3moe", "gpt-oss", "gemma2", "smollm3", "olmo2", "granite",
// "glm4moe", "deepseek2", "gemma4", "qwen35", "qwen35moe".
const std::vector<std::string>& supported_architectures();

}  // namespace iwb
