// Test helper: writes small GGUF models of the llama, qwen2, gemma2, gemma3, qwen3, phi3, qwen3moe, gpt-oss,
// smollm3, olmo2, granite and glm4moe architectures with random weights of realistic scale, in F32, Q8_0, or a
// Q4_K_M-like mix of K-quants, plus a small SentencePiece vocabulary so the engine's tokenizer loads.
#pragma once

#include "../kernels/random_tensors.h"

#include "iwb/engine/gguf/gguf_writer.h"
#include "iwb/engine/status.h"

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace iwb::test {

enum class WeightPreset { F32, Q8_0, MixedK };

inline const char* preset_name(WeightPreset p) {
  return p == WeightPreset::F32 ? "F32" : p == WeightPreset::Q8_0 ? "Q8_0" : "Q4_K/Q6_K/Q5_0 mix";
}

struct TinyModelSpec {
  // llama, qwen2, gemma2, gemma3, qwen3, phi3 (fused attn_qkv and gate/up), qwen3moe, gpt-oss, smollm3, olmo2,
  // granite
  std::string arch = "llama";
  int64_t n_embd = 256;
  int64_t n_layer = 2;
  int64_t n_head = 8;
  int64_t n_kv_head = 2;
  int64_t head_dim = 32;  // written as key_length/value_length when != n_embd / n_head
  int64_t n_ff = 512;
  int64_t vocab = 320;
  int64_t context = 512;
  int64_t sliding_window = 0;  // gemma3, gemma2, gpt-oss
  // gemma2: <arch>.attn_logit_softcapping / final_logit_softcapping unless 0 (absent: 50 and 30).
  // granite's multipliers (written for arch "granite"; logit_scale 0 writes 1, as it is required).
  float embedding_scale = 0.0f, residual_scale = 0.0f, attention_scale = 0.0f, logit_scale = 0.0f;
  std::vector<bool> sliding_pattern;  // <arch>.attention.sliding_window_pattern when not empty (OLMo 3)
  float attn_softcap = 0.0f;
  float final_softcap = 0.0f;
  float rope_base = 10000.0f;
  float rope_scale_factor = 0.0f;  // > 0: linear RoPE scaling
  bool is_output_tied = false;
  bool has_qkv_bias = false;
  bool has_rope_freqs = false;  // llama 3's per-pair RoPE frequency divisors (rope_freqs.weight)
  // phi3 LongRoPE: > 0 writes rope_factors_long/short.weight (far apart, so using the wrong set
  // shows), the original context, and the converter's attention factor for `context`.
  int64_t rope_original_context = 0;
  // qwen3moe: experts per layer, per token, and each expert's width (n_ff is then metadata only).
  int64_t n_expert = 8;
  int64_t n_expert_used = 2;
  int64_t n_ff_exp = 96;
  float router_rms = 0.3f;  // router weights' scale: decisive routing (see test_forward_reference)
  // gpt-oss (always: q/k/v/o biases, sinks, router and expert biases): experts in MXFP4 (as
  // llama.cpp writes them), and YaRN over an original context (factor > 0).
  bool has_mxfp4_experts = false;
  float yarn_factor = 0.0f;
  int64_t yarn_original_context = 0;
  // glm4moe (always: sigmoid routing with a selection bias per expert, renormalised weights):
  // shared experts, leading dense layers (of n_ff), prediction layers after the trunk (written
  // with their nextn tensors; not run), the routed weights' scale, per-head q/k norms, the
  // rotated part of each head (0: all of it).
  int64_t n_shared_expert = 1;
  int64_t n_dense_lead = 1;
  int64_t n_nextn = 1;
  float expert_weights_scale = 2.5f;
  bool has_glm_qk_norm = true;
  int64_t rope_dims = 0;
  float selection_bias_rms = 0.3f;
  bool has_shared_count_key = true;  // false: leave <arch>.expert_shared_count out (an error test)
  uint32_t expert_gating_func = 2;   // llama.cpp's LLAMA_EXPERT_GATING_FUNC_TYPE_SIGMOID
  WeightPreset preset = WeightPreset::F32;
  uint32_t seed = 1;
  // For error tests: a tensor left out, and a feed-forward width declared unlike the tensors.
  std::string skip_tensor;
  int64_t declared_n_ff = 0;  // 0: n_ff
  // Other text metadata (tokenizer.chat_template, ...).
  std::vector<std::pair<std::string, std::string>> strings;
};

// <unk> <s> </s>, the 256 byte tokens, then single letters with and without the SPM space mark.
inline void write_test_vocab(int64_t vocab, gguf::GgufWriter* w) {
  std::vector<std::string> tokens = {"<unk>", "<s>", "</s>"};
  std::vector<int32_t> types = {2, 3, 3};
  char hex[8];
  for (int b = 0; b < 256; ++b) {
    std::snprintf(hex, sizeof hex, "<0x%02X>", b);
    tokens.push_back(hex);
    types.push_back(6);
  }
  for (int i = 0; static_cast<int64_t>(tokens.size()) < vocab; ++i) {
    std::string piece = (i % 2 ? "" : "\xE2\x96\x81") + std::string(1, static_cast<char>('a' + (i / 2) % 26));
    if (i >= 52) piece += std::to_string(i);
    tokens.push_back(piece);
    types.push_back(1);
  }
  std::vector<float> scores(tokens.size());
  for (size_t i = 0; i < scores.size(); ++i) scores[i] = -static_cast<float>(i);
  w->set_string("tokenizer.ggml.model", "llama");
  w->set("tokenizer.ggml.tokens", gguf::Value::string_array(tokens));
  w->set("tokenizer.ggml.scores", gguf::Value::f32_array(scores));
  w->set("tokenizer.ggml.token_type", gguf::Value::i32_array(types));
  w->set_u32("tokenizer.ggml.bos_token_id", 1);
  w->set_u32("tokenizer.ggml.eos_token_id", 2);
  w->set_u32("tokenizer.ggml.unknown_token_id", 0);
  w->set_bool("tokenizer.ggml.add_bos_token", true);
}

class TinyModelWriter {
 public:
  explicit TinyModelWriter(const TinyModelSpec& spec) : m_spec(spec), m_rng(spec.seed) {}

  Status write(const std::string& path) {
    const TinyModelSpec& s = m_spec;
    const std::string a = s.arch;
    m_writer.set_string("general.architecture", a);
    m_writer.set_string("general.name", "tiny-" + a);
    for (const auto& [key, value] : s.strings) m_writer.set_string(key, value);
    m_writer.set_u32(a + ".context_length", static_cast<uint32_t>(s.context));
    m_writer.set_u32(a + ".embedding_length", static_cast<uint32_t>(s.n_embd));
    const bool is_glm = a == "glm4moe";
    const int64_t nextn = is_glm ? s.n_nextn : 0;
    m_writer.set_u32(a + ".block_count", static_cast<uint32_t>(s.n_layer + nextn));
    m_writer.set_u32(a + ".feed_forward_length", static_cast<uint32_t>(s.declared_n_ff ? s.declared_n_ff : s.n_ff));
    m_writer.set_u32(a + ".attention.head_count", static_cast<uint32_t>(s.n_head));
    m_writer.set_u32(a + ".attention.head_count_kv", static_cast<uint32_t>(s.n_kv_head));
    if (s.head_dim != s.n_embd / s.n_head) {
      m_writer.set_u32(a + ".attention.key_length", static_cast<uint32_t>(s.head_dim));
      m_writer.set_u32(a + ".attention.value_length", static_cast<uint32_t>(s.head_dim));
    }
    m_writer.set_f32(a + ".rope.freq_base", s.rope_base);
    if (s.rope_scale_factor > 0) {
      m_writer.set_string(a + ".rope.scaling.type", "linear");
      m_writer.set_f32(a + ".rope.scaling.factor", s.rope_scale_factor);
    }
    m_writer.set_f32(a + ".attention.layer_norm_rms_epsilon", 1e-6f);
    if (s.sliding_window > 0)
      m_writer.set_u32(a + ".attention.sliding_window", static_cast<uint32_t>(s.sliding_window));
    if (a == "granite") {
      if (s.embedding_scale != 0) m_writer.set_f32(a + ".embedding_scale", s.embedding_scale);
      if (s.residual_scale != 0) m_writer.set_f32(a + ".residual_scale", s.residual_scale);
      if (s.attention_scale != 0) m_writer.set_f32(a + ".attention.scale", s.attention_scale);
      m_writer.set_f32(a + ".logit_scale", s.logit_scale != 0 ? s.logit_scale : 1.0f);
    }
    if (!s.sliding_pattern.empty()) {
      gguf::Array pattern{gguf::ValueType::Bool, {}};
      for (bool b : s.sliding_pattern) pattern.items.push_back(gguf::Value::boolean(b));
      m_writer.set(a + ".attention.sliding_window_pattern", gguf::Value::array(std::move(pattern)));
    }
    if (s.attn_softcap != 0) m_writer.set_f32(a + ".attn_logit_softcapping", s.attn_softcap);
    if (s.final_softcap != 0) m_writer.set_f32(a + ".final_logit_softcapping", s.final_softcap);
    if (s.rope_original_context > 0) {
      const double original = static_cast<double>(s.rope_original_context);
      const double attn_factor =
          std::sqrt(1.0 + std::log(static_cast<double>(s.context) / original) / std::log(original));
      m_writer.set_u32(a + ".rope.scaling.original_context_length", static_cast<uint32_t>(s.rope_original_context));
      m_writer.set_f32(a + ".rope.scaling.attn_factor", static_cast<float>(attn_factor));
    }
    if (s.yarn_factor > 0) {
      m_writer.set_string(a + ".rope.scaling.type", "yarn");
      m_writer.set_f32(a + ".rope.scaling.factor", s.yarn_factor);
      m_writer.set_u32(a + ".rope.scaling.original_context_length", static_cast<uint32_t>(s.yarn_original_context));
    }
    const bool is_gpt_oss = a == "gpt-oss";
    if (a == "qwen3moe" || is_gpt_oss || is_glm) {
      m_writer.set_u32(a + ".expert_count", static_cast<uint32_t>(s.n_expert));
      m_writer.set_u32(a + ".expert_used_count", static_cast<uint32_t>(s.n_expert_used));
      m_writer.set_u32(a + ".expert_feed_forward_length", static_cast<uint32_t>(s.n_ff_exp));
    }
    if (is_glm) {  // the keys llama.cpp's Glm4MoeModel converter writes
      if (s.has_shared_count_key) {
        m_writer.set_u32(a + ".expert_shared_count", static_cast<uint32_t>(s.n_shared_expert));
      }
      m_writer.set_u32(a + ".leading_dense_block_count", static_cast<uint32_t>(s.n_dense_lead));
      m_writer.set_u32(a + ".expert_gating_func", s.expert_gating_func);
      m_writer.set_f32(a + ".expert_weights_scale", s.expert_weights_scale);
      m_writer.set_bool(a + ".expert_weights_norm", true);
      if (s.n_nextn > 0) m_writer.set_u32(a + ".nextn_predict_layers", static_cast<uint32_t>(s.n_nextn));
    }
    if (s.rope_dims > 0) m_writer.set_u32(a + ".rope.dimension_count", static_cast<uint32_t>(s.rope_dims));
    write_test_vocab(s.vocab, &m_writer);

    const int64_t q = s.n_head * s.head_dim, kv = s.n_kv_head * s.head_dim;
    IWB_RETURN_IF_ERROR(matrix("token_embd.weight", s.n_embd, s.vocab, embedding_type(), 0.3f));
    IWB_RETURN_IF_ERROR(norm("output_norm.weight", s.n_embd));
    if (!s.is_output_tied) IWB_RETURN_IF_ERROR(matrix("output.weight", s.n_embd, s.vocab, heavy_type(), 0.05f));
    if (s.has_rope_freqs) {
      std::vector<float> factors(static_cast<size_t>(s.head_dim / 2));
      for (size_t i = 0; i < factors.size(); ++i) factors[i] = 1.0f + static_cast<float>(i % 8);
      IWB_RETURN_IF_ERROR(m_writer.add_tensor(
          "rope_freqs.weight", {s.head_dim / 2}, GgmlType::F32,
          std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(factors.data()), factors.size() * 4)));
    }
    if (s.rope_original_context > 0) {
      std::vector<float> long_factors(static_cast<size_t>(s.head_dim / 2)), short_factors(long_factors.size());
      for (size_t i = 0; i < long_factors.size(); ++i) {
        short_factors[i] = 1.0f + 0.1f * static_cast<float>(i);
        long_factors[i] = 2.0f + 3.0f * static_cast<float>(i);
      }
      IWB_RETURN_IF_ERROR(floats("rope_factors_long.weight", long_factors));
      IWB_RETURN_IF_ERROR(floats("rope_factors_short.weight", short_factors));
    }
    const bool is_fused = a == "phi3";
    const bool is_olmo2 = a == "olmo2";  // no pre-norms; q and k normed over each token's whole width
    for (int64_t il = 0; il < s.n_layer + nextn; ++il) {
      const std::string p = "blk." + std::to_string(il) + ".";
      if (!is_olmo2) IWB_RETURN_IF_ERROR(norm(p + "attn_norm.weight", s.n_embd));
      if (is_fused) {
        IWB_RETURN_IF_ERROR(matrix(p + "attn_qkv.weight", s.n_embd, q + 2 * kv, light_type(), 0.05f));
      } else {
        IWB_RETURN_IF_ERROR(matrix(p + "attn_q.weight", s.n_embd, q, light_type(), 0.05f));
        IWB_RETURN_IF_ERROR(matrix(p + "attn_k.weight", s.n_embd, kv, light_type(), 0.05f));
        IWB_RETURN_IF_ERROR(matrix(p + "attn_v.weight", s.n_embd, kv, heavy_type(), 0.05f));
      }
      IWB_RETURN_IF_ERROR(matrix(p + "attn_output.weight", q, s.n_embd, light_type(), 0.05f));
      if (is_gpt_oss) {
        IWB_RETURN_IF_ERROR(vector(p + "attn_output.bias", s.n_embd, 0.2f, 0.0f));
        IWB_RETURN_IF_ERROR(vector(p + "attn_sinks.weight", s.n_head, 1.0f, 0.0f));
      }
      if (s.has_qkv_bias || is_gpt_oss) {
        IWB_RETURN_IF_ERROR(vector(p + "attn_q.bias", q, 0.2f, 0.0f));
        IWB_RETURN_IF_ERROR(vector(p + "attn_k.bias", kv, 0.2f, 0.0f));
        IWB_RETURN_IF_ERROR(vector(p + "attn_v.bias", kv, 0.2f, 0.0f));
      }
      if (a == "gemma3" || a == "qwen3" || a == "qwen3moe" || (is_glm && s.has_glm_qk_norm)) {
        IWB_RETURN_IF_ERROR(norm(p + "attn_q_norm.weight", s.head_dim));
        IWB_RETURN_IF_ERROR(norm(p + "attn_k_norm.weight", s.head_dim));
      }
      if (is_olmo2) {
        IWB_RETURN_IF_ERROR(norm(p + "attn_q_norm.weight", q));
        IWB_RETURN_IF_ERROR(norm(p + "attn_k_norm.weight", kv));
      }
      if (a == "gemma3" || a == "gemma2" || is_olmo2) {
        IWB_RETURN_IF_ERROR(norm(p + "post_attention_norm.weight", s.n_embd));
        IWB_RETURN_IF_ERROR(norm(p + "post_ffw_norm.weight", s.n_embd));
      }
      // gpt-oss's and glm4moe's pre-FFN norm is stored under the post-attention name.
      if (!is_olmo2) {
        IWB_RETURN_IF_ERROR(
            norm(p + (is_gpt_oss || is_glm ? "post_attention_norm.weight" : "ffn_norm.weight"), s.n_embd));
      }
      if (is_glm && il >= s.n_layer) {  // a prediction layer's own tensors
        IWB_RETURN_IF_ERROR(matrix(p + "nextn.eh_proj.weight", 2 * s.n_embd, s.n_embd, light_type(), 0.05f));
        IWB_RETURN_IF_ERROR(norm(p + "nextn.enorm.weight", s.n_embd));
        IWB_RETURN_IF_ERROR(norm(p + "nextn.hnorm.weight", s.n_embd));
      }
      if (is_glm && il >= s.n_dense_lead) {
        const int64_t shared = s.n_ff_exp * s.n_shared_expert;
        IWB_RETURN_IF_ERROR(matrix(p + "ffn_gate_inp.weight", s.n_embd, s.n_expert, GgmlType::F32, s.router_rms));
        IWB_RETURN_IF_ERROR(vector(p + "exp_probs_b.bias", s.n_expert, s.selection_bias_rms, 0.0f));
        IWB_RETURN_IF_ERROR(experts(p + "ffn_gate_exps.weight", s.n_embd, s.n_ff_exp, light_type(), 0.05f));
        IWB_RETURN_IF_ERROR(experts(p + "ffn_down_exps.weight", s.n_ff_exp, s.n_embd, heavy_type(), 0.05f));
        IWB_RETURN_IF_ERROR(experts(p + "ffn_up_exps.weight", s.n_embd, s.n_ff_exp, light_type(), 0.05f));
        if (shared > 0) {
          IWB_RETURN_IF_ERROR(matrix(p + "ffn_gate_shexp.weight", s.n_embd, shared, light_type(), 0.05f));
          IWB_RETURN_IF_ERROR(matrix(p + "ffn_down_shexp.weight", shared, s.n_embd, heavy_type(), 0.05f));
          IWB_RETURN_IF_ERROR(matrix(p + "ffn_up_shexp.weight", s.n_embd, shared, light_type(), 0.05f));
        }
        continue;
      }
      if (is_gpt_oss) {
        const GgmlType et = s.has_mxfp4_experts ? GgmlType::MXFP4 : light_type();
        IWB_RETURN_IF_ERROR(matrix(p + "ffn_gate_inp.weight", s.n_embd, s.n_expert, GgmlType::F32, s.router_rms));
        IWB_RETURN_IF_ERROR(vector(p + "ffn_gate_inp.bias", s.n_expert, 0.3f, 0.0f));
        IWB_RETURN_IF_ERROR(experts(p + "ffn_gate_exps.weight", s.n_embd, s.n_ff_exp, et, 0.05f));
        IWB_RETURN_IF_ERROR(experts(p + "ffn_down_exps.weight", s.n_ff_exp, s.n_embd, et, 0.05f));
        IWB_RETURN_IF_ERROR(experts(p + "ffn_up_exps.weight", s.n_embd, s.n_ff_exp, et, 0.05f));
        IWB_RETURN_IF_ERROR(table(p + "ffn_gate_exps.bias", s.n_ff_exp, s.n_expert, 0.1f));
        IWB_RETURN_IF_ERROR(table(p + "ffn_down_exps.bias", s.n_embd, s.n_expert, 0.1f));
        IWB_RETURN_IF_ERROR(table(p + "ffn_up_exps.bias", s.n_ff_exp, s.n_expert, 0.1f));
        continue;
      }
      if (a == "qwen3moe") {
        // The router stays F32 (as llama.cpp keeps it); experts as 3-D tensors {in, out, experts}.
        IWB_RETURN_IF_ERROR(matrix(p + "ffn_gate_inp.weight", s.n_embd, s.n_expert, GgmlType::F32, s.router_rms));
        IWB_RETURN_IF_ERROR(experts(p + "ffn_gate_exps.weight", s.n_embd, s.n_ff_exp, light_type(), 0.05f));
        IWB_RETURN_IF_ERROR(experts(p + "ffn_down_exps.weight", s.n_ff_exp, s.n_embd, heavy_type(), 0.05f));
        IWB_RETURN_IF_ERROR(experts(p + "ffn_up_exps.weight", s.n_embd, s.n_ff_exp, light_type(), 0.05f));
        continue;
      }
      if (is_fused) {
        IWB_RETURN_IF_ERROR(matrix(p + "ffn_up.weight", s.n_embd, 2 * s.n_ff, light_type(), 0.05f));
      } else {
        IWB_RETURN_IF_ERROR(matrix(p + "ffn_gate.weight", s.n_embd, s.n_ff, light_type(), 0.05f));
        IWB_RETURN_IF_ERROR(matrix(p + "ffn_up.weight", s.n_embd, s.n_ff, light_type(), 0.05f));
      }
      IWB_RETURN_IF_ERROR(matrix(p + "ffn_down.weight", s.n_ff, s.n_embd, heavy_type(), 0.05f));
    }
    return m_writer.write_file(path);
  }

  gguf::GgufWriter& writer() { return m_writer; }

 private:
  // Q4_K_M keeps attn_v, ffn_down and the classifier in Q6_K and the rest in Q4_K; the
  // embedding here takes Q5_0 so a legacy 32-block type runs too.
  GgmlType light_type() const {
    return m_spec.preset == WeightPreset::F32    ? GgmlType::F32
           : m_spec.preset == WeightPreset::Q8_0 ? GgmlType::Q8_0
                                                 : GgmlType::Q4_K;
  }
  GgmlType heavy_type() const { return m_spec.preset == WeightPreset::MixedK ? GgmlType::Q6_K : light_type(); }
  GgmlType embedding_type() const { return m_spec.preset == WeightPreset::MixedK ? GgmlType::Q5_0 : light_type(); }

  Status matrix(const std::string& name, int64_t in, int64_t out, GgmlType type, float rms) {
    if (name == m_spec.skip_tensor) return {};
    const std::vector<uint8_t> bytes = random_tensor_bytes(type, out, in, m_rng, rms);
    return m_writer.add_tensor(name, {in, out}, type, bytes);
  }
  Status experts(const std::string& name, int64_t in, int64_t out, GgmlType type, float rms) {
    if (name == m_spec.skip_tensor) return {};
    const std::vector<uint8_t> bytes = random_tensor_bytes(type, out * m_spec.n_expert, in, m_rng, rms);
    return m_writer.add_tensor(name, {in, out, m_spec.n_expert}, type, bytes);
  }
  Status vector(const std::string& name, int64_t n, float stddev, float mean) {
    if (name == m_spec.skip_tensor) return {};
    const std::vector<float> v = random_floats(static_cast<size_t>(n), m_rng, stddev, mean);
    return m_writer.add_tensor(name, {n}, GgmlType::F32,
                               std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(v.data()), v.size() * 4));
  }
  Status norm(const std::string& name, int64_t n) { return vector(name, n, 0.1f, 1.0f); }
  // A 2-D f32 tensor {n, rows} (gpt-oss's per-expert biases).
  Status table(const std::string& name, int64_t n, int64_t rows, float stddev) {
    if (name == m_spec.skip_tensor) return {};
    const std::vector<float> v = random_floats(static_cast<size_t>(n * rows), m_rng, stddev, 0.0f);
    return m_writer.add_tensor(name, {n, rows}, GgmlType::F32,
                               std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(v.data()), v.size() * 4));
  }
  Status floats(const std::string& name, const std::vector<float>& v) {
    return m_writer.add_tensor(name, {static_cast<int64_t>(v.size())}, GgmlType::F32,
                               std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(v.data()), v.size() * 4));
  }

  TinyModelSpec m_spec;
  std::mt19937 m_rng;
  gguf::GgufWriter m_writer;
};

inline Status write_tiny_model(const TinyModelSpec& spec, const std::string& path) {
  TinyModelWriter writer(spec);
  return writer.write(path);
}

}  // namespace iwb::test
