// The architecture table (see architecture.h). Facts follow llama.cpp's graphs
// (src/models/*.cpp) for the same GGUF files.
#include "iwb/engine/model/architecture.h"

namespace iwb {

const std::vector<ArchitectureTraits>& architectures() {
  static const std::vector<ArchitectureTraits> kTable = [] {
    std::vector<ArchitectureTraits> t;
    ArchitectureTraits llama;
    llama.id = ModelArchitecture::Llama;
    llama.name = "llama";
    t.push_back(llama);

    ArchitectureTraits qwen2;
    qwen2.id = ModelArchitecture::Qwen2;
    qwen2.name = "qwen2";
    qwen2.rope_layout = RopeLayout::NeoX;
    qwen2.requires_qkv_bias = true;
    t.push_back(qwen2);

    ArchitectureTraits gemma3;
    gemma3.id = ModelArchitecture::Gemma3;
    gemma3.name = "gemma3";
    gemma3.rope_layout = RopeLayout::NeoX;
    gemma3.ffn_activation = GatedActivation::GeluTanh;
    gemma3.has_qk_norm = true;
    gemma3.has_post_norms = true;
    gemma3.has_scaled_embedding = true;
    gemma3.sliding_period = 6;
    gemma3.has_head_dim_key = true;
    t.push_back(gemma3);

    // Qwen3 (dense): qwen2 without the q/k/v biases, with per-head q/k norms before RoPE, and
    // a head size of its own (0.6B: 16 heads of 128 over a width of 1024).
    ArchitectureTraits qwen3;
    qwen3.id = ModelArchitecture::Qwen3;
    qwen3.name = "qwen3";
    qwen3.rope_layout = RopeLayout::NeoX;
    qwen3.has_qk_norm = true;
    qwen3.has_head_dim_key = true;
    t.push_back(qwen3);

    // Phi-3/3.5/4 (llama.cpp's phi3 graph): NeoX RoPE, q/k/v fused in attn_qkv (or separate),
    // gate and up stacked in ffn_up, no biases. LongRoPE's per-frequency factors
    // (rope_factors_long/short) and attention factor are GGUF data (model_config.cpp,
    // model_weights.cpp). The files' sliding window is ignored, as llama.cpp ignores it.
    ArchitectureTraits phi3;
    phi3.id = ModelArchitecture::Phi3;
    phi3.name = "phi3";
    phi3.rope_layout = RopeLayout::NeoX;
    phi3.has_fused_gate_up = true;
    t.push_back(phi3);
    // Qwen3 MoE: qwen3's attention, and routed experts in every layer's FFN (llama.cpp's
    // qwen3moe graph: softmax gating, top-k, weights renormalised, no shared expert).
    ArchitectureTraits qwen3moe = qwen3;
    qwen3moe.id = ModelArchitecture::Qwen3Moe;
    qwen3moe.name = "qwen3moe";
    qwen3moe.has_experts = true;
    qwen3moe.is_expert_weight_normalized = true;
    t.push_back(qwen3moe);
    // gpt-oss (llama.cpp's openai-moe graph, LLM_ARCH_OPENAI_MOE): NeoX RoPE (YaRN in the
    // files), q/k/v/o biases, a sink logit per head, every other layer sliding (the even ones,
    // window 128, the same RoPE), the pre-FFN norm stored as post_attention_norm, and routed
    // experts with biases, softmax over the top-k logits and the clamped SwiGLU.
    ArchitectureTraits gpt_oss;
    gpt_oss.id = ModelArchitecture::GptOss;
    gpt_oss.name = "gpt-oss";
    gpt_oss.rope_layout = RopeLayout::NeoX;
    gpt_oss.ffn_activation = GatedActivation::SwigluOai;
    gpt_oss.sliding_period = 2;
    gpt_oss.has_head_dim_key = true;
    gpt_oss.has_experts = true;
    gpt_oss.is_expert_softmax_over_top_k = true;
    gpt_oss.has_expert_biases = true;
    gpt_oss.has_attention_sinks = true;
    gpt_oss.is_sliding_rope_global = true;
    gpt_oss.is_sliding_window_required = true;
    gpt_oss.ffn_norm_name = "post_attention_norm";
    t.push_back(gpt_oss);
    // Gemma 2 (llama.cpp's gemma2 graph): gemma3's embedding scale, post-norms and GELU, without
    // per-head q/k norms; every other layer sliding (the even ones, window 4096 unless the file
    // says, the same RoPE as the global ones); attention scores and final logits soft-capped.
    ArchitectureTraits gemma2;
    gemma2.id = ModelArchitecture::Gemma2;
    gemma2.name = "gemma2";
    gemma2.rope_layout = RopeLayout::NeoX;
    gemma2.ffn_activation = GatedActivation::GeluTanh;
    gemma2.has_post_norms = true;
    gemma2.has_scaled_embedding = true;
    gemma2.sliding_period = 2;
    gemma2.default_sliding_window = 4096;
    gemma2.is_sliding_rope_global = true;
    gemma2.has_head_dim_key = true;
    gemma2.has_logit_softcaps = true;
    t.push_back(gemma2);
    // SmolLM3 (llama.cpp's smollm3 graph): llama, except that every fourth layer (3, 7, 11, ...)
    // leaves q and k unrotated (NoPE).
    ArchitectureTraits smollm3;
    smollm3.id = ModelArchitecture::SmolLM3;
    smollm3.name = "smollm3";
    smollm3.no_rope_layer_step = 4;
    t.push_back(smollm3);
    // OLMo 2 and OLMo 3 (llama.cpp's olmo2 graph): no norms before attention or the FFN, norms of
    // their outputs instead, RMS norms of each token's whole q and k, NeoX RoPE. OLMo 3 files add
    // a window: three of every four layers slide (or the file's attention.sliding_window_pattern),
    // rotating with the global base and no scaling.
    ArchitectureTraits olmo2;
    olmo2.id = ModelArchitecture::Olmo2;
    olmo2.name = "olmo2";
    olmo2.rope_layout = RopeLayout::NeoX;
    olmo2.has_qk_norm = true;
    olmo2.is_qk_norm_full_width = true;
    olmo2.has_pre_norms = false;
    olmo2.has_post_norms = true;
    olmo2.sliding_period = 4;
    olmo2.is_sliding_rope_global = true;
    olmo2.is_sliding_rope_unscaled = true;
    t.push_back(olmo2);
    // IBM Granite 3.x, dense (llama.cpp's granite graph): llama with four multipliers.
    ArchitectureTraits granite;
    granite.id = ModelArchitecture::Granite;
    granite.name = "granite";
    granite.has_granite_scales = true;
    t.push_back(granite);
    // GLM-4.5 / 4.6 (llama.cpp's glm4moe graph): NeoX RoPE on part of each head (the file's
    // rope.dimension_count: half), q/k/v biases where the file has them, per-head q/k norms
    // where it has them, the pre-FFN norm stored as post_attention_norm, and DeepSeek-style
    // experts after the leading dense layers (see has_deepseek_routing).
    ArchitectureTraits glm4moe;
    glm4moe.id = ModelArchitecture::Glm4Moe;
    glm4moe.name = "glm4moe";
    glm4moe.rope_layout = RopeLayout::NeoX;
    glm4moe.has_qk_norm = true;
    glm4moe.is_qk_norm_optional = true;
    glm4moe.has_head_dim_key = true;
    glm4moe.has_experts = true;
    glm4moe.has_deepseek_routing = true;
    glm4moe.ffn_norm_name = "post_attention_norm";
    t.push_back(glm4moe);
    // DeepSeek V2/V3, Kimi K2, GLM-4.7-Flash (llama.cpp's deepseek2 graph, as files written with
    // attn_k_b / attn_v_b): multi-head latent attention with normal RoPE on the last
    // rope.dimension_count values of each head, DeepSeek routing (softmax unless the file says
    // sigmoid) with shared experts after the leading dense layers.
    ArchitectureTraits deepseek2;
    deepseek2.id = ModelArchitecture::Deepseek2;
    deepseek2.name = "deepseek2";
    deepseek2.has_head_dim_key = true;
    deepseek2.has_experts = true;
    deepseek2.has_deepseek_routing = true;
    deepseek2.is_expert_gating_sigmoid_by_default = false;
    deepseek2.is_selection_bias_optional = true;
    deepseek2.has_latent_attention = true;
    t.push_back(deepseek2);
    // Gemma 4 (llama.cpp's gemma4 graph): gemma3's embedding scale, q/k norms, post-norms and
    // GELU, with the differences listed at ArchitectureTraits::is_gemma4 (model_config's
    // read_gemma4_keys reads them), routed experts where a layer has a router (26B-A4B) and the
    // final logits soft-capped where the file says.
    ArchitectureTraits gemma4 = gemma3;
    gemma4.id = ModelArchitecture::Gemma4;
    gemma4.name = "gemma4";
    gemma4.is_gemma4 = true;
    gemma4.is_expert_weight_normalized = true;
    t.push_back(gemma4);
    // Qwen 3.5 (dense; llama.cpp's qwen35 graph): qwen3's attention layers (NeoX RoPE over
    // rope.dimension_count of each head: the text positions of its interleaved M-RoPE are all
    // equal, which makes it plain NeoX), gated as ArchitectureTraits::has_attention_output_gate
    // says, between recurrent layers; the pre-FFN norm is post_attention_norm.
    ArchitectureTraits qwen35 = qwen3;
    qwen35.id = ModelArchitecture::Qwen35;
    qwen35.name = "qwen35";
    qwen35.ffn_norm_name = "post_attention_norm";
    qwen35.has_recurrent_layers = true;
    qwen35.has_attention_output_gate = true;
    t.push_back(qwen35);
    // Qwen 3.5 MoE (llama.cpp's qwen35moe graph): qwen35's layers with routed experts (softmax,
    // top-k, renormalised) and a gated shared expert in every layer's FFN.
    ArchitectureTraits qwen35moe = qwen35;
    qwen35moe.id = ModelArchitecture::Qwen35Moe;
    qwen35moe.name = "qwen35moe";
    qwen35moe.has_experts = true;
    qwen35moe.is_expert_weight_normalized = true;
    qwen35moe.has_gated_shared_expert = true;
    t.push_back(qwen35moe);
    return t;
  }();
  return kTable;
}

const ArchitectureTraits* find_architecture(std::string_view name) {
  for (const ArchitectureTraits& a : architectures()) {
    if (name == a.name) return &a;
  }
  return nullptr;
}

const std::vector<std::string>& supported_architectures() {
  static const std::vector<std::string> kNames = [] {
    std::vector<std::string> names;
    for (const ArchitectureTraits& a : architectures()) names.emplace_back(a.name);
    return names;
  }();
  return kNames;
}

}  // namespace iwb
