// Shapes of real models for `iwb synth`: every hyper-parameter llama.cpp and this engine read
// from a GGUF (dimensions, heads, RoPE, norms, tied embeddings, gemma3's sliding window,
// qwen3moe's, gpt-oss's and glm4moe's experts, gpt-oss's YaRN), so a
// synthetic file with random weights runs exactly the computation of the real model.
#pragma once

#include "iwb/engine/model/model_config.h"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace iwb::synth {

// Llama 3.1/3.2's "llama3" RoPE scaling, which llama.cpp's converter turns into per-frequency
// divisors (the rope_freqs.weight tensor). factor 0: none.
struct Llama3RopeScaling {
  float factor = 0.0f;
  float low_freq_factor = 1.0f;
  float high_freq_factor = 4.0f;
  int64_t original_context_length = 8192;
  bool is_enabled() const { return factor > 0.0f; }
};

// Phi-3's LongRoPE ("longrope" in config.json): per-frequency divisors for contexts up to the
// original one (short) and beyond it (long), written as rope_factors_short/long.weight, and
// the attention factor llama.cpp's converter derives from the context ratio. Empty: none.
struct LongRopeScaling {
  std::vector<float> long_factors, short_factors;  // [head_dim / 2] each
  int64_t original_context_length = 0;
  bool is_enabled() const { return !long_factors.empty(); }
};

struct SynthShape {
  std::string name;          // "llama-3.2-1b"
  std::string architecture;  // general.architecture: a row of model/architecture.h
  std::string description;   // what it is the shape of
  int64_t embedding_length = 0;
  int64_t num_layers = 0;
  int64_t num_heads = 0;
  int64_t num_kv_heads = 0;
  int64_t head_dim = 0;  // per-head width of q, k and v
  int64_t feed_forward_length = 0;
  int64_t vocab_size = 0;      // rows of token_embd (replaced by a --vocab tokenizer's size)
  int64_t context_length = 0;  // trained context
  float rope_freq_base = 10000.0f;
  float rms_norm_eps = 1e-5f;
  bool is_embedding_tied = false;  // no output.weight: the classifier is token_embd
  bool has_qkv_bias = false;       // qwen2
  int64_t sliding_window = 0;      // gemma3: window of its local layers (5 of every 6); gemma2: every other
  // gemma2's soft-caps, written as <arch>.attn_logit_softcapping / final_logit_softcapping
  // (architectures with has_logit_softcaps; 0 leaves the key out, and llama.cpp's default holds).
  float attention_softcap = 0.0f;
  float final_logit_softcap = 0.0f;
  // granite's multipliers (<arch>.embedding_scale, residual_scale, attention.scale,
  // logit_scale; architectures with has_granite_scales; 0 leaves a key out).
  float granite_embedding_scale = 0.0f;
  float granite_residual_scale = 0.0f;
  float granite_attention_scale = 0.0f;
  float granite_logit_scale = 0.0f;
  // Mixture of experts (architectures with has_experts): experts per layer, experts per token,
  // each expert's hidden width. feed_forward_length is then only written as metadata.
  int64_t num_experts = 0;
  int64_t num_experts_used = 0;
  int64_t expert_feed_forward_length = 0;
  // glm4moe (DeepSeek-style routing): shared experts, the leading dense layers (their FFN of
  // feed_forward_length), the multi-token-prediction layers written after the trunk (an expert
  // layer plus its nextn tensors each, as llama.cpp's converter writes them; the MTP drafter's), the
  // routed weights' scale and renormalisation, per-head q/k norms (GLM-4.5 355B), the rotated
  // part of each head (rope.dimension_count; 0: all of it).
  int64_t num_shared_experts = 0;
  int64_t num_leading_dense_layers = 0;
  int64_t num_nextn_layers = 0;
  float expert_weights_scale = 0.0f;
  bool is_expert_weight_normalized = false;
  bool has_optional_qk_norm = false;
  int64_t rope_dimension_count = 0;
  // DeepSeek routing's gating (llama.cpp's numbering: 1 softmax, 2 sigmoid) and selection biases
  // (exp_probs_b: GLM-4.5, DeepSeek V3 and later; V2 has none), and group-limited routing
  // (expert_group_count / expert_group_used_count; 0: keys left out).
  int64_t expert_gating_func = 2;
  bool has_expert_selection_bias = true;
  int64_t num_expert_groups = 0;
  int64_t num_expert_groups_used = 0;
  // deepseek2's multi-head latent attention: head_dim is then the file's key_length
  // (kv_lora_rank + rope_dimension_count) and num_kv_heads 1, as llama.cpp's converter writes.
  int64_t q_lora_rank = 0;  // 0: attn_q straight from the input (DeepSeek-V2-Lite)
  int64_t kv_lora_rank = 0;
  int64_t mla_head_dim_k = 0;        // qk_nope_head_dim + qk_rope_head_dim
  int64_t mla_head_dim_v = 0;        // v_head_dim
  float yarn_mscale_all_dim = 0.0f;  // written as rope.scaling.yarn_log_multiplier = 0.1 * it; 0: none
  Llama3RopeScaling rope_scaling;
  LongRopeScaling longrope;
  // YaRN (gpt-oss: factor 32 over 4096), written as rope.scaling.type yarn. factor 0: none.
  float yarn_factor = 0.0f;
  int64_t yarn_original_context = 0;
  // gpt-oss: experts in MXFP4 whatever the file's type but F32 (llama.cpp's converter writes
  // the checkpoint's MXFP4 experts as they are); attention, biases, sinks as the file's type.
  bool has_mxfp4_experts = false;
  // Gemma 4 (gemma4): the sliding layers' head size and KV heads (the global layers have
  // head_dim and num_kv_heads), the global layers' rotated fraction of each head (proportional
  // RoPE: rope_freqs of 1e30 keep the rest in place), values from the keys' projection in the
  // global layers (no attn_v), each layer's output scale, and the experts' gate and up stored
  // together (ffn_gate_up_exps); experts, where set, run beside the dense FFN.
  int64_t head_dim_swa = 0;
  int64_t num_kv_heads_swa = 0;
  float partial_rotary_global = 1.0f;
  bool has_global_value_from_key = false;
  bool has_fused_expert_gate_up = false;
  // Gemma 4 E2B / E4B: the last layers reading earlier layers' KV cache (with a FFN twice as
  // wide: use_double_wide_mlp), and per-layer token embeddings of this width (0: none).
  int64_t num_kv_shared_layers = 0;
  bool has_double_wide_shared_ffn = false;
  int64_t per_layer_embedding_length = 0;
  // Qwen 3.5 (qwen35): every layer recurrent (a gated delta net) but each
  // full_attention_interval-th; config.json's linear_num_key_heads, linear_num_value_heads,
  // linear_key_head_dim (= linear_value_head_dim) and linear_conv_kernel_dim. The attention
  // layers gate their output (attn_q twice as wide) and rotate rope_dimension_count of each head.
  int64_t full_attention_interval = 0;
  int64_t linear_num_key_heads = 0;
  int64_t linear_num_value_heads = 0;
  int64_t linear_head_dim = 0;
  int64_t linear_conv_kernel = 0;
  bool is_test_shape = false;  // a small shape for tests, not shown in the preset list

  // The first n layers at their real size (`iwb synth --layers`): the leading dense layers that
  // remain (all n when n does not pass them, as DeepSeek-V3's first three), the rest unchanged.
  SynthShape with_layers(int64_t n) const;

  int64_t q_width() const { return num_heads * head_dim; }
  int64_t kv_width() const { return num_kv_heads * head_dim; }
  // Layer il's (Gemma 4's sliding layers differ; every other shape's layers are alike).
  bool is_gemma4_sliding(int64_t il) const { return head_dim_swa > 0 && il % 6 != 5; }
  int64_t layer_head_dim(int64_t il) const { return is_gemma4_sliding(il) ? head_dim_swa : head_dim; }
  int64_t layer_kv_heads(int64_t il) const { return is_gemma4_sliding(il) ? num_kv_heads_swa : num_kv_heads; }
  int64_t layer_q_width(int64_t il) const { return num_heads * layer_head_dim(il); }
  int64_t layer_kv_width(int64_t il) const { return layer_kv_heads(il) * layer_head_dim(il); }
  bool is_kv_shared(int64_t il) const { return il >= num_layers - num_kv_shared_layers; }
  int64_t layer_ff(int64_t il) const {
    return feed_forward_length * (has_double_wide_shared_ffn && is_kv_shared(il) ? 2 : 1);
  }
  // Qwen 3.5's multi-token-prediction blocks after the trunk are attention layers (llama.cpp's
  // is_recr: only trunk layers recur).
  bool is_recurrent_layer(int64_t il) const {
    return full_attention_interval > 0 && il < num_layers && (il + 1) % full_attention_interval != 0;
  }
  int64_t linear_value_width() const { return linear_num_value_heads * linear_head_dim; }
  int64_t linear_conv_channels() const { return 2 * linear_num_key_heads * linear_head_dim + linear_value_width(); }
  int64_t num_parameters() const;  // weights, norms and biases
};

// Every preset, real shapes first, then the small test shapes.
const std::vector<SynthShape>& synth_presets();
const SynthShape* find_synth_preset(std::string_view name);

// The ModelConfig a GGUF of this shape loads as (the cost model prices presets through it).
ModelConfig shape_config(const SynthShape& shape);

// rope_freqs.weight of a llama3-scaled model: [head_dim / 2] divisors of the base frequencies,
// as llama.cpp's convert_hf_to_gguf.py computes them.
std::vector<float> llama3_rope_factors(const SynthShape& shape);

// rope.scaling.attn_factor of a LongRoPE shape as llama.cpp's converter writes it:
// sqrt(1 + ln(context / original) / ln(original)), 1 when the context is not longer.
float longrope_attn_factor(const SynthShape& shape);

}  // namespace iwb::synth
