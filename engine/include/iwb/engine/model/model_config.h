// What the forward pass needs to know about a model, read from GGUF metadata for the
// architectures this engine runs (architecture.h): dimensions, norms, RoPE per layer,
// sliding-window layers, scales. Any other architecture is refused with ErrorCode::Unsupported.
#pragma once

#include "iwb/engine/gguf/gguf_file.h"
#include "iwb/engine/model/architecture.h"
#include "iwb/engine/status.h"
#include "iwb/kernels/activations.h"
#include "iwb/kernels/rope.h"

#include <cstdint>
#include <string>
#include <vector>

namespace iwb {

struct ModelConfig {
  ModelArchitecture architecture = ModelArchitecture::Llama;
  std::string architecture_name;     // general.architecture as stored
  int64_t context_length_train = 0;  // <arch>.context_length
  int64_t embedding_length = 0;      // model width (n_embd)
  int64_t num_layers = 0;
  int64_t num_heads = 0;
  int64_t num_kv_heads = 0;  // < num_heads with grouped-query attention
  int64_t head_dim_k = 0;    // per-head query/key width
  int64_t head_dim_v = 0;    // per-head value width
  int64_t feed_forward_length = 0;
  int64_t vocab_size = 0;  // rows of token_embd.weight
  float rms_norm_eps = 1e-5f;

  RopeLayout rope_layout = RopeLayout::Normal;  // Normal: llama; NeoX: qwen2, gemma3, qwen3, phi3
  int64_t rope_num_rotated = 0;                 // <arch>.rope.dimension_count, default head_dim_k
  float rope_freq_base = 10000.0f;              // global (full-attention) layers
  float rope_freq_scale = 1.0f;                 // 1 / rope.scaling.factor for linear scaling
  float rope_freq_base_swa = 10000.0f;          // sliding-window layers (gemma3: their own base)
  float rope_freq_scale_swa = 1.0f;
  // The sliding layers rotate without YaRN (olmo2's OLMo 3: ext_factor 0, magnitude factor 1).
  bool is_sliding_rope_unscaled = false;
  // LongRoPE (phi3): rope.scaling.original_context_length; a context longer than this uses the
  // long frequency factors, else the short ones (model_weights.h). 0: the file has no such key.
  int64_t rope_original_context = 0;
  // rope.scaling.attn_factor: llama.cpp multiplies RoPE's cos and sin by it, so q.k grows by its
  // square; with every dimension rotated that is exactly attention_scale times its square,
  // which is where it is applied. 1: none.
  float rope_attn_factor = 1.0f;
  // YaRN (rope.scaling.type yarn: gpt-oss), every layer, as llama.cpp sets it up (llama-context.cpp):
  // ext_factor 1, beta_fast 32 / beta_slow 1, the original context
  // rope.scaling.original_context_length (else context_length), and the magnitude factor that
  // cancels ggml's own 1 + 0.1 ln(factor) to 1 before ggml applies it again. ext_factor 0: off.
  float rope_ext_factor = 0.0f;
  float rope_yarn_attn_factor = 1.0f;
  float rope_beta_fast = 32.0f;
  float rope_beta_slow = 1.0f;
  int64_t rope_yarn_original_context = 0;

  // Layers with no RoPE: those with (il + 1) % no_rope_layer_step == 0 (smollm3: 4); 0: none.
  int32_t no_rope_layer_step = 0;

  int64_t sliding_window = 0;          // 0: every layer attends to the whole context
  std::vector<bool> is_sliding_layer;  // [num_layers]

  float attention_scale = 1.0f;      // multiplies q.k
  float attention_softcap = 0.0f;    // 0: off
  float final_logit_softcap = 0.0f;  // 0: off
  float embedding_scale = 1.0f;      // gemma: sqrt(n_embd); granite: <arch>.embedding_scale
  float residual_scale = 1.0f;       // granite: each block's output times this before its residual add
  float logit_scale = 1.0f;          // granite: the logits divided by this (folded into output_norm)
  GatedActivation ffn_activation = GatedActivation::SiLU;
  bool has_qk_norm = false;            // RMS norm of q and k before RoPE: per head (gemma3, qwen3)
  bool is_qk_norm_full_width = false;  // ... or over each token's whole q and k (olmo2)
  bool has_pre_norms = true;           // attn_norm and ffn_norm before the blocks (all but olmo2)
  bool has_post_norms = false;         // norms after attention and FFN outputs (gemma3)
  bool requires_qkv_bias = false;      // qwen2
  bool has_fused_gate_up = false;      // phi3: ffn_up is [n_embd, 2 * n_ff], gate rows first

  // Mixture of experts (architecture rows with has_experts): each layer's FFN is num_experts
  // routed experts of expert_feed_forward_length; a token goes through num_experts_used of
  // them (top-k of the router's softmax), their outputs summed with the gating weights.
  int64_t num_experts = 0;                    // <arch>.expert_count; 0: a dense FFN
  int64_t num_experts_used = 0;               // <arch>.expert_used_count (k)
  int64_t expert_feed_forward_length = 0;     // <arch>.expert_feed_forward_length
  bool is_expert_weight_normalized = false;   // top-k weights divided by their sum (qwen3moe)
  bool is_expert_softmax_over_top_k = false;  // gpt-oss: top k of the logits, softmax over those k
  bool has_expert_biases = false;             // gpt-oss: router and expert biases
  bool has_attention_sinks = false;           // gpt-oss: attn_sinks.weight, one logit per head
  // DeepSeek-style routing (glm4moe; ArchitectureTraits::has_deepseek_routing): the scores'
  // sigmoid (not softmax), the choice by score plus exp_probs_b.bias, the chosen weights (from
  // the unbiased scores, renormalised when is_expert_weight_normalized) times
  // expert_weights_scale, plus shared experts every token goes through.
  bool is_expert_gating_sigmoid = false;
  bool has_expert_selection_bias = false;
  float expert_weights_scale = 1.0f;
  int64_t num_shared_experts = 0;        // <arch>.expert_shared_count: ffn_*_shexp of shared_expert_width()
  int64_t num_leading_dense_layers = 0;  // <arch>.leading_dense_block_count: layers [0, n) have a dense FFN
  // Qwen 3.5 MoE (ArchitectureTraits::has_gated_shared_expert): the shared expert's width
  // (<arch>.expert_shared_feed_forward_length; 0: num_shared_experts of the routed width), and
  // its output times sigmoid(ffn_gate_inp_shexp . x).
  int64_t shared_expert_feed_forward_length = 0;
  bool has_shared_expert_gate = false;
  // <arch>.nextn_predict_layers: multi-token-prediction layers stored after the trunk (block_count
  // counts them, num_layers does not); read only by the MTP drafter (mtp_head_config).
  int64_t num_nextn_layers = 0;
  std::string ffn_norm_name = "ffn_norm";  // the pre-FFN norm's tensor (gpt-oss: post_attention_norm)
  // Group-limited routing (DeepSeek V3's n_group / topk_group): the experts fall into
  // num_expert_groups equal groups, each scored by the sum of its two best selection scores, and
  // a token chooses its experts from the num_expert_groups_used best groups only. 0 or 1: off.
  int64_t num_expert_groups = 0;
  int64_t num_expert_groups_used = 0;

  // Multi-head latent attention (ArchitectureTraits::has_latent_attention; deepseek2). The
  // attention runs as one KV head (num_kv_heads 1) whose key is [kv_lora_rank normed latent
  // values, rope_num_rotated roped values] (head_dim_k) and whose value is the latent
  // (head_dim_v = kv_lora_rank). Each head's query before absorption is mla_head_dim_k wide
  // ([nope, rope]); attn_k_b takes its nope part into the latent space, and attn_v_b each head's
  // latent output to mla_head_dim_v values, num_heads * mla_head_dim_v into attn_output.
  int64_t q_lora_rank = 0;     // attention.q_lora_rank: q = wq_b . norm(wq_a . x); 0: q = wq . x (V2-Lite)
  int64_t kv_lora_rank = 0;    // attention.kv_lora_rank; 0: ordinary attention
  int64_t mla_head_dim_k = 0;  // attention.key_length_mla
  int64_t mla_head_dim_v = 0;  // attention.value_length_mla
  // rope.scaling.yarn_log_multiplier as llama.cpp uses it (the file's value / 0.1: DeepSeek's
  // mscale_all_dim); it only sets attention_scale (mscale^2 / sqrt(mla_head_dim_k)).
  float rope_yarn_log_multiplier = 0.0f;

  // Gemma 4 (ArchitectureTraits::is_gemma4). The sliding layers' head sizes and RoPE width
  // where they differ from the global layers' (0: the same), and each layer's KV heads where
  // they differ (empty: num_kv_heads everywhere).
  int64_t head_dim_k_swa = 0;
  int64_t head_dim_v_swa = 0;
  int64_t rope_num_rotated_swa = 0;
  std::vector<int64_t> layer_kv_heads;
  bool has_value_norm = false;             // V RMS-normed per head, without a weight
  bool is_rope_freqs_global_only = false;  // rope_freqs applies to the global layers alone
  // The expert layers also run the dense FFN beside the experts, each with its own norms: the
  // FFN from ffn_norm to post_ffw_norm_1, the experts from pre_ffw_norm_2 to post_ffw_norm_2
  // (the router reading rmsnorm(X) / sqrt(n_embd) * ffn_gate_inp.scale, each expert's output
  // times its ffn_down_exps.scale), the sum through post_ffw_norm.
  bool has_parallel_dense_ffn = false;
  // Gemma 4 E2B / E4B. The last num_kv_shared_layers layers compute queries only and attend
  // over the cache of the last earlier layer of their kind (attention.shared_kv_layers); each
  // layer's FFN width where they differ (feed_forward_length as an array: the shared layers'
  // FFN is twice as wide in E2B); per-layer token embeddings of per_layer_embedding_length
  // values each (embedding_length_per_layer_input), mixed into every layer's output.
  int64_t num_kv_shared_layers = 0;
  std::vector<int64_t> layer_ff;
  int64_t per_layer_embedding_length = 0;

  // Qwen 3.5 (ArchitectureTraits::has_recurrent_layers). The recurrent layers (llama.cpp's
  // is_recr) run a gated delta net instead of attention and keep no KV cache (layer_kv_heads
  // is 0 for them): attn_qkv gives linear_conv_channels() values per token (query heads, key
  // heads, value heads) that a causal convolution of linear_conv_kernel taps mixes over the
  // last tokens, then each value head updates its [linear_head_dim x linear_head_dim] state.
  std::vector<bool> is_recurrent_layer;  // [num_layers]
  int64_t linear_conv_kernel = 0;        // ssm.conv_kernel
  int64_t linear_num_key_heads = 0;      // ssm.group_count (query heads too)
  int64_t linear_num_value_heads = 0;    // ssm.time_step_rank
  int64_t linear_head_dim = 0;           // ssm.state_size: every key, query and value head's width
  // attn_q gives [query, gate] per head (2 * q_width); the attention's output is multiplied by
  // sigmoid(gate) before attn_output.
  bool has_attention_output_gate = false;

  // A layer's attention shape (equal to the globals but for Gemma 4's sliding layers).
  bool is_sliding(int64_t il) const {
    return il >= 0 && static_cast<size_t>(il) < is_sliding_layer.size() && is_sliding_layer[static_cast<size_t>(il)];
  }
  int64_t layer_num_kv_heads(int64_t il) const {
    return static_cast<size_t>(il) < layer_kv_heads.size() ? layer_kv_heads[static_cast<size_t>(il)] : num_kv_heads;
  }
  int64_t layer_head_dim_k(int64_t il) const {
    return head_dim_k_swa > 0 && is_sliding(il) ? head_dim_k_swa : head_dim_k;
  }
  int64_t layer_head_dim_v(int64_t il) const {
    return head_dim_v_swa > 0 && is_sliding(il) ? head_dim_v_swa : head_dim_v;
  }
  int64_t layer_rope_num_rotated(int64_t il) const {
    return rope_num_rotated_swa > 0 && is_sliding(il) ? rope_num_rotated_swa : rope_num_rotated;
  }
  int64_t layer_q_width(int64_t il) const { return num_heads * layer_head_dim_k(il); }
  int64_t layer_k_width(int64_t il) const { return layer_num_kv_heads(il) * layer_head_dim_k(il); }
  int64_t layer_v_width(int64_t il) const { return layer_num_kv_heads(il) * layer_head_dim_v(il); }
  int64_t layer_attention_output_width(int64_t il) const { return num_heads * layer_head_dim_v(il); }
  // The layer whose KV cache layer il's attention reads (llama.cpp's layer_reuse_cb: a shared
  // layer reads the last layer before the shared ones of its own kind; others their own).
  int64_t kv_source_layer(int64_t il) const {
    const int64_t first_shared = num_layers - num_kv_shared_layers;
    if (num_kv_shared_layers <= 0 || il < first_shared) return il;
    return first_shared - (is_sliding(il) ? 2 : 1);
  }
  bool has_own_kv(int64_t il) const { return kv_source_layer(il) == il; }
  int64_t layer_feed_forward_length(int64_t il) const {
    return static_cast<size_t>(il) < layer_ff.size() ? layer_ff[static_cast<size_t>(il)] : feed_forward_length;
  }
  bool has_per_layer_embeddings() const { return per_layer_embedding_length > 0; }
  int64_t per_layer_inputs_width() const { return per_layer_embedding_length * num_layers; }
  // Whether any layer's attention shape differs from the globals.
  bool has_layer_attention_shapes() const {
    return head_dim_k_swa > 0 || head_dim_v_swa > 0 || rope_num_rotated_swa > 0 || !layer_kv_heads.empty() ||
           num_kv_shared_layers > 0;
  }
  // The widest of any layer (what buffers are sized by).
  int64_t max_q_width() const;
  int64_t max_k_width() const;
  int64_t max_v_width() const;
  int64_t max_attention_output_width() const;

  int64_t q_width() const { return num_heads * head_dim_k; }
  int64_t q_norm_width() const { return is_qk_norm_full_width ? q_width() : head_dim_k; }
  int64_t k_norm_width() const { return is_qk_norm_full_width ? k_width() : head_dim_k; }
  int64_t k_width() const { return num_kv_heads * head_dim_k; }
  int64_t v_width() const { return num_kv_heads * head_dim_v; }
  int64_t attention_output_width() const { return num_heads * head_dim_v; }
  bool has_latent_attention() const { return kv_lora_rank > 0; }
  int64_t latent_kv_width() const { return kv_lora_rank + rope_num_rotated; }   // attn_kv_a_mqa's output
  int64_t q_heads_width() const { return num_heads * mla_head_dim_k; }          // the queries before absorption
  int64_t attention_heads_width() const { return num_heads * mla_head_dim_v; }  // attn_v_b's outputs
  int64_t mla_nope_width() const { return mla_head_dim_k - rope_num_rotated; }  // attn_k_b's input per head
  // attn_output's input: every head's output (after attn_v_b with latent attention).
  int64_t attention_projection_width() const {
    return has_latent_attention() ? attention_heads_width() : attention_output_width();
  }
  // Where RoPE's values start in each query and key head: after the latent with latent attention.
  int64_t rope_head_offset() const { return has_latent_attention() ? kv_lora_rank : 0; }
  bool has_experts() const { return num_experts > 0; }
  // Layer il's FFN is routed experts (a mixture of experts' leading dense layers are not).
  bool is_expert_layer(int64_t il) const { return has_experts() && il >= num_leading_dense_layers; }
  bool has_dense_layers() const { return !has_experts() || num_leading_dense_layers > 0 || has_parallel_dense_ffn; }
  int64_t shared_expert_width() const {
    return shared_expert_feed_forward_length > 0 ? shared_expert_feed_forward_length
                                                 : expert_feed_forward_length * num_shared_experts;
  }
  bool is_rope_layer(int64_t il) const { return no_rope_layer_step <= 0 || (il + 1) % no_rope_layer_step != 0; }
  bool is_recurrent(int64_t il) const {
    return il >= 0 && static_cast<size_t>(il) < is_recurrent_layer.size() &&
           is_recurrent_layer[static_cast<size_t>(il)];
  }
  bool has_recurrent_layers() const { return linear_num_value_heads > 0; }
  int64_t num_recurrent_layers() const;
  int64_t linear_key_width() const { return linear_num_key_heads * linear_head_dim; }
  int64_t linear_value_width() const { return linear_num_value_heads * linear_head_dim; }
  int64_t linear_conv_channels() const { return 2 * linear_key_width() + linear_value_width(); }
  // One sequence's recurrent state in one recurrent layer, in floats: the convolution's last
  // linear_conv_kernel - 1 inputs, then every value head's state.
  int64_t recurrent_conv_state_floats() const { return (linear_conv_kernel - 1) * linear_conv_channels(); }
  int64_t recurrent_layer_state_floats() const {
    return recurrent_conv_state_floats() + linear_num_value_heads * linear_head_dim * linear_head_dim;
  }
  // One sequence's state over every recurrent layer, in bytes (f32): what a running sequence
  // holds beside its KV blocks.
  uint64_t recurrent_state_bytes() const {
    return static_cast<uint64_t>(num_recurrent_layers() * recurrent_layer_state_floats()) * sizeof(float);
  }
};

// Latent attention's scale of q.k as llama.cpp's deepseek2 graph sets it: mscale^2 /
// sqrt(mla_head_dim_k), mscale from the YaRN factor and rope_yarn_log_multiplier.
float latent_attention_scale(const ModelConfig& config);

// The multi-token-prediction head's config (the first of the file's nextn_predict_layers, as
// llama.cpp's graph_mtp runs it): the target's, as a model of one layer, that layer being the
// block stored after the trunk (a routed-expert layer wherever the trunk's last one is).
// Requires config.num_nextn_layers > 0.
ModelConfig mtp_head_config(const ModelConfig& config);

// Reads and checks the configuration; errors name the missing or inconsistent key.
Result<ModelConfig> model_config_from_gguf(const gguf::GgufFile& file);

// Sets what the architecture's row says (RoPE layout, activation, norms, biases, embedding
// scale, attention scale, which layers slide with `sliding_window`) on a config whose
// dimensions are already set.
void apply_architecture(const ArchitectureTraits& traits, int64_t sliding_window, ModelConfig* config);

}  // namespace iwb
