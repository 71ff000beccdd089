// Preset shapes for `iwb synth`, taken from each model's published config.json (Hugging Face)
// and checked against the GGUF keys llama.cpp's converter writes for it.
#include "iwb/engine/synth/synth_preset.h"

#include "iwb/engine/model/model_config.h"

#include <cmath>
#include <numbers>

namespace iwb::synth {
namespace {

SynthShape llama(std::string name, std::string description) {
  SynthShape s;
  s.name = std::move(name);
  s.architecture = "llama";
  s.description = std::move(description);
  return s;
}

std::vector<SynthShape> make_presets() {
  std::vector<SynthShape> presets;

  // meta-llama/Llama-3.2-1B: tied embeddings, llama3 RoPE scaling (factor 32 over 8192).
  SynthShape l32 = llama("llama-3.2-1b", "Llama 3.2 1B");
  l32.embedding_length = 2048;
  l32.num_layers = 16;
  l32.num_heads = 32;
  l32.num_kv_heads = 8;
  l32.head_dim = 64;
  l32.feed_forward_length = 8192;
  l32.vocab_size = 128256;
  l32.context_length = 131072;
  l32.rope_freq_base = 500000.0f;
  l32.rms_norm_eps = 1e-5f;
  l32.is_embedding_tied = true;
  l32.rope_scaling = {32.0f, 1.0f, 4.0f, 8192};
  presets.push_back(l32);

  // meta-llama/Meta-Llama-3-8B.
  SynthShape l3 = llama("llama-3-8b", "Llama 3 8B");
  l3.embedding_length = 4096;
  l3.num_layers = 32;
  l3.num_heads = 32;
  l3.num_kv_heads = 8;
  l3.head_dim = 128;
  l3.feed_forward_length = 14336;
  l3.vocab_size = 128256;
  l3.context_length = 8192;
  l3.rope_freq_base = 500000.0f;
  l3.rms_norm_eps = 1e-5f;
  presets.push_back(l3);

  // TinyLlama/TinyLlama-1.1B-Chat-v1.0: the Llama 2 tokenizer's 32000 tokens.
  SynthShape tiny = llama("tinyllama-1.1b", "TinyLlama 1.1B");
  tiny.embedding_length = 2048;
  tiny.num_layers = 22;
  tiny.num_heads = 32;
  tiny.num_kv_heads = 4;
  tiny.head_dim = 64;
  tiny.feed_forward_length = 5632;
  tiny.vocab_size = 32000;
  tiny.context_length = 2048;
  tiny.rope_freq_base = 10000.0f;
  tiny.rms_norm_eps = 1e-5f;
  presets.push_back(tiny);

  // Qwen/Qwen2.5-0.5B: q/k/v biases, tied embeddings, width 896 (not a multiple of 256, so
  // K-quant files fall back to Q5_0/Q8_0 for most matrices, as llama.cpp's do).
  SynthShape qwen;
  qwen.name = "qwen2.5-0.5b";
  qwen.architecture = "qwen2";
  qwen.description = "Qwen2.5 0.5B";
  qwen.embedding_length = 896;
  qwen.num_layers = 24;
  qwen.num_heads = 14;
  qwen.num_kv_heads = 2;
  qwen.head_dim = 64;
  qwen.feed_forward_length = 4864;
  qwen.vocab_size = 151936;
  qwen.context_length = 32768;
  qwen.rope_freq_base = 1000000.0f;
  qwen.rms_norm_eps = 1e-6f;
  qwen.is_embedding_tied = true;
  qwen.has_qkv_bias = true;
  presets.push_back(qwen);

  // Qwen/Qwen2.5-1.5B: the default chat model's shape (Qwen2.5-Coder-1.5B has the same).
  SynthShape qwen15 = qwen;
  qwen15.name = "qwen2.5-1.5b";
  qwen15.description = "Qwen2.5 1.5B";
  qwen15.embedding_length = 1536;
  qwen15.num_layers = 28;
  qwen15.num_heads = 12;
  qwen15.num_kv_heads = 2;
  qwen15.head_dim = 128;
  qwen15.feed_forward_length = 8960;
  presets.push_back(qwen15);

  // google/gemma-3-270m: one KV head of 256, sliding window 512 on 5 of every 6 layers (local
  // RoPE base 10000, global 1e6), tied embeddings, 262144 tokens.
  SynthShape gemma;
  gemma.name = "gemma-3-270m";
  gemma.architecture = "gemma3";
  gemma.description = "Gemma 3 270M";
  gemma.embedding_length = 640;
  gemma.num_layers = 18;
  gemma.num_heads = 4;
  gemma.num_kv_heads = 1;
  gemma.head_dim = 256;
  gemma.feed_forward_length = 2048;
  gemma.vocab_size = 262144;
  gemma.context_length = 32768;
  gemma.rope_freq_base = 1000000.0f;
  gemma.rms_norm_eps = 1e-6f;
  gemma.is_embedding_tied = true;
  gemma.sliding_window = 512;
  presets.push_back(gemma);

  // Qwen/Qwen3-0.6B: per-head q/k norms, no biases, 16 query heads of 128 over a width of 1024.
  SynthShape qwen3;
  qwen3.name = "qwen3-0.6b";
  qwen3.architecture = "qwen3";
  qwen3.description = "Qwen3 0.6B";
  qwen3.embedding_length = 1024;
  qwen3.num_layers = 28;
  qwen3.num_heads = 16;
  qwen3.num_kv_heads = 8;
  qwen3.head_dim = 128;
  qwen3.feed_forward_length = 3072;
  qwen3.vocab_size = 151936;
  qwen3.context_length = 40960;
  qwen3.rope_freq_base = 1000000.0f;
  qwen3.rms_norm_eps = 1e-6f;
  qwen3.is_embedding_tied = true;
  presets.push_back(qwen3);

  // Small shapes for tests: every architecture, K-quant-compatible widths (256) and one that
  // is not (192, like Qwen's 896), and enough gemma3 layers for a global one.
  SynthShape t1 = llama("test-llama", "small llama shape for tests");
  t1.embedding_length = 256;
  t1.num_layers = 2;
  t1.num_heads = 4;
  t1.num_kv_heads = 2;
  t1.head_dim = 64;
  t1.feed_forward_length = 512;
  t1.vocab_size = 320;
  t1.context_length = 512;
  t1.rope_freq_base = 10000.0f;
  t1.is_test_shape = true;
  presets.push_back(t1);

  SynthShape t2 = qwen;
  t2.name = "test-qwen2";
  t2.description = "small qwen2 shape for tests";
  t2.embedding_length = 192;
  t2.num_layers = 3;
  t2.num_heads = 3;
  t2.num_kv_heads = 1;
  t2.head_dim = 64;
  t2.feed_forward_length = 512;
  t2.vocab_size = 320;
  t2.context_length = 512;
  t2.is_test_shape = true;
  presets.push_back(t2);

  SynthShape t3 = gemma;
  t3.name = "test-gemma3";
  t3.description = "small gemma3 shape for tests";
  t3.embedding_length = 256;
  t3.num_layers = 7;
  t3.num_heads = 2;
  t3.num_kv_heads = 1;
  t3.head_dim = 128;
  t3.feed_forward_length = 512;
  t3.vocab_size = 320;
  t3.context_length = 512;
  t3.sliding_window = 16;
  t3.is_test_shape = true;
  presets.push_back(t3);

  SynthShape t4 = qwen3;
  t4.name = "test-qwen3";
  t4.description = "small qwen3 shape for tests";
  t4.embedding_length = 128;
  t4.num_layers = 2;
  t4.num_heads = 4;
  t4.num_kv_heads = 2;
  t4.head_dim = 64;
  t4.feed_forward_length = 256;
  t4.vocab_size = 320;
  t4.context_length = 512;
  t4.is_test_shape = true;
  presets.push_back(t4);
  return presets;
}

}  // namespace

int64_t SynthShape::num_parameters() const {
  const int64_t d = embedding_length;
  int64_t per_layer = d * q_width() + 2 * d * kv_width() + q_width() * d  // attention
                      + 3 * d * feed_forward_length                       // gate, up, down
                      + 2 * d;                                            // two norms
  if (has_qkv_bias) per_layer += q_width() + 2 * kv_width();
  if (const ArchitectureTraits* a = find_architecture(architecture)) {
    if (a->has_qk_norm) per_layer += 2 * head_dim;  // q/k norms
    if (a->has_post_norms) per_layer += 2 * d;      // post-norms
  }
  int64_t total = num_layers * per_layer + vocab_size * d + d;            // + embedding, final norm
  if (!is_embedding_tied) total += vocab_size * d;
  if (rope_scaling.is_enabled()) total += head_dim / 2;
  return total;
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
  c.rope_freq_base = c.rope_freq_base_swa = s.rope_freq_base;
  if (const ArchitectureTraits* a = find_architecture(s.architecture)) {
    apply_architecture(*a, s.sliding_window, &c);
    if (c.sliding_window > 0) c.rope_freq_base_swa = 10000.0f;  // as llama.cpp's loader defaults it
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
    const float freq = 1.0f / std::pow(shape.rope_freq_base, static_cast<float>(i) / static_cast<float>(shape.head_dim));
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

}  // namespace iwb::synth
