// Tensor list, initial scales and the streaming filler of synthetic models. Scales follow the
// usual initialisation of these models (N(0, 0.02), output projections shrunk by
// 1/sqrt(2 * layers), norms near 1) so activations stay finite through every layer.
#include "synth/synth_tensors.h"

#include "synth/synth_random.h"

#include "iwb/kernels/quantize.h"
#include "iwb/kernels/thread_pool.h"

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>

namespace iwb::synth::detail {
namespace {

constexpr float kWeightStddev = 0.02f;
constexpr float kNormStddev = 0.02f;
constexpr float kRouterLogitStddev = 3.0f;

class Planner {
 public:
  Planner(const SynthShape& shape, const WeightTypePlan& types) : m_shape(shape), m_types(types) {}

  void add(std::string name, std::vector<int64_t> shape, TensorRole role, int64_t layer = 0) {
    TensorPlan t;
    t.name = std::move(name);
    t.shape = std::move(shape);
    t.role = role;
    TensorTypeQuery q;
    q.role = role;
    q.row_length = t.shape[0];
    q.layer = layer;
    q.num_layers = m_shape.num_layers;
    q.is_classifier = role == TensorRole::Output || (role == TensorRole::TokenEmbedding && m_shape.is_embedding_tied);
    t.type = choose_tensor_type(m_types, q);
    // gpt-oss's experts: MXFP4 as the checkpoint (3-D tensors; not in an F32 file).
    if (m_shape.has_mxfp4_experts && t.shape.size() == 3 && m_types.base_type != GgmlType::F32 &&
        t.shape[0] % 32 == 0) {
      t.type = {GgmlType::MXFP4, false, GgmlType::MXFP4};
    }
    switch (role) {
      case TensorRole::Norm:
        t.mean = 1.0f;
        t.stddev = kNormStddev;
        break;
      case TensorRole::AttnOutput:
      case TensorRole::FfnDown:
        // Each layer adds two residual branches; shrinking them keeps the residual stream's
        // variance from growing with depth.
        t.stddev = kWeightStddev / std::sqrt(2.0f * static_cast<float>(m_shape.num_layers));
        break;
      case TensorRole::Router:
        // Decisive routing, as trained routers have: router logits of standard deviation
        // kRouterLogitStddev whatever the width (the normalised input has rms ~1), so the
        // experts' scores sit apart and the top-k choice rarely hinges on rounding.
        t.stddev = kRouterLogitStddev / std::sqrt(static_cast<float>(m_shape.embedding_length));
        break;
      default: t.stddev = kWeightStddev; break;
    }
    m_tensors.push_back(std::move(t));
  }

  std::vector<TensorPlan> take() { return std::move(m_tensors); }

 private:
  const SynthShape& m_shape;
  const WeightTypePlan& m_types;
  std::vector<TensorPlan> m_tensors;
};

std::string blk(int64_t layer, const char* suffix) { return "blk." + std::to_string(layer) + "." + suffix; }

// deepseek2's latent attention, as DeepseekV2Model writes it: the query (through its latent
// where the model has one), the key/value latent and its norm, attn_kv_b split per head into
// attn_k_b {nope, kv_lora, heads} and attn_v_b {kv_lora, v, heads}, and the output. llama.cpp's
// mixes have no rule of their own for these: they take the base type, as attn_q does.
void add_latent_attention(const SynthShape& s, int64_t il, Planner& p) {
  const int64_t d = s.embedding_length, heads = s.num_heads, rope = s.rope_dimension_count;
  if (s.q_lora_rank > 0) {
    p.add(blk(il, "attn_q_a.weight"), {d, s.q_lora_rank}, TensorRole::AttnQ, il);
    p.add(blk(il, "attn_q_a_norm.weight"), {s.q_lora_rank}, TensorRole::Norm, il);
    p.add(blk(il, "attn_q_b.weight"), {s.q_lora_rank, heads * s.mla_head_dim_k}, TensorRole::AttnQ, il);
  } else {
    p.add(blk(il, "attn_q.weight"), {d, heads * s.mla_head_dim_k}, TensorRole::AttnQ, il);
  }
  p.add(blk(il, "attn_kv_a_mqa.weight"), {d, s.kv_lora_rank + rope}, TensorRole::AttnQ, il);
  p.add(blk(il, "attn_kv_a_norm.weight"), {s.kv_lora_rank}, TensorRole::Norm, il);
  p.add(blk(il, "attn_k_b.weight"), {s.mla_head_dim_k - rope, s.kv_lora_rank, heads}, TensorRole::AttnQ, il);
  p.add(blk(il, "attn_v_b.weight"), {s.kv_lora_rank, s.mla_head_dim_v, heads}, TensorRole::AttnQ, il);
  p.add(blk(il, "attn_output.weight"), {heads * s.mla_head_dim_v, d}, TensorRole::AttnOutput, il);
}

// A Gemma 4 layer as llama.cpp's Gemma4Model converter writes it: attention of the layer's own
// head size (no attn_v in the global layers when their values are the keys' projection), value
// norms are weightless, the dense FFN in every layer, the layer's output scale, and beside the
// dense FFN the experts with their router scale, per-expert output scales and norms.
void add_gemma4_layer(const SynthShape& s, int64_t il, Planner& p) {
  const int64_t d = s.embedding_length, q = s.layer_q_width(il), kv = s.layer_kv_width(il);
  p.add(blk(il, "attn_norm.weight"), {d}, TensorRole::Norm, il);
  const bool has_kv = !s.is_kv_shared(il);  // a shared KV layer has queries only
  p.add(blk(il, "attn_q.weight"), {d, q}, TensorRole::AttnQ, il);
  if (has_kv) p.add(blk(il, "attn_k.weight"), {d, kv}, TensorRole::AttnK, il);
  if (has_kv && (s.is_gemma4_sliding(il) || !s.has_global_value_from_key)) {
    p.add(blk(il, "attn_v.weight"), {d, kv}, TensorRole::AttnV, il);
  }
  p.add(blk(il, "attn_output.weight"), {q, d}, TensorRole::AttnOutput, il);
  p.add(blk(il, "attn_q_norm.weight"), {s.layer_head_dim(il)}, TensorRole::Norm, il);
  if (has_kv) p.add(blk(il, "attn_k_norm.weight"), {s.layer_head_dim(il)}, TensorRole::Norm, il);
  p.add(blk(il, "post_attention_norm.weight"), {d}, TensorRole::Norm, il);
  p.add(blk(il, "layer_output_scale.weight"), {1}, TensorRole::Norm, il);
  p.add(blk(il, "ffn_norm.weight"), {d}, TensorRole::Norm, il);
  p.add(blk(il, "ffn_gate.weight"), {d, s.layer_ff(il)}, TensorRole::FfnGate, il);
  p.add(blk(il, "ffn_up.weight"), {d, s.layer_ff(il)}, TensorRole::FfnUp, il);
  p.add(blk(il, "ffn_down.weight"), {s.layer_ff(il), d}, TensorRole::FfnDown, il);
  p.add(blk(il, "post_ffw_norm.weight"), {d}, TensorRole::Norm, il);
  if (s.per_layer_embedding_length > 0) {
    p.add(blk(il, "inp_gate.weight"), {d, s.per_layer_embedding_length}, TensorRole::FfnGate, il);
    p.add(blk(il, "proj.weight"), {s.per_layer_embedding_length, d}, TensorRole::FfnDown, il);
    p.add(blk(il, "post_norm.weight"), {d}, TensorRole::Norm, il);
  }
  if (s.num_experts <= 0) return;
  const int64_t eff = s.expert_feed_forward_length, e = s.num_experts;
  p.add(blk(il, "ffn_gate_inp.weight"), {d, e}, TensorRole::Router, il);
  p.add(blk(il, "ffn_gate_inp.scale"), {d}, TensorRole::Norm, il);
  if (s.has_fused_expert_gate_up) {
    p.add(blk(il, "ffn_gate_up_exps.weight"), {d, 2 * eff, e}, TensorRole::FfnUp, il);
  } else {
    p.add(blk(il, "ffn_gate_exps.weight"), {d, eff, e}, TensorRole::FfnGate, il);
    p.add(blk(il, "ffn_up_exps.weight"), {d, eff, e}, TensorRole::FfnUp, il);
  }
  p.add(blk(il, "ffn_down_exps.weight"), {eff, d, e}, TensorRole::FfnDown, il);
  p.add(blk(il, "ffn_down_exps.scale"), {e}, TensorRole::Norm, il);
  p.add(blk(il, "pre_ffw_norm_2.weight"), {d}, TensorRole::Norm, il);
  p.add(blk(il, "post_ffw_norm_1.weight"), {d}, TensorRole::Norm, il);
  p.add(blk(il, "post_ffw_norm_2.weight"), {d}, TensorRole::Norm, il);
}

// A prediction layer's own tensors (llama.cpp's nextn.*): the projection of [embedding;
// hidden] and its two input norms, and the norm before the shared classifier.
void add_nextn_tensors(const SynthShape& s, int64_t il, Planner& p) {
  const int64_t d = s.embedding_length;
  p.add(blk(il, "nextn.eh_proj.weight"), {2 * d, d}, TensorRole::FfnUp, il);
  p.add(blk(il, "nextn.enorm.weight"), {d}, TensorRole::Norm, il);
  p.add(blk(il, "nextn.hnorm.weight"), {d}, TensorRole::Norm, il);
  p.add(blk(il, "nextn.shared_head_norm.weight"), {d}, TensorRole::Norm, il);
}

// A Qwen 3.5 layer as llama.cpp's Qwen3_5 converter writes it: a recurrent layer's gated delta
// net (attn_qkv, attn_gate, the convolution's taps, dt bias, decay rate ssm_a, beta and alpha,
// ssm_norm, ssm_out) or an attention layer whose attn_q holds each head's query and gate, then
// post_attention_norm (the FFN's input norm) and the dense FFN. A multi-token-prediction block
// after the trunk is an attention layer with the nextn.* tensors (llama.cpp's load_block_mtp).
void add_qwen35_layer(const SynthShape& s, int64_t il, Planner& p) {
  const int64_t d = s.embedding_length;
  p.add(blk(il, "attn_norm.weight"), {d}, TensorRole::Norm, il);
  if (s.is_recurrent_layer(il)) {
    const int64_t heads = s.linear_num_value_heads;
    p.add(blk(il, "attn_qkv.weight"), {d, s.linear_conv_channels()}, TensorRole::AttnQ, il);
    p.add(blk(il, "attn_gate.weight"), {d, s.linear_value_width()}, TensorRole::AttnQ, il);
    p.add(blk(il, "ssm_conv1d.weight"), {s.linear_conv_kernel, s.linear_conv_channels()}, TensorRole::Bias, il);
    p.add(blk(il, "ssm_dt.bias"), {heads}, TensorRole::Bias, il);
    p.add(blk(il, "ssm_a"), {heads}, TensorRole::Bias, il);
    p.add(blk(il, "ssm_beta.weight"), {d, heads}, TensorRole::AttnK, il);
    p.add(blk(il, "ssm_alpha.weight"), {d, heads}, TensorRole::AttnK, il);
    p.add(blk(il, "ssm_norm.weight"), {s.linear_head_dim}, TensorRole::Norm, il);
    p.add(blk(il, "ssm_out.weight"), {s.linear_value_width(), d}, TensorRole::AttnOutput, il);
  } else {
    p.add(blk(il, "attn_q.weight"), {d, 2 * s.q_width()}, TensorRole::AttnQ, il);
    p.add(blk(il, "attn_k.weight"), {d, s.kv_width()}, TensorRole::AttnK, il);
    p.add(blk(il, "attn_v.weight"), {d, s.kv_width()}, TensorRole::AttnV, il);
    p.add(blk(il, "attn_q_norm.weight"), {s.head_dim}, TensorRole::Norm, il);
    p.add(blk(il, "attn_k_norm.weight"), {s.head_dim}, TensorRole::Norm, il);
    p.add(blk(il, "attn_output.weight"), {s.q_width(), d}, TensorRole::AttnOutput, il);
  }
  p.add(blk(il, "post_attention_norm.weight"), {d}, TensorRole::Norm, il);
  if (s.num_experts > 0) {  // qwen35moe: routed experts and the gated shared expert
    const int64_t eff = s.expert_feed_forward_length, e = s.num_experts, sff = eff * s.num_shared_experts;
    p.add(blk(il, "ffn_gate_inp.weight"), {d, e}, TensorRole::Router, il);
    p.add(blk(il, "ffn_gate_exps.weight"), {d, eff, e}, TensorRole::FfnGate, il);
    p.add(blk(il, "ffn_down_exps.weight"), {eff, d, e}, TensorRole::FfnDown, il);
    p.add(blk(il, "ffn_up_exps.weight"), {d, eff, e}, TensorRole::FfnUp, il);
    p.add(blk(il, "ffn_gate_inp_shexp.weight"), {d}, TensorRole::Bias, il);
    p.add(blk(il, "ffn_gate_shexp.weight"), {d, sff}, TensorRole::FfnGate, il);
    p.add(blk(il, "ffn_down_shexp.weight"), {sff, d}, TensorRole::FfnDown, il);
    p.add(blk(il, "ffn_up_shexp.weight"), {d, sff}, TensorRole::FfnUp, il);
  } else {
    p.add(blk(il, "ffn_gate.weight"), {d, s.feed_forward_length}, TensorRole::FfnGate, il);
    p.add(blk(il, "ffn_up.weight"), {d, s.feed_forward_length}, TensorRole::FfnUp, il);
    p.add(blk(il, "ffn_down.weight"), {s.feed_forward_length, d}, TensorRole::FfnDown, il);
  }
  if (il >= s.num_layers) add_nextn_tensors(s, il, p);
}

// The recurrent layers' per-head constants as trained models have them: decay rates ssm_a =
// -exp(A_log) with A_log ~ log(U[1, 16]) as the model initialises it, and dt biases near
// softplus^-1(0.05), so each head forgets a few percent to half of its state per token.
std::vector<float> qwen35_head_constants(const TensorPlan& t) {
  std::vector<float> values(static_cast<size_t>(t.shape[0]));
  for (size_t h = 0; h < values.size(); ++h) {
    const double u = (static_cast<double>(h) + 0.5) / static_cast<double>(values.size());
    values[h] =
        t.name.ends_with("ssm_a") ? static_cast<float>(-(1.0 + 15.0 * u)) : static_cast<float>(-3.0 + 1.5 * (u - 0.5));
  }
  return values;
}

// Proportional RoPE's divisors for the global layers (the converter's generate_extra_tensors):
// 1 for the rotated pairs, 1e30 (no rotation) for the rest of the head.
std::vector<float> gemma4_rope_factors(const SynthShape& s) {
  const auto rotated = static_cast<size_t>(static_cast<float>(s.head_dim) * s.partial_rotary_global / 2.0f);
  std::vector<float> f(static_cast<size_t>(s.head_dim / 2), 1e30f);
  std::fill(f.begin(), f.begin() + static_cast<std::ptrdiff_t>(std::min(rotated, f.size())), 1.0f);
  return f;
}

}  // namespace

int64_t TensorPlan::num_rows() const {
  int64_t rows = 1;
  for (size_t i = 1; i < shape.size(); ++i) rows *= shape[i];
  return rows;
}

uint64_t TensorPlan::num_bytes() const {
  return *ggml_row_bytes(type.type, row_length()) * static_cast<uint64_t>(num_rows());
}

std::vector<TensorPlan> plan_tensors(const SynthShape& s, const WeightTypePlan& types) {
  Planner p(s, types);
  const int64_t d = s.embedding_length;
  const ArchitectureTraits* arch = find_architecture(s.architecture);
  const bool has_qk_norm =
      arch != nullptr && arch->has_qk_norm && (!arch->is_qk_norm_optional || s.has_optional_qk_norm);
  const bool has_post_norms = arch != nullptr && arch->has_post_norms;
  const bool has_pre_norms = arch == nullptr || arch->has_pre_norms;                  // olmo2 has none
  const bool is_qk_norm_full_width = arch != nullptr && arch->is_qk_norm_full_width;  // olmo2
  p.add("token_embd.weight", {d, s.vocab_size}, TensorRole::TokenEmbedding);
  const bool is_fused = arch != nullptr && arch->has_fused_gate_up;  // phi3: attn_qkv and gate/up in ffn_up
  if (s.rope_scaling.is_enabled()) {
    p.add("rope_freqs.weight", {s.head_dim / 2}, TensorRole::RopeFactors);
  }
  if (s.longrope.is_enabled()) {
    p.add("rope_factors_long.weight", {s.head_dim / 2}, TensorRole::RopeFactors);
    p.add("rope_factors_short.weight", {s.head_dim / 2}, TensorRole::RopeFactors);
  }
  const bool is_gemma4 = arch != nullptr && arch->is_gemma4;
  // Only where a global layer reads it (llama.cpp refuses a file with a tensor nothing loads,
  // as `--layers 2` of only sliding layers would write).
  bool has_global_layer = false;
  for (int64_t il = 0; il < s.num_layers; ++il) has_global_layer = has_global_layer || !s.is_gemma4_sliding(il);
  if (is_gemma4 && has_global_layer) p.add("rope_freqs.weight", {s.head_dim / 2}, TensorRole::RopeFactors);
  if (is_gemma4 && s.per_layer_embedding_length > 0) {  // E2B / E4B
    const int64_t width = s.per_layer_embedding_length * s.num_layers;
    p.add("per_layer_token_embd.weight", {width, s.vocab_size}, TensorRole::TokenEmbedding);
    p.add("per_layer_model_proj.weight", {d, width}, TensorRole::AttnQ);
    p.add("per_layer_proj_norm.weight", {s.per_layer_embedding_length}, TensorRole::Norm);
  }
  // The trunk's layers, then the multi-token-prediction layers (glm4moe's and deepseek2's an
  // expert layer each, Qwen 3.5's an attention layer).
  for (int64_t il = 0; il < s.num_layers + s.num_nextn_layers; ++il) {
    if (is_gemma4) {
      add_gemma4_layer(s, il, p);
      continue;
    }
    if (arch != nullptr && arch->has_recurrent_layers) {
      add_qwen35_layer(s, il, p);
      continue;
    }
    if (has_pre_norms) p.add(blk(il, "attn_norm.weight"), {d}, TensorRole::Norm, il);
    if (arch != nullptr && arch->has_latent_attention) {
      add_latent_attention(s, il, p);
    } else if (is_fused) {
      // The fused matrix takes the base type, as attn_q does (llama.cpp's mixes give it more bits).
      p.add(blk(il, "attn_qkv.weight"), {d, s.q_width() + 2 * s.kv_width()}, TensorRole::AttnQ, il);
    } else {
      p.add(blk(il, "attn_q.weight"), {d, s.q_width()}, TensorRole::AttnQ, il);
      p.add(blk(il, "attn_k.weight"), {d, s.kv_width()}, TensorRole::AttnK, il);
      p.add(blk(il, "attn_v.weight"), {d, s.kv_width()}, TensorRole::AttnV, il);
    }
    const bool is_gpt_oss = arch != nullptr && arch->has_expert_biases;  // q/k/v/o, router and expert biases
    if (s.has_qkv_bias || is_gpt_oss) {
      p.add(blk(il, "attn_q.bias"), {s.q_width()}, TensorRole::Bias, il);
      p.add(blk(il, "attn_k.bias"), {s.kv_width()}, TensorRole::Bias, il);
      p.add(blk(il, "attn_v.bias"), {s.kv_width()}, TensorRole::Bias, il);
    }
    if (has_qk_norm) {
      p.add(blk(il, "attn_q_norm.weight"), {is_qk_norm_full_width ? s.q_width() : s.head_dim}, TensorRole::Norm, il);
      p.add(blk(il, "attn_k_norm.weight"), {is_qk_norm_full_width ? s.kv_width() : s.head_dim}, TensorRole::Norm, il);
    }
    if (arch == nullptr || !arch->has_latent_attention) {
      p.add(blk(il, "attn_output.weight"), {s.q_width(), d}, TensorRole::AttnOutput, il);
    }
    if (is_gpt_oss) {
      p.add(blk(il, "attn_output.bias"), {d}, TensorRole::Bias, il);
      p.add(blk(il, "attn_sinks.weight"), {s.num_heads}, TensorRole::Bias, il);
    }
    if (has_post_norms) p.add(blk(il, "post_attention_norm.weight"), {d}, TensorRole::Norm, il);
    if (has_pre_norms) {
      p.add(blk(il, arch != nullptr ? (std::string(arch->ffn_norm_name) + ".weight").c_str() : "ffn_norm.weight"), {d},
            TensorRole::Norm, il);
    }
    if (s.num_experts > 0 && il >= s.num_leading_dense_layers) {
      // llama.cpp's order and 3-D layout: the router, then gate, down, up experts {in, out, experts}.
      const int64_t eff = s.expert_feed_forward_length, e = s.num_experts;
      p.add(blk(il, "ffn_gate_inp.weight"), {d, e}, TensorRole::Router, il);
      if (arch != nullptr && arch->has_deepseek_routing && s.has_expert_selection_bias) {
        p.add(blk(il, "exp_probs_b.bias"), {e}, TensorRole::Bias, il);
      }
      p.add(blk(il, "ffn_gate_exps.weight"), {d, eff, e}, TensorRole::FfnGate, il);
      p.add(blk(il, "ffn_down_exps.weight"), {eff, d, e}, TensorRole::FfnDown, il);
      p.add(blk(il, "ffn_up_exps.weight"), {d, eff, e}, TensorRole::FfnUp, il);
      if (is_gpt_oss) {  // one bias row per expert, {width, experts}
        p.add(blk(il, "ffn_gate_inp.bias"), {e}, TensorRole::Bias, il);
        p.add(blk(il, "ffn_gate_exps.bias"), {eff, e}, TensorRole::Bias, il);
        p.add(blk(il, "ffn_down_exps.bias"), {d, e}, TensorRole::Bias, il);
        p.add(blk(il, "ffn_up_exps.bias"), {eff, e}, TensorRole::Bias, il);
      }
      if (s.num_shared_experts > 0) {  // glm4moe: one SwiGLU FFN of the shared experts' width
        const int64_t sff = eff * s.num_shared_experts;
        p.add(blk(il, "ffn_gate_shexp.weight"), {d, sff}, TensorRole::FfnGate, il);
        p.add(blk(il, "ffn_down_shexp.weight"), {sff, d}, TensorRole::FfnDown, il);
        p.add(blk(il, "ffn_up_shexp.weight"), {d, sff}, TensorRole::FfnUp, il);
      }
    } else {
      if (is_fused) {
        p.add(blk(il, "ffn_up.weight"), {d, 2 * s.feed_forward_length}, TensorRole::FfnUp, il);
      } else {
        p.add(blk(il, "ffn_gate.weight"), {d, s.feed_forward_length}, TensorRole::FfnGate, il);
        p.add(blk(il, "ffn_up.weight"), {d, s.feed_forward_length}, TensorRole::FfnUp, il);
      }
      p.add(blk(il, "ffn_down.weight"), {s.feed_forward_length, d}, TensorRole::FfnDown, il);
    }
    if (has_post_norms) p.add(blk(il, "post_ffw_norm.weight"), {d}, TensorRole::Norm, il);
    if (il >= s.num_layers) add_nextn_tensors(s, il, p);
  }
  p.add("output_norm.weight", {d}, TensorRole::Norm);
  if (!s.is_embedding_tied) p.add("output.weight", {d, s.vocab_size}, TensorRole::Output);

  std::vector<TensorPlan> tensors = p.take();
  for (TensorPlan& t : tensors) {
    if (t.name == "rope_factors_long.weight") {
      t.fixed_values = s.longrope.long_factors;
    } else if (t.name == "rope_factors_short.weight") {
      t.fixed_values = s.longrope.short_factors;
    } else if (t.role == TensorRole::RopeFactors) {
      t.fixed_values = is_gemma4 ? gemma4_rope_factors(s) : llama3_rope_factors(s);
    } else if (t.name.ends_with("ssm_a") || t.name.ends_with("ssm_dt.bias")) {
      t.fixed_values = qwen35_head_constants(t);
    } else if (t.name.ends_with("ssm_conv1d.weight")) {
      // A few taps of about 1 / sqrt(taps) each, as the convolution's initialisation gives.
      t.stddev = 1.0f / std::sqrt(static_cast<float>(t.shape[0]));
    } else if (is_gemma4 && (t.name.ends_with("attn_q_norm.weight") || t.name.ends_with("attn_k_norm.weight"))) {
      // Gemma 4 does not scale q.k (its q and k norms do): weights of head^-1/4 each give the
      // scores of 1/sqrt(head) scaling, as trained norms must, rather than random scores of
      // rms sqrt(head) that make every softmax one-hot.
      t.mean = std::pow(static_cast<float>(t.shape[0]), -0.25f);
      t.stddev = kNormStddev * t.mean;
    }
  }
  return tensors;
}

Status fill_tensor(const TensorPlan& tensor, uint64_t seed, int64_t distinct_rows, int num_threads,
                   std::span<uint8_t> dst) {
  const GgmlType type = tensor.type.type;
  const int64_t cols = tensor.row_length();
  const int64_t rows = tensor.num_rows();
  const size_t row_bytes = *ggml_row_bytes(type, cols);
  if (dst.size() != row_bytes * static_cast<size_t>(rows)) {
    return make_error(ErrorCode::InvalidArgument, "tensor '" + tensor.name + "': the writer offers " +
                                                      std::to_string(dst.size()) + " bytes, it needs " +
                                                      std::to_string(row_bytes * static_cast<size_t>(rows)));
  }
  if (!tensor.fixed_values.empty()) {
    if (static_cast<int64_t>(tensor.fixed_values.size()) != cols * rows || type != GgmlType::F32) {
      return make_error(ErrorCode::InvalidArgument,
                        "tensor '" + tensor.name + "': fixed values do not match its shape");
    }
    std::memcpy(dst.data(), tensor.fixed_values.data(), dst.size());
    return {};
  }

  const uint64_t tensor_hash = name_hash(tensor.name);
  const bool repeats_rows = distinct_rows > 0 && distinct_rows < rows && type != GgmlType::F32;
  const int64_t drawn_rows = repeats_rows ? distinct_rows : rows;
  std::atomic<int64_t> failed_row{-1};
  const int threads = num_threads > 0 ? num_threads : iwb::default_num_threads();
#pragma omp parallel num_threads(threads)
  {
    std::vector<float> values(static_cast<size_t>(cols));
#pragma omp for schedule(dynamic, 8)
    for (int64_t r = 0; r < drawn_rows; ++r) {
      if (failed_row.load(std::memory_order_relaxed) >= 0) continue;
      fill_gaussian(row_stream_seed(seed, tensor_hash, r), tensor.mean, tensor.stddev, values.data(), cols);
      if (!quantize_row_ref(type, values.data(), dst.data() + static_cast<size_t>(r) * row_bytes, cols)) {
        failed_row.store(r, std::memory_order_relaxed);
      }
    }
  }
  if (repeats_rows && failed_row.load() < 0) {
    // A hash rather than r % distinct_rows, so neighbouring rows (one expert's, one head's)
    // differ as they would in a real file.
    uint8_t* base = dst.data();
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int64_t r = drawn_rows; r < rows; ++r) {
      const auto source =
          static_cast<int64_t>(row_stream_seed(seed, tensor_hash, r) % static_cast<uint64_t>(drawn_rows));
      std::memcpy(base + static_cast<size_t>(r) * row_bytes, base + static_cast<size_t>(source) * row_bytes, row_bytes);
    }
  }
  if (failed_row.load() >= 0) {
    return make_error(ErrorCode::Unsupported, "tensor '" + tensor.name + "': row " + std::to_string(failed_row.load()) +
                                                  " could not be converted to " + std::string(ggml_type_name(type)));
  }
  return {};
}

}  // namespace iwb::synth::detail
