// The tests' reference forward pass of Qwen 3.5 (qwen35), written from llama.cpp's graph
// (src/models/qwen35.cpp, src/models/delta-net-base.cpp and ggml-cpu's ssm_conv and
// gated_delta_net) and independent of the engine: weights dequantized to f32, every activation in
// double, naive loops, the whole sequence recomputed per call, token by token through each layer.
// Most layers are recurrent (a gated delta net after a causal depthwise convolution); every
// full_attention_interval-th is gated full attention with per-head q/k norms and interleaved
// multi-section RoPE (IMROPE, which for text positions is NeoX RoPE over rope.dimension_count).
#pragma once

#include "iwb/engine/gguf/gguf_file.h"

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace iwb::test {

struct RefQwen35Layer {
  bool is_recurrent = false;
  int64_t n_ff = 0;
  std::vector<float> attn_norm;            // [n_embd]
  std::vector<float> post_attention_norm;  // [n_embd]: the norm before the FFN
  // Full attention. wq [n_head][2][head_dim][n_embd]: each head's query rows, then its gate rows;
  // wk, wv [n_kv_head * head_dim][n_embd]; wo [n_embd][n_head * head_dim]; q_norm, k_norm
  // [head_dim].
  std::vector<float> wq, wk, wv, wo, q_norm, k_norm;
  // Recurrent (gated delta net). wqkv [conv_dim][n_embd] with conv_dim = 2 * n_group * d_state +
  // d_inner (q, k, v); wz [d_inner][n_embd]; conv [conv_dim][conv_kernel] (the last tap on the
  // current token); beta, alpha [dt_rank][n_embd]; dt_bias, ssm_a [dt_rank]; ssm_norm [d_state];
  // ssm_out [n_embd][d_inner].
  std::vector<float> wqkv, wz, conv, beta, alpha, dt_bias, ssm_a, ssm_norm, ssm_out;
  std::vector<float> gate, up, down;  // SwiGLU FFN: [n_ff][n_embd] twice, [n_embd][n_ff]
};

struct RefQwen35 {
  int64_t n_embd = 0, n_layer = 0, vocab = 0;
  // Full attention: heads, KV heads (GQA), head size, RoPE width (the first n_rot of a head).
  int64_t n_head = 0, n_kv_head = 0, head_dim = 0, n_rot = 0;
  double eps = 1e-6, rope_base = 10000, rope_scale = 1;
  // rope.dimension_sections: which position component (t, h, w, extra) turns each RoPE pair.
  std::array<int64_t, 4> rope_sections{};
  // Gated delta net: state size (the key and value head size), key/query heads, value heads,
  // value width (dt_rank * d_state), convolution taps.
  int64_t d_state = 0, n_group = 0, dt_rank = 0, d_inner = 0, conv_kernel = 0;
  std::vector<float> embd, output, output_norm;  // embd/output [vocab][n_embd]
  std::vector<RefQwen35Layer> layers;
  // The first multi-token-prediction block after the trunk, where the file has one: a full
  // attention layer, nextn.enorm / hnorm [n_embd], eh_proj [n_embd][2 * n_embd], and the norm
  // before the classifier (nextn.shared_head_norm, else output_norm).
  bool has_mtp = false;
  RefQwen35Layer mtp;
  std::vector<float> nextn_enorm, nextn_hnorm, nextn_eh_proj, mtp_head_norm;

  int64_t conv_dim() const { return 2 * n_group * d_state + d_inner; }
};

// The model in `file` (general.architecture qwen35); null with `error` set where a key or
// tensor is missing or inconsistent. Of the multi-token-prediction layers past the trunk
// (nextn_predict_layers) the first is loaded as `mtp`; the main pass does not run it.
std::shared_ptr<RefQwen35> load_reference_qwen35(const gguf::GgufFile& file, std::string* error);

// Logits [tokens][vocab] at every position of `tokens`; with is_kv_f16 the attention layers'
// keys and values rounded to f16 after their norms and RoPE, as a cache in f16 holds them. The
// recurrent state stays in double (llama.cpp keeps it in f32).
std::vector<std::vector<float>> qwen35_logits(const RefQwen35& m, const std::vector<int32_t>& tokens, bool is_kv_f16);

// Every position's hidden state after the output norm, [tokens][n_embd].
std::vector<std::vector<float>> qwen35_hidden_states(const RefQwen35& m, const std::vector<int32_t>& tokens);

// The MTP block's logits [tokens][vocab] as llama.cpp's graph_mtp computes them: position p
// reads token p's embedding and the target's hidden state at p - 1 (zeros at 0), normed and
// projected together, then the block's attention over the positions so far and its FFN.
std::vector<std::vector<float>> qwen35_mtp_logits(const RefQwen35& m, const std::vector<int32_t>& tokens,
                                                  const std::vector<std::vector<float>>& hidden);

}  // namespace iwb::test
