// The tests' reference forward pass of Gemma 4 (gemma4), written from llama.cpp's graph
// (src/models/gemma4.cpp) and independent of the engine: weights dequantized to f32, every
// activation in double, naive loops, the whole sequence recomputed per call. Each layer has its
// own attention shape (the sliding layers' key_length_swa and RoPE, the global layers' key_length,
// rope_freqs and rope.freq_base; head_count_kv per layer), values from the keys' projection where
// attn_v is absent, per-layer embeddings, KV shared from earlier layers, experts beside the dense
// FFN and the layer output scale. reference_forward.cpp dispatches to it by architecture.
#pragma once

#include "iwb/engine/gguf/gguf_file.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace iwb::test {

struct RefGemma4Layer {
  bool is_sliding = false;
  int64_t n_head = 0, n_kv_head = 0, head_dim = 0, n_rot = 0, n_ff = 0;
  double rope_base = 10000, rope_scale = 1;
  // attention.shared_kv_layers: this layer computes q only and attends over the keys and values
  // of layer kv_source (its own index where it has KV).
  int64_t kv_source = 0;
  // Matrices [out][in]. wv empty: the values are the keys' projection (before the k norm).
  std::vector<float> attn_norm, wq, wk, wv, wo, q_norm, k_norm, post_attention_norm;
  std::vector<float> ffn_norm, gate, up, down, post_ffw_norm;
  double out_scale = 1;  // layer_output_scale.weight (1 where absent)
  // Experts beside the dense FFN: router [n_expert][n_embd] and its input scale [n_embd]; each
  // expert's gate and up [n_expert][n_ff_exp][n_embd], down [n_expert][n_embd][n_ff_exp], its
  // output scale [n_expert] (ones where absent); the three norms around the two halves.
  std::vector<float> gate_inp, gate_inp_scale, gate_exps, up_exps, down_exps, down_exps_scale;
  std::vector<float> pre_ffw_norm_2, post_ffw_norm_1, post_ffw_norm_2;
  int64_t n_ff_exp = 0;
  // Per-layer embeddings: inp_gate [ple][n_embd], proj [n_embd][ple], post_norm [n_embd].
  std::vector<float> ple_inp_gate, ple_proj, ple_post_norm;

  bool has_experts() const { return !gate_inp.empty(); }
};

struct RefGemma4 {
  int64_t n_embd = 0, n_layer = 0, vocab = 0, sliding_window = 0;
  int64_t n_expert = 0, n_expert_used = 0, n_ple = 0;  // n_ple: embedding_length_per_layer_input
  int64_t n_shared_kv_layers = 0;
  double eps = 1e-6, final_softcap = 0;
  std::vector<float> embd, output, output_norm, rope_freqs;  // embd/output [vocab][n_embd]
  // Per-layer embeddings: [vocab][n_layer][ple], [n_layer * ple][n_embd], [ple].
  std::vector<float> ple_token_embd, ple_model_proj, ple_proj_norm;
  std::vector<RefGemma4Layer> layers;
  // Switches for the tests that show each part matters (all on for the model as loaded).
  bool has_value_norm = true, has_sliding_window = true, has_rope_freqs = true;
};

// The model in `file` (general.architecture gemma4); null with `error` set where a key or
// tensor is missing or inconsistent.
std::shared_ptr<RefGemma4> load_reference_gemma4(const gguf::GgufFile& file, std::string* error);

// Logits [tokens][vocab] at every position of `tokens`; with is_kv_f16 keys and values rounded
// to f16 after their norms and RoPE, as the engine's cache holds them.
std::vector<std::vector<float>> gemma4_logits(const RefGemma4& m, const std::vector<int32_t>& tokens, bool is_kv_f16);

// Every position's hidden state after the output norm, [tokens][n_embd].
std::vector<std::vector<float>> gemma4_hidden_states(const RefGemma4& m, const std::vector<int32_t>& tokens);

}  // namespace iwb::test
