// A model's tensors bound by name to the memory-mapped GGUF, with shapes and types checked
// against the ModelConfig. Matrices stay in their stored type (the kernels dequantize them);
// norm weights and biases, a few thousand floats each, are copied out as f32.
#pragma once

#include "iwb/engine/gguf/gguf_file.h"
#include "iwb/engine/model/model_config.h"
#include "iwb/engine/status.h"
#include "iwb/kernels/ggml_type.h"

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

namespace iwb {

// A 2-D weight as GGUF stores it: out_features rows of in_features (ne[0]) values.
struct WeightMatrix {
  GgmlType type = GgmlType::F32;
  const void* data = nullptr;  // inside the file mapping
  int64_t in_features = 0;
  int64_t out_features = 0;
  uint64_t num_bytes = 0;
};

// A 3-D expert tensor as GGUF stores it (ne = {in, out, num_experts}): one matrix per expert,
// each out_features rows of in_features values, back to back. expert(e) is a view of expert
// e's rows inside the mapping (no copy).
struct ExpertMatrices {
  GgmlType type = GgmlType::F32;
  const void* data = nullptr;  // inside the file mapping
  int64_t in_features = 0;
  int64_t out_features = 0;
  int64_t num_experts = 0;
  uint64_t expert_bytes = 0;  // one expert's matrix: out_features rows as stored
  uint64_t num_bytes = 0;     // all experts
  // Bytes from one expert's matrix to the next: expert_bytes, or more where each expert's rows
  // sit beside another matrix's (Gemma 4's ffn_gate_up_exps, viewed as gate and up); 0: expert_bytes.
  uint64_t expert_stride = 0;

  WeightMatrix expert(int64_t e) const {
    const uint64_t stride = expert_stride > 0 ? expert_stride : expert_bytes;
    return {type, static_cast<const uint8_t*>(data) + static_cast<uint64_t>(e) * stride, in_features, out_features,
            expert_bytes};
  }
};

struct LayerWeights {
  std::vector<float> attn_norm;             // [n_embd]
  WeightMatrix wq, wk, wv, wo;              // wq: n_embd -> q_width, wo: attention_output_width -> n_embd
  std::vector<float> bq, bk, bv, bo;        // empty when the model has none
  std::vector<float> q_norm, k_norm;        // [head_dim_k] (gemma3)
  std::vector<float> post_attention_norm;   // [n_embd] (gemma3)
  std::vector<float> ffn_norm;              // [n_embd]
  WeightMatrix ffn_gate, ffn_up, ffn_down;  // gate/up: n_embd -> n_ff, down: n_ff -> n_embd (dense FFN)
  // Mixture of experts (instead of the dense FFN): the router and the routed experts.
  WeightMatrix ffn_gate_inp;                  // n_embd -> num_experts (F32 in llama.cpp's files)
  ExpertMatrices ffn_gate_exps, ffn_up_exps;  // each expert n_embd -> expert_ff
  ExpertMatrices ffn_down_exps;               // each expert expert_ff -> n_embd
  std::vector<float> post_ffw_norm;           // [n_embd] (gemma3)
  // gpt-oss: the router's bias [num_experts], each expert's biases (expert e's at e * width:
  // [num_experts x expert_ff] for gate and up, [num_experts x n_embd] for down), and the
  // attention sinks [num_heads]. Empty for other models.
  std::vector<float> ffn_gate_inp_b;
  std::vector<float> ffn_gate_exps_b, ffn_up_exps_b, ffn_down_exps_b;
  std::vector<float> attn_sinks;
  // glm4moe: the experts' selection bias [num_experts] (exp_probs_b.bias) and the shared
  // experts, one SwiGLU FFN of shared_expert_width(). Empty for other models.
  std::vector<float> exp_probs_b;
  WeightMatrix ffn_gate_shexp, ffn_up_shexp;  // n_embd -> shared_expert_width()
  WeightMatrix ffn_down_shexp;                // shared_expert_width() -> n_embd
  std::vector<float> ffn_gate_inp_shexp;      // [n_embd]: the shared expert's gate (Qwen 3.5 MoE), or empty
  // Multi-head latent attention (deepseek2); wq is attn_q (n_embd -> q_heads_width) or, with a
  // query latent, attn_q_b (q_lora_rank -> q_heads_width); wk and wv stay empty.
  WeightMatrix wq_a;                  // attn_q_a: n_embd -> q_lora_rank (or empty)
  WeightMatrix wkv_a;                 // attn_kv_a_mqa: n_embd -> latent_kv_width()
  std::vector<float> attn_q_a_norm;   // [q_lora_rank] (or empty)
  std::vector<float> attn_kv_a_norm;  // [kv_lora_rank]
  ExpertMatrices wk_b;                // attn_k_b, per head: mla_nope_width() -> kv_lora_rank
  ExpertMatrices wv_b;                // attn_v_b, per head: kv_lora_rank -> mla_head_dim_v
  // A multi-token-prediction head's layer (nextn.*): the norms of the token's embedding and of
  // the target's hidden state, and eh_proj taking the two, joined, to the layer's input.
  std::vector<float> nextn_enorm, nextn_hnorm;  // [n_embd]
  WeightMatrix nextn_eh_proj;                   // 2 * n_embd -> n_embd
  // Gemma 4: the layer's output scalar (layer_output_scale), and in expert layers the router
  // input's weight (ffn_gate_inp.scale / sqrt(n_embd)), each expert's output scale
  // (ffn_down_exps.scale, [num_experts]; empty: 1) and the norms of the parallel dense FFN and
  // experts. wv is wk where a layer has no attn_v (its values are its keys' projection).
  std::optional<float> output_scale;
  std::vector<float> router_norm;                                       // [n_embd]
  std::vector<float> ffn_down_exps_scale;                               // [num_experts]
  std::vector<float> post_ffw_norm_1, pre_ffw_norm_2, post_ffw_norm_2;  // [n_embd]
  // Gemma 4's per-layer embedding (E2B / E4B): inp_gate (n_embd -> per_layer), proj (back), post_norm.
  WeightMatrix ple_inp_gate, ple_proj;
  std::vector<float> ple_post_norm;  // [n_embd]
  // Qwen 3.5's recurrent layer (instead of attention): attn_qkv (n_embd -> linear_conv_channels),
  // attn_gate (n_embd -> linear_value_width), ssm_beta and ssm_alpha (n_embd -> value heads),
  // ssm_out (linear_value_width -> n_embd); the convolution's taps [channels x kernel], the
  // per-head dt bias and decay rate (ssm_a), and the output's per-head norm [linear_head_dim].
  WeightMatrix linear_qkv, linear_gate, ssm_beta, ssm_alpha, ssm_out;
  std::vector<float> ssm_conv1d, ssm_dt_bias, ssm_a, ssm_norm;
};

struct ModelWeights {
  WeightMatrix token_embd;         // [vocab rows of n_embd]
  std::vector<float> output_norm;  // [n_embd]
  WeightMatrix output;             // n_embd -> vocab; token_embd when tied
  bool is_output_tied = false;
  // Divisors of RoPE's frequencies, [rope_num_rotated / 2], or empty: llama 3's rope_freqs, or
  // LongRoPE's (phi3) long or short factors as select_rope_factors chose for the context.
  std::vector<float> rope_freqs;
  std::vector<float> rope_factors_long, rope_factors_short;  // phi3 LongRoPE, or empty
  std::vector<LayerWeights> layers;
  // Gemma 4's per-layer embeddings (E2B / E4B; empty otherwise): the table [vocab rows of
  // num_layers x per_layer], the projection of the embedding to the same width, its norm [per_layer].
  WeightMatrix per_layer_token_embd;
  WeightMatrix per_layer_model_proj;
  std::vector<float> per_layer_proj_norm;
  uint64_t num_bytes = 0;  // bytes of all bound tensors as stored
};

// fraction 0..1 of the layers bound so far.
using BindProgress = std::function<void(double fraction)>;

// Errors name the tensor: missing, wrong shape (with the expected one), or a type the kernels
// cannot dequantize.
// Fused tensors are bound as views of their rows: attn_qkv (q, k, v rows in that order) as wq,
// wk, wv; phi3's ffn_up (gate rows, then up rows) as ffn_gate and ffn_up. LongRoPE models get
// their short factors, llama.cpp's choice for a context up to the original one.
Result<ModelWeights> bind_model_weights(const gguf::GgufFile& file, const ModelConfig& config,
                                        const BindProgress& progress = {});

// The multi-token-prediction head of a file with nextn_predict_layers (config read from that
// file): its one layer (blk.<num_layers>, nextn.* included) as layers[0]; its own embedding
// table, head norm and classifier where the file has them (nextn.embed_tokens, shared_head_norm,
// shared_head_head), else the model's (llama.cpp's graph_mtp). With is_head_only_file (an
// "mtp-" file, converted with llama.cpp's --mtp: the head and the model's embedding table,
// output norm and classifier, no trunk) the model's are the file's own; else the target's.
// Laid out for mtp_head_config.
Result<ModelWeights> bind_mtp_weights(const gguf::GgufFile& file, const ModelConfig& config, const ModelWeights& target,
                                      bool is_head_only_file = false);

// LongRoPE: the long factors when the context per sequence exceeds the original context
// (rope.scaling.original_context_length, else the trained one), else the short ones, as
// llama.cpp's get_rope_factors chooses. No effect on models with rope_freqs or without factors.
void select_rope_factors(const ModelConfig& config, int64_t context_length, ModelWeights* weights);

}  // namespace iwb
