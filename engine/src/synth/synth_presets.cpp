// Preset shapes for `iwb synth`, taken from each model's published config.json (Hugging Face)
// and checked against the GGUF keys llama.cpp's converter writes for it.
#include "iwb/engine/synth/synth_preset.h"

#include "iwb/engine/model/model_config.h"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace iwb::synth {
namespace {

// The dimensions of a shape, in the order config.json lists them.
struct Dims {
  int64_t width, layers, heads, kv_heads, head_dim, ffn, vocab, context;
};

void set_dims(const Dims& d, SynthShape* s) {
  s->embedding_length = d.width;
  s->num_layers = d.layers;
  s->num_heads = d.heads;
  s->num_kv_heads = d.kv_heads;
  s->head_dim = d.head_dim;
  s->feed_forward_length = d.ffn;
  s->vocab_size = d.vocab;
  s->context_length = d.context;
}

SynthShape shape(const char* name, const char* architecture, const char* description, Dims d, float rope_base,
                 float rms_norm_eps, bool is_embedding_tied) {
  SynthShape s;
  s.name = name;
  s.architecture = architecture;
  s.description = description;
  set_dims(d, &s);
  s.rope_freq_base = rope_base;
  s.rms_norm_eps = rms_norm_eps;
  s.is_embedding_tied = is_embedding_tied;
  return s;
}

void set_experts(int64_t num_experts, int64_t num_used, int64_t expert_ff, SynthShape* s) {
  s->num_experts = num_experts;
  s->num_experts_used = num_used;
  s->expert_feed_forward_length = expert_ff;
}

// deepseek2's latent attention from config.json's q_lora_rank, kv_lora_rank, qk_nope_head_dim,
// qk_rope_head_dim and v_head_dim, and its DeepSeek routing; the file's head is then one KV head
// of kv_lora_rank + qk_rope_head_dim (what DeepseekV2Model writes).
void set_latent_attention(int64_t q_lora, int64_t kv_lora, int64_t nope, int64_t rope, int64_t v, SynthShape* s) {
  s->q_lora_rank = q_lora;
  s->kv_lora_rank = kv_lora;
  s->mla_head_dim_k = nope + rope;
  s->mla_head_dim_v = v;
  s->rope_dimension_count = rope;
  s->head_dim = kv_lora + rope;
  s->num_kv_heads = 1;
}

// DeepSeek routing: shared experts, leading dense layers, the routed weights' scale and
// renormalisation, sigmoid (with selection biases) or softmax gating.
void set_deepseek_routing(int64_t shared, int64_t dense, float scale, bool is_normalized, bool is_sigmoid,
                          SynthShape* s) {
  s->num_shared_experts = shared;
  s->num_leading_dense_layers = dense;
  s->expert_weights_scale = scale;
  s->is_expert_weight_normalized = is_normalized;
  s->expert_gating_func = is_sigmoid ? 2 : 1;
  s->has_expert_selection_bias = is_sigmoid;
}

// Qwen 3.5's recurrent layers (config.json's full_attention_interval, linear_num_key_heads,
// linear_num_value_heads, linear_key_head_dim, linear_conv_kernel_dim) and partial_rotary_factor 0.25.
void set_qwen35_linear(int64_t interval, int64_t key_heads, int64_t value_heads, int64_t head_dim, int64_t taps,
                       SynthShape* s) {
  s->full_attention_interval = interval;
  s->linear_num_key_heads = key_heads;
  s->linear_num_value_heads = value_heads;
  s->linear_head_dim = head_dim;
  s->linear_conv_kernel = taps;
  s->rope_dimension_count = s->head_dim / 4;
}

// A small test shape with another's architecture and settings.
SynthShape test_shape(const SynthShape& like, const char* name, const char* description, Dims d) {
  SynthShape s = like;
  s.name = name;
  s.description = description;
  set_dims(d, &s);
  s.rope_scaling = {};
  s.is_test_shape = true;
  return s;
}

std::vector<SynthShape> make_presets() {
  std::vector<SynthShape> p;
  // meta-llama/Llama-3.2-1B: tied embeddings, llama3 RoPE scaling (factor 32 over 8192).
  p.push_back(shape("llama-3.2-1b", "llama", "Llama 3.2 1B", {2048, 16, 32, 8, 64, 8192, 128256, 131072}, 500000.0f,
                    1e-5f, true));
  p.back().rope_scaling = {32.0f, 1.0f, 4.0f, 8192};
  // meta-llama/Meta-Llama-3-8B.
  p.push_back(
      shape("llama-3-8b", "llama", "Llama 3 8B", {4096, 32, 32, 8, 128, 14336, 128256, 8192}, 500000.0f, 1e-5f, false));
  // TinyLlama/TinyLlama-1.1B-Chat-v1.0: the Llama 2 tokenizer's 32000 tokens.
  p.push_back(shape("tinyllama-1.1b", "llama", "TinyLlama 1.1B", {2048, 22, 32, 4, 64, 5632, 32000, 2048}, 10000.0f,
                    1e-5f, false));
  // Qwen/Qwen2.5-0.5B: q/k/v biases, tied embeddings, width 896 (not a multiple of 256, so
  // K-quant files fall back to Q5_0/Q8_0 for most matrices, as llama.cpp's do).
  p.push_back(shape("qwen2.5-0.5b", "qwen2", "Qwen2.5 0.5B", {896, 24, 14, 2, 64, 4864, 151936, 32768}, 1000000.0f,
                    1e-6f, true));
  p.back().has_qkv_bias = true;
  const SynthShape qwen2 = p.back();
  // Qwen/Qwen2.5-1.5B: the default chat model's shape (Qwen2.5-Coder-1.5B has the same).
  p.push_back(shape("qwen2.5-1.5b", "qwen2", "Qwen2.5 1.5B", {1536, 28, 12, 2, 128, 8960, 151936, 32768}, 1000000.0f,
                    1e-6f, true));
  p.back().has_qkv_bias = true;
  // google/gemma-3-270m: one KV head of 256, sliding window 512 on 5 of every 6 layers (local
  // RoPE base 10000, global 1e6), tied embeddings, 262144 tokens.
  p.push_back(shape("gemma-3-270m", "gemma3", "Gemma 3 270M", {640, 18, 4, 1, 256, 2048, 262144, 32768}, 1000000.0f,
                    1e-6f, true));
  p.back().sliding_window = 512;
  const SynthShape gemma3 = p.back();
  // google/gemma-4-26B-A4B (the keys of llama.cpp's gemma-4 vocab file): 16 heads over a width
  // of 2816, the sliding layers (window 1024, 5 of every 6) with 8 KV heads of 256, the global
  // ones with 2 of 512 rotated a quarter (proportional RoPE, base 1e6); a dense FFN of 2112
  // beside 128 experts of 704 (8 per token) in every layer; logits soft-capped at 30; tied.
  p.push_back(shape("gemma-4-26b-a4b", "gemma4", "Gemma 4 26B-A4B", {2816, 30, 16, 2, 512, 2112, 262144, 262144},
                    1000000.0f, 1e-6f, true));
  p.back().head_dim_swa = 256;
  p.back().num_kv_heads_swa = 8;
  p.back().partial_rotary_global = 0.25f;
  p.back().sliding_window = 1024;
  p.back().final_logit_softcap = 30.0f;
  set_experts(128, 8, 704, &p.back());
  const SynthShape gemma4 = p.back();
  // google/gemma-2-2b-it: 8 heads of 256 (4 KV heads) over a width of 2304, every other layer
  // sliding (window 4096), attention scores soft-capped at 50 and logits at 30, tied, 256000
  // tokens (what llama.cpp's Gemma2Model converter writes).
  p.push_back(
      shape("gemma-2-2b", "gemma2", "Gemma 2 2B", {2304, 26, 8, 4, 256, 9216, 256000, 8192}, 10000.0f, 1e-6f, true));
  p.back().sliding_window = 4096;
  p.back().attention_softcap = 50.0f;
  p.back().final_logit_softcap = 30.0f;
  const SynthShape gemma2 = p.back();
  // HuggingFaceTB/SmolLM3-3B: 16 heads of 128 (4 KV heads), no RoPE in every fourth layer, base
  // 5e6, 64K context, tied, Llama 3's 128256 tokens.
  p.push_back(shape("smollm3-3b", "smollm3", "SmolLM3 3B", {2048, 36, 16, 4, 128, 11008, 128256, 65536}, 5000000.0f,
                    1e-6f, true));
  const SynthShape smollm3 = p.back();
  // allenai/OLMo-2-0425-1B: 16 heads of 128 over 2048 (no GQA), no pre-norms, q/k normed over
  // each token's whole width, untied, 100352 rows (OLMo 2's tokenizer, padded).
  p.push_back(
      shape("olmo-2-1b", "olmo2", "OLMo 2 1B", {2048, 16, 16, 16, 128, 8192, 100352, 4096}, 500000.0f, 1e-6f, false));
  const SynthShape olmo2 = p.back();
  // ibm-granite/granite-3.3-2b-instruct: llama with config.json's multipliers (embedding 12,
  // residual 0.22, attention 1/64, logits divided by 8), 32 heads of 64 (8 KV heads), tied,
  // 49159 tokens, base 1e7.
  p.push_back(shape("granite-3.3-2b", "granite", "Granite 3.3 2B", {2048, 40, 32, 8, 64, 8192, 49159, 131072},
                    10000000.0f, 1e-5f, true));
  p.back().granite_embedding_scale = 12.0f;
  p.back().granite_residual_scale = 0.22f;
  p.back().granite_attention_scale = 0.015625f;
  p.back().granite_logit_scale = 8.0f;
  const SynthShape granite = p.back();
  // Qwen/Qwen3-0.6B: per-head q/k norms, no biases, 16 query heads of 128 over a width of 1024.
  p.push_back(
      shape("qwen3-0.6b", "qwen3", "Qwen3 0.6B", {1024, 28, 16, 8, 128, 3072, 151936, 40960}, 1000000.0f, 1e-6f, true));
  const SynthShape qwen3 = p.back();
  // microsoft/Phi-3.5-mini-instruct: q/k/v fused in attn_qkv and gate/up in ffn_up, 32 heads of
  // 96, untied, 128K context by LongRoPE over an original 4096 (config.json's factors).
  p.push_back(shape("phi-3.5-mini", "phi3", "Phi-3.5 mini", {3072, 32, 32, 32, 96, 8192, 32064, 131072}, 10000.0f,
                    1e-5f, false));
  p.back().sliding_window = 262144;  // config.json's; llama.cpp ignores it for phi3, and so do we
  p.back().longrope.original_context_length = 4096;
  p.back().longrope.long_factors = {1.08f,  1.11f,  1.14f,  1.34f,  1.59f,  1.6f,   1.62f,  2.62f,  3.23f,  3.23f,
                                    4.79f,  7.4f,   7.7f,   9.09f,  12.2f,  17.67f, 24.46f, 28.57f, 30.42f, 30.84f,
                                    32.59f, 32.93f, 42.32f, 44.96f, 50.34f, 50.45f, 57.55f, 57.93f, 58.21f, 60.14f,
                                    62.61f, 62.62f, 62.71f, 63.14f, 63.14f, 63.77f, 63.93f, 63.96f, 63.97f, 64.03f,
                                    64.07f, 64.08f, 64.12f, 64.41f, 64.48f, 64.51f, 64.53f, 64.84f};
  p.back().longrope.short_factors = {
      1.0f,  1.02f, 1.03f, 1.03f, 1.05f, 1.05f, 1.05f, 1.05f, 1.05f, 1.07f, 1.1f,  1.11f, 1.16f, 1.16f, 1.17f, 1.29f,
      1.34f, 1.68f, 1.79f, 1.82f, 1.85f, 1.88f, 1.91f, 1.94f, 1.99f, 2.02f, 2.02f, 2.02f, 2.02f, 2.02f, 2.02f, 2.03f,
      2.03f, 2.03f, 2.03f, 2.03f, 2.03f, 2.03f, 2.03f, 2.03f, 2.08f, 2.09f, 2.19f, 2.22f, 2.59f, 2.73f, 2.75f, 2.84f};
  const SynthShape phi3 = p.back();
  // Qwen/Qwen3-30B-A3B: qwen3's attention (32 heads of 128, 4 KV heads, over a width of 2048)
  // and 128 experts of 768 per layer, 8 per token (intermediate_size 6144 is written as
  // feed_forward_length, as llama.cpp's converter does), separate classifier.
  p.push_back(shape("qwen3-30b-a3b", "qwen3moe", "Qwen3 30B-A3B", {2048, 48, 32, 4, 128, 6144, 151936, 40960},
                    1000000.0f, 1e-6f, false));
  set_experts(128, 8, 768, &p.back());
  const SynthShape qwen3moe = p.back();
  // openai/gpt-oss-20b: 64 query heads of 64 (8 KV heads) over a width of 2880, 32 experts of
  // 2880, 4 per token, in MXFP4, every other layer sliding (window 128), YaRN factor 32 over
  // 4096 (context 131072), base 150000, the o200k_harmony vocabulary's 201088 rows, untied.
  p.push_back(shape("gpt-oss-20b", "gpt-oss", "gpt-oss 20B", {2880, 24, 64, 8, 64, 2880, 201088, 131072}, 150000.0f,
                    1e-5f, false));
  set_experts(32, 4, 2880, &p.back());
  p.back().sliding_window = 128;
  p.back().yarn_factor = 32.0f;
  p.back().yarn_original_context = 4096;
  p.back().has_mxfp4_experts = true;
  const SynthShape gpt_oss = p.back();
  // zai-org/GLM-4.5-Air: 96 query heads of 128 (8 KV heads) over a width of 4096, half of each
  // head rotated (NeoX), q/k/v biases, no q/k norms; layer 0 dense (10944), then 45 layers of 128
  // experts of 1408 (8 per token, sigmoid routing with selection biases, weights renormalised,
  // routed_scaling_factor 1) plus one shared expert; one multi-token-prediction layer after them;
  // 151552 tokens, untied, base 1e6, 128K context.
  p.push_back(shape("glm-4.5-air", "glm4moe", "GLM-4.5-Air", {4096, 46, 96, 8, 128, 10944, 151552, 131072}, 1000000.0f,
                    1e-5f, false));
  set_experts(128, 8, 1408, &p.back());
  p.back().has_qkv_bias = true;
  p.back().rope_dimension_count = 64;
  p.back().num_shared_experts = 1;
  p.back().num_leading_dense_layers = 1;
  p.back().num_nextn_layers = 1;
  p.back().expert_weights_scale = 1.0f;
  p.back().is_expert_weight_normalized = true;
  const SynthShape glm4moe = p.back();
  // DeepSeek-V2-Lite: latent attention without a query latent, softmax routing without biases,
  // YaRN 40x over 4096 with mscale_all_dim 0.707.
  p.push_back(shape("deepseek-v2-lite", "deepseek2", "DeepSeek-V2-Lite", {2048, 27, 16, 1, 576, 10944, 102400, 163840},
                    10000.0f, 1e-6f, false));
  set_experts(64, 6, 1408, &p.back());
  set_latent_attention(0, 512, 128, 64, 128, &p.back());
  set_deepseek_routing(2, 1, 1.0f, false, false, &p.back());
  p.back().yarn_factor = 40.0f;
  p.back().yarn_original_context = 4096;
  p.back().yarn_mscale_all_dim = 0.707f;
  const SynthShape deepseek_lite = p.back();
  // GLM-4.7-Flash (Glm4MoeLiteForCausalLM, converted as deepseek2 without its prediction layer).
  p.push_back(shape("glm-4.7-flash", "deepseek2", "GLM-4.7-Flash", {2048, 47, 20, 1, 576, 10240, 154880, 202752},
                    1000000.0f, 1e-5f, false));
  set_experts(64, 4, 1536, &p.back());
  set_latent_attention(768, 512, 192, 64, 256, &p.back());
  set_deepseek_routing(1, 1, 1.8f, true, true, &p.back());
  p.back().num_expert_groups = p.back().num_expert_groups_used = 1;
  // DeepSeek-V3 / V3.1 (and R1): 256 experts in 8 groups of which a token uses 4.
  p.push_back(shape("deepseek-v3", "deepseek2", "DeepSeek-V3", {7168, 61, 128, 1, 576, 18432, 129280, 163840}, 10000.0f,
                    1e-6f, false));
  set_experts(256, 8, 2048, &p.back());
  set_latent_attention(1536, 512, 128, 64, 128, &p.back());
  set_deepseek_routing(1, 3, 2.5f, true, true, &p.back());
  p.back().num_expert_groups = 8;
  p.back().num_expert_groups_used = 4;
  p.back().yarn_factor = 40.0f;
  p.back().yarn_original_context = 4096;
  p.back().yarn_mscale_all_dim = 1.0f;
  const SynthShape deepseek_v3 = p.back();
  // Kimi K2: DeepSeek V3's layout with 384 experts, 64 heads, one dense layer, no groups.
  p.push_back(
      shape("kimi-k2", "deepseek2", "Kimi K2", {7168, 61, 64, 1, 576, 18432, 163840, 131072}, 50000.0f, 1e-6f, false));
  set_experts(384, 8, 2048, &p.back());
  set_latent_attention(1536, 512, 128, 64, 128, &p.back());
  set_deepseek_routing(1, 1, 2.827f, true, true, &p.back());
  p.back().num_expert_groups = p.back().num_expert_groups_used = 1;
  p.back().yarn_factor = 32.0f;
  p.back().yarn_original_context = 4096;
  p.back().yarn_mscale_all_dim = 1.0f;

  // Small shapes for tests: every architecture, K-quant-compatible widths (256) and one that
  // is not (192, like Qwen's 896), and enough gemma3 layers for a global one.
  p.push_back(test_shape(p[2], "test-llama", "small llama shape for tests", {256, 2, 4, 2, 64, 512, 320, 512}));
  p.push_back(test_shape(qwen2, "test-qwen2", "small qwen2 shape for tests", {192, 3, 3, 1, 64, 512, 320, 512}));
  p.push_back(test_shape(gemma3, "test-gemma3", "small gemma3 shape for tests", {256, 7, 2, 1, 128, 512, 320, 512}));
  p.back().sliding_window = 16;
  // Caps low enough that random weights reach them (scores and logits of a few units), so the
  // soft-caps change what a test compares; a window shorter than a test's prompt.
  p.push_back(test_shape(gemma2, "test-gemma2", "small gemma2 shape for tests", {256, 4, 2, 1, 128, 512, 320, 512}));
  p.back().sliding_window = 8;
  p.back().attention_softcap = 2.0f;
  p.back().final_logit_softcap = 1.5f;
  // Layers 3 and 7 without RoPE; untied (varied greedy tokens).
  p.push_back(test_shape(smollm3, "test-smollm3", "small smollm3 shape for tests", {256, 8, 4, 2, 64, 512, 320, 512}));
  p.back().is_embedding_tied = false;
  // OLMo 2's shape in small (GQA, which OLMo 2 does not use, to cover k's own norm width), and
  // OLMo 3's window: layers 0-2 and 4-6 of 8 slide (window 6), 3 and 7 are global.
  p.push_back(test_shape(olmo2, "test-olmo2", "small olmo2 shape for tests", {256, 4, 4, 2, 64, 512, 320, 512}));
  p.push_back(test_shape(olmo2, "test-olmo3", "small olmo2 shape with OLMo 3's window, for tests",
                         {256, 8, 4, 2, 64, 512, 320, 512}));
  p.back().sliding_window = 6;
  p.push_back(test_shape(granite, "test-granite", "small granite shape for tests", {256, 3, 4, 2, 64, 512, 320, 512}));
  p.push_back(test_shape(qwen3, "test-qwen3", "small qwen3 shape for tests", {128, 2, 4, 2, 64, 256, 320, 512}));
  // Width 192 (not a K-quant multiple), GQA, and LongRoPE with an original context of 256 in a
  // context of 1024, so a test can pick either factor set.
  p.push_back(test_shape(phi3, "test-phi3", "small phi3 shape for tests", {192, 2, 3, 1, 64, 320, 320, 1024}));
  p.back().sliding_window = 0;
  p.back().longrope.original_context_length = 256;
  p.back().longrope.long_factors.clear();
  p.back().longrope.short_factors.clear();
  for (int i = 0; i < 32; ++i) {
    p.back().longrope.short_factors.push_back(1.0f + 0.05f * static_cast<float>(i));
    p.back().longrope.long_factors.push_back(1.0f + 1.5f * static_cast<float>(i));
  }
  p.push_back(
      test_shape(qwen3moe, "test-qwen3moe", "small qwen3moe shape for tests", {256, 2, 4, 2, 64, 512, 320, 512}));
  set_experts(8, 2, 256, &p.back());
  // Width 160 under 4 heads of 64 (as gpt-oss's 2880 under 64 x 64), 3 layers (two sliding,
  // window 8), 6 experts of 96, 2 per token, YaRN factor 4 over 256.
  p.push_back(test_shape(gpt_oss, "test-gpt-oss", "small gpt-oss shape for tests", {160, 3, 4, 2, 64, 96, 320, 1024}));
  set_experts(6, 2, 96, &p.back());
  p.back().sliding_window = 8;
  p.back().yarn_factor = 4.0f;
  p.back().yarn_original_context = 256;
  // GLM-4.5's (355B) settings in small: per-head q/k norms, routed weights scaled by 2.5; 4
  // layers of which the first is dense, 6 experts of 64 (2 per token) and a shared one, one
  // prediction layer; half of each 64-wide head rotated; width 192 under 4 heads of 64 (the
  // head size is its own key).
  p.push_back(test_shape(glm4moe, "test-glm4moe", "small glm4moe shape for tests", {192, 4, 4, 2, 64, 320, 320, 512}));
  set_experts(6, 2, 64, &p.back());
  p.back().rope_dimension_count = 32;
  p.back().has_optional_qk_norm = true;
  p.back().expert_weights_scale = 2.5f;
  // DeepSeek V3's settings in small: a query latent, sigmoid routing with biases in 4 groups of
  // which 2 are used, YaRN with the log multiplier (over a context the tests' prompts pass).
  p.push_back(test_shape(deepseek_v3, "test-deepseek2", "small deepseek2 shape (DeepSeek V3 settings) for tests",
                         {256, 4, 4, 1, 160, 512, 320, 512}));
  set_experts(8, 2, 64, &p.back());
  set_latent_attention(128, 128, 64, 32, 64, &p.back());
  set_deepseek_routing(1, 1, 2.5f, true, true, &p.back());
  p.back().num_expert_groups = 4;
  p.back().num_expert_groups_used = 2;
  p.back().yarn_factor = 4.0f;
  p.back().yarn_original_context = 16;
  // DeepSeek-V2-Lite's in small: no query latent, softmax routing without biases, two shared
  // experts, widths K-quants cannot split (their fallbacks). 26 layers: llama.cpp reads a file
  // without attention.q_lora_rank only at 26 or 27 layers (its "lite" test).
  p.push_back(test_shape(deepseek_lite, "test-deepseek2-lite",
                         "small deepseek2 shape (DeepSeek-V2-Lite settings) for tests",
                         {192, 26, 3, 1, 128, 320, 320, 512}));
  set_experts(6, 2, 64, &p.back());
  set_latent_attention(0, 96, 64, 32, 32, &p.back());
  set_deepseek_routing(2, 1, 1.0f, false, false, &p.back());
  p.back().yarn_factor = 0.0f;
  p.back().yarn_mscale_all_dim = 0.0f;
  // Gemma 4's settings in small: 7 layers of which the sixth is global (heads of 128, one KV
  // head, a quarter rotated, values from the keys' projection) and the rest slide (heads of
  // 64, two KV heads, window 8); a final soft-cap random logits reach; with 8 experts of 64 (2
  // per token, gate and up stored together) beside the dense FFN, and without.
  p.push_back(test_shape(gemma4, "test-gemma4", "small gemma4 shape (26B-A4B settings) for tests",
                         {256, 7, 4, 1, 128, 320, 320, 512}));
  p.back().head_dim_swa = 64;
  p.back().num_kv_heads_swa = 2;
  p.back().sliding_window = 8;
  p.back().final_logit_softcap = 3.0f;
  p.back().has_global_value_from_key = true;
  p.back().has_fused_expert_gate_up = true;
  p.back().is_embedding_tied = false;
  set_experts(8, 2, 64, &p.back());
  p.push_back(p.back());
  p.back().name = "test-gemma4-dense";
  p.back().description = "small gemma4 shape (31B settings: no experts) for tests";
  set_experts(0, 0, 0, &p.back());
  p.back().has_global_value_from_key = false;
  // Gemma 4 E2B's settings in small: 12 layers (5 sliding, a global one, twice), the last 6
  // reading layers 4 and 5's KV cache with a FFN twice as wide, per-layer embeddings of 32.
  p.push_back(p.back());
  p.back().name = "test-gemma4-e2b";
  p.back().description = "small gemma4 shape (E2B settings: shared KV layers, per-layer embeddings) for tests";
  p.back().num_layers = 12;
  p.back().feed_forward_length = 256;
  p.back().num_kv_shared_layers = 6;
  p.back().has_double_wide_shared_ffn = true;
  p.back().per_layer_embedding_length = 32;
  // Qwen/Qwen3.5-9B: 24 recurrent layers (a gated delta net of 16 key and 32 value heads of 128,
  // 4 taps) and 8 attention layers (16 heads of 256 over 4 KV heads, a quarter of each rotated,
  // base 1e7, output gates); 248320 tokens.
  p.push_back(shape("qwen3.5-9b", "qwen35", "Qwen3.5 9B", {4096, 32, 16, 4, 256, 12288, 248320, 262144}, 10000000.0f,
                    1e-6f, false));
  set_qwen35_linear(4, 16, 32, 128, 4, &p.back());
  const SynthShape qwen35 = p.back();
  // Qwen/Qwen3.5-27B: 48 recurrent layers of 16 key and 48 value heads, 16 attention layers of 24 heads.
  p.push_back(shape("qwen3.5-27b", "qwen35", "Qwen3.5 27B", {5120, 64, 24, 4, 256, 17408, 248320, 262144}, 10000000.0f,
                    1e-6f, false));
  set_qwen35_linear(4, 16, 48, 128, 4, &p.back());
  // Qwen 3.5's layout in small: 8 layers (3 recurrent, then one attention layer, twice), 2 key
  // and 4 value heads of 64 in the recurrent layers, 4 heads of 64 over 2 KV heads rotated 16.
  p.push_back(test_shape(qwen35, "test-qwen35", "small qwen35 shape (Qwen3.5 settings) for tests",
                         {256, 8, 4, 2, 64, 320, 320, 512}));
  set_qwen35_linear(4, 2, 4, 64, 4, &p.back());
  p.back().rope_dimension_count = 16;
  // Qwen/Qwen3.5-35B-A3B: qwen35's layers (30 recurrent, 10 attention: 16 heads over 2 KV heads
  // of 256) over a width of 2048, each FFN 256 experts of 512 (8 per token) and a gated shared
  // expert of 512.
  p.push_back(shape("qwen3.5-35b-a3b", "qwen35moe", "Qwen3.5 35B-A3B", {2048, 40, 16, 2, 256, 512, 248320, 262144},
                    10000000.0f, 1e-6f, false));
  set_qwen35_linear(4, 16, 32, 128, 4, &p.back());
  set_experts(256, 8, 512, &p.back());
  p.back().num_shared_experts = 1;
  // Its layout in small: test-qwen35's layers, 8 experts of 64 (2 per token) and a shared one.
  p.push_back(test_shape(p.back(), "test-qwen35moe", "small qwen35moe shape (Qwen3.5 35B-A3B settings) for tests",
                         {256, 8, 4, 2, 64, 64, 320, 512}));
  set_qwen35_linear(4, 2, 4, 64, 4, &p.back());
  set_experts(8, 2, 64, &p.back());
  return p;
}

// Gemma 4's parameters (the tensors add_gemma4_layer writes).
int64_t gemma4_parameters(const SynthShape& s) {
  const int64_t d = s.embedding_length;
  // rope_freqs where a global layer reads it (every sixth layer is global).
  int64_t total = s.vocab_size * d * (s.is_embedding_tied ? 1 : 2) + d + (s.num_layers >= 6 ? s.head_dim / 2 : 0);
  const int64_t pl = s.per_layer_embedding_length;
  if (pl > 0) total += pl * s.num_layers * (s.vocab_size + d) + pl;  // per-layer table, projection, norm
  for (int64_t il = 0; il < s.num_layers; ++il) {
    const int64_t q = s.layer_q_width(il), kv = s.is_kv_shared(il) ? 0 : s.layer_kv_width(il);
    const bool has_v = s.is_gemma4_sliding(il) || !s.has_global_value_from_key;
    total += d * q + d * kv * (has_v ? 2 : 1) + q * d + s.layer_head_dim(il) * (kv > 0 ? 2 : 1) + 4 * d + 1 +
             3 * d * s.layer_ff(il) + (pl > 0 ? 2 * d * pl + d : 0);
    if (s.num_experts > 0) {
      total += d * s.num_experts + d + 3 * d * s.expert_feed_forward_length * s.num_experts + s.num_experts + 3 * d;
    }
  }
  return total;
}

// Qwen 3.5's parameters (the tensors add_qwen35_layer writes).
int64_t qwen35_parameters(const SynthShape& s) {
  const int64_t d = s.embedding_length, heads = s.linear_num_value_heads, channels = s.linear_conv_channels();
  int64_t total = s.vocab_size * d * (s.is_embedding_tied ? 1 : 2) + d;
  // The trunk, then the prediction layers (attention layers, with a projection and 3 norms).
  for (int64_t il = 0; il < s.num_layers + s.num_nextn_layers; ++il) {
    if (il >= s.num_layers) total += 2 * d * d + 3 * d;
    total += 2 * d;           // attn_norm, post_attention_norm
    if (s.num_experts > 0) {  // router, experts, the shared expert and its gate
      total += d * s.num_experts + 3 * d * s.expert_feed_forward_length * (s.num_experts + s.num_shared_experts) + d;
    } else {
      total += 3 * d * s.feed_forward_length;
    }
    if (s.is_recurrent_layer(il)) {
      total += d * channels + d * s.linear_value_width() + s.linear_conv_kernel * channels + 2 * heads + 2 * d * heads +
               s.linear_head_dim + s.linear_value_width() * d;
    } else {
      total += 2 * d * s.q_width() + 2 * d * s.kv_width() + 2 * s.head_dim + s.q_width() * d;
    }
  }
  return total;
}

// deepseek2's attention: the query (through its latent and norm, or straight), the key/value
// latent and its norm, attn_k_b and attn_v_b of every head, the output.
int64_t latent_attention_parameters(const SynthShape& s) {
  const int64_t d = s.embedding_length, heads = s.num_heads, rope = s.rope_dimension_count;
  const int64_t q = s.q_lora_rank > 0 ? d * s.q_lora_rank + s.q_lora_rank + s.q_lora_rank * heads * s.mla_head_dim_k
                                      : d * heads * s.mla_head_dim_k;
  return q + d * (s.kv_lora_rank + rope) + s.kv_lora_rank + heads * (s.mla_head_dim_k - rope) * s.kv_lora_rank +
         heads * s.kv_lora_rank * s.mla_head_dim_v + heads * s.mla_head_dim_v * d;
}

}  // namespace

int64_t SynthShape::num_parameters() const {
  const int64_t d = embedding_length;
  const ArchitectureTraits* arch = find_architecture(architecture);
  if (arch != nullptr && arch->is_gemma4) return gemma4_parameters(*this);
  if (arch != nullptr && arch->has_recurrent_layers) return qwen35_parameters(*this);
  const bool is_latent = arch != nullptr && arch->has_latent_attention;
  int64_t per_layer =
      is_latent ? latent_attention_parameters(*this) : d * q_width() + 2 * d * kv_width() + q_width() * d;  // attention
  // Routed experts (and DeepSeek routing's selection bias and shared experts), or a dense FFN.
  const bool has_selection_bias = arch != nullptr && arch->has_deepseek_routing && has_expert_selection_bias;
  const int64_t expert_ffn = d * num_experts + 3 * d * expert_feed_forward_length * num_experts +
                             (has_selection_bias ? num_experts : 0) +
                             3 * d * expert_feed_forward_length * num_shared_experts;
  const int64_t dense_ffn = 3 * d * feed_forward_length;  // gate, up, down
  if (has_qkv_bias) per_layer += q_width() + 2 * kv_width();
  if (const ArchitectureTraits* a = arch) {
    if (a->has_attention_sinks) per_layer += num_heads;
    if (a->has_expert_biases) {  // q/k/v/o, router and expert biases
      per_layer += q_width() + 2 * kv_width() + d + num_experts * (1 + 2 * expert_feed_forward_length + d);
    }
    if (a->has_qk_norm && (!a->is_qk_norm_optional || has_optional_qk_norm)) {
      per_layer += a->is_qk_norm_full_width ? q_width() + kv_width() : 2 * head_dim;  // q/k norms
    }
    if (a->has_pre_norms) per_layer += 2 * d;   // attn_norm, ffn_norm
    if (a->has_post_norms) per_layer += 2 * d;  // post-norms
  } else {
    per_layer += 2 * d;
  }
  const int64_t dense_layers = num_experts > 0 ? num_leading_dense_layers : num_layers;
  int64_t total = num_layers * per_layer + dense_layers * dense_ffn + (num_layers - dense_layers) * expert_ffn;
  // glm4moe's prediction layers: an expert layer, its projection of [embedding; hidden], 3 norms.
  total += num_nextn_layers * (per_layer + expert_ffn + 2 * d * d + 3 * d);
  total += vocab_size * d + d;  // embedding, final norm
  if (!is_embedding_tied) total += vocab_size * d;
  if (rope_scaling.is_enabled()) total += head_dim / 2;
  if (longrope.is_enabled()) total += head_dim;  // long and short factors
  return total;
}

SynthShape SynthShape::with_layers(int64_t n) const {
  SynthShape s = *this;
  s.num_layers = n;
  s.num_leading_dense_layers = std::min(num_leading_dense_layers, n);
  return s;
}

ModelConfig shape_config(const SynthShape& s) {
  ModelConfig c;
  c.context_length_train = s.context_length;
  c.embedding_length = s.embedding_length;
  c.num_layers = s.num_layers;
  c.num_heads = s.num_heads;
  c.num_kv_heads = s.num_kv_heads;
  c.head_dim_k = c.head_dim_v = s.head_dim;
  c.feed_forward_length = s.feed_forward_length;
  c.vocab_size = s.vocab_size;
  c.rms_norm_eps = s.rms_norm_eps;
  c.rope_num_rotated = s.head_dim;
  c.num_experts = s.num_experts;
  c.num_experts_used = s.num_experts_used;
  c.expert_feed_forward_length = s.expert_feed_forward_length;
  c.rope_freq_base = c.rope_freq_base_swa = s.rope_freq_base;
  if (s.rope_dimension_count > 0) c.rope_num_rotated = s.rope_dimension_count;
  if (const ArchitectureTraits* a = find_architecture(s.architecture)) {
    apply_architecture(*a, s.sliding_window, &c);
    if (a->has_deepseek_routing) {  // as model_config.cpp reads the keys set_metadata writes
      c.is_expert_gating_sigmoid = s.expert_gating_func == 2;
      c.has_expert_selection_bias = s.has_expert_selection_bias;
      c.num_expert_groups = s.num_expert_groups;
      c.num_expert_groups_used = s.num_expert_groups_used;
      c.expert_weights_scale = s.expert_weights_scale != 0.0f ? s.expert_weights_scale : 1.0f;
      c.is_expert_weight_normalized = s.is_expert_weight_normalized;
      c.num_shared_experts = s.num_shared_experts;
      c.num_leading_dense_layers = s.num_leading_dense_layers;
      c.num_nextn_layers = s.num_nextn_layers;
      c.has_qk_norm = s.has_optional_qk_norm;
    }
    if (c.sliding_window > 0 && !a->is_sliding_rope_global) c.rope_freq_base_swa = 10000.0f;  // llama.cpp's default
    if (a->has_granite_scales) {  // the keys set_metadata writes
      if (s.granite_embedding_scale != 0.0f) c.embedding_scale = s.granite_embedding_scale;
      if (s.granite_residual_scale != 0.0f) c.residual_scale = s.granite_residual_scale;
      if (s.granite_attention_scale != 0.0f) c.attention_scale = s.granite_attention_scale;
      if (s.granite_logit_scale != 0.0f) c.logit_scale = s.granite_logit_scale;
    }
    if (a->has_logit_softcaps) {  // the keys set_metadata writes, or llama.cpp's defaults
      c.attention_softcap = s.attention_softcap > 0.0f ? s.attention_softcap : 50.0f;
      c.final_logit_softcap = s.final_logit_softcap > 0.0f ? s.final_logit_softcap : 30.0f;
    }
  }
  if (s.yarn_factor > 0.0f) {  // as model_config.cpp reads the keys set_metadata writes
    c.rope_freq_scale = 1.0f / s.yarn_factor;
    c.rope_freq_scale_swa = c.is_sliding_rope_unscaled ? 1.0f : c.rope_freq_scale;
    c.rope_ext_factor = 1.0f;
    c.rope_yarn_original_context = s.yarn_original_context;
    const float mscale = 0.1f * std::log(s.yarn_factor) + 1.0f;
    c.rope_yarn_attn_factor = s.yarn_factor <= 1.0f ? 1.0f : mscale * (1.0f / (1.0f + 0.1f * std::log(s.yarn_factor)));
  }
  if (s.kv_lora_rank > 0) {  // deepseek2's latent attention
    c.q_lora_rank = s.q_lora_rank;
    c.kv_lora_rank = s.kv_lora_rank;
    c.mla_head_dim_k = s.mla_head_dim_k;
    c.mla_head_dim_v = s.mla_head_dim_v;
    c.head_dim_v = s.kv_lora_rank;
    c.rope_yarn_log_multiplier = s.yarn_mscale_all_dim;
    if (s.yarn_mscale_all_dim != 0.0f && s.yarn_factor > 1.0f) {
      c.rope_yarn_attn_factor = 1.0f / (1.0f + 0.1f * std::log(s.yarn_factor));  // the magnitude goes to q.k
    }
    c.attention_scale = latent_attention_scale(c);
  }
  if (s.longrope.is_enabled()) {
    c.rope_original_context = s.longrope.original_context_length;
    c.rope_attn_factor = longrope_attn_factor(s);
    c.attention_scale *= c.rope_attn_factor * c.rope_attn_factor;
  }
  if (s.full_attention_interval > 0) {  // qwen35: as qwen35_config.cpp reads the keys set_qwen35_metadata writes
    c.linear_conv_kernel = s.linear_conv_kernel;
    c.linear_num_key_heads = s.linear_num_key_heads;
    c.linear_num_value_heads = s.linear_num_value_heads;
    c.linear_head_dim = s.linear_head_dim;
    if (s.num_shared_experts > 0) {  // qwen35moe's gated shared expert
      c.num_shared_experts = 1;
      c.shared_expert_feed_forward_length = s.expert_feed_forward_length * s.num_shared_experts;
      c.has_shared_expert_gate = true;
    }
    for (int64_t il = 0; il < s.num_layers; ++il) {
      c.is_recurrent_layer.push_back(s.is_recurrent_layer(il));
      c.layer_kv_heads.push_back(s.is_recurrent_layer(il) ? 0 : s.num_kv_heads);
    }
  }
  if (s.head_dim_swa > 0) {  // gemma4: as model_config.cpp reads the keys set_gemma4_metadata writes
    for (int64_t il = 0; il < s.num_layers; ++il) c.is_sliding_layer[static_cast<size_t>(il)] = s.is_gemma4_sliding(il);
    if (s.head_dim_swa != s.head_dim) c.head_dim_k_swa = c.head_dim_v_swa = c.rope_num_rotated_swa = s.head_dim_swa;
    if (s.num_kv_heads_swa != s.num_kv_heads) {
      for (int64_t il = 0; il < s.num_layers; ++il) c.layer_kv_heads.push_back(s.layer_kv_heads(il));
    }
    c.final_logit_softcap = s.final_logit_softcap > 0.0f ? s.final_logit_softcap : 30.0f;  // llama.cpp's default
    c.has_parallel_dense_ffn = s.num_experts > 0;
    c.num_kv_shared_layers = s.num_kv_shared_layers;
    c.per_layer_embedding_length = s.per_layer_embedding_length;
    if (s.has_double_wide_shared_ffn) {
      for (int64_t il = 0; il < s.num_layers; ++il) c.layer_ff.push_back(s.layer_ff(il));
      c.feed_forward_length = 2 * s.feed_forward_length;
    }
  }
  return c;
}

const std::vector<SynthShape>& synth_presets() {
  static const std::vector<SynthShape> kPresets = make_presets();
  return kPresets;
}

const SynthShape* find_synth_preset(std::string_view name) {
  for (const SynthShape& s : synth_presets()) {
    if (s.name == name) return &s;
  }
  return nullptr;
}

std::vector<float> llama3_rope_factors(const SynthShape& shape) {
  const Llama3RopeScaling& r = shape.rope_scaling;
  // Wavelengths shorter than the high-frequency bound keep their frequency, longer than the
  // low-frequency bound are divided by `factor`, and the band between is interpolated.
  const double low_freq_wavelen = static_cast<double>(r.original_context_length) / r.low_freq_factor;
  const double high_freq_wavelen = static_cast<double>(r.original_context_length) / r.high_freq_factor;
  std::vector<float> factors;
  for (int64_t i = 0; i < shape.head_dim; i += 2) {
    // The converter computes the base frequencies in float32.
    const float freq =
        1.0f / std::pow(shape.rope_freq_base, static_cast<float>(i) / static_cast<float>(shape.head_dim));
    const double wavelen = 2.0 * std::numbers::pi / static_cast<double>(freq);
    if (wavelen < high_freq_wavelen) {
      factors.push_back(1.0f);
    } else if (wavelen > low_freq_wavelen) {
      factors.push_back(r.factor);
    } else {
      const double smooth = (static_cast<double>(r.original_context_length) / wavelen - r.low_freq_factor) /
                            (r.high_freq_factor - r.low_freq_factor);
      factors.push_back(static_cast<float>(1.0 / ((1.0 - smooth) / r.factor + smooth)));
    }
  }
  return factors;
}

float longrope_attn_factor(const SynthShape& s) {
  const double original = static_cast<double>(s.longrope.original_context_length);
  const double scale = static_cast<double>(s.context_length) / original;
  return scale > 1.0 ? static_cast<float>(std::sqrt(1.0 + std::log(scale) / std::log(original))) : 1.0f;
}

}  // namespace iwb::synth
