// A plain f32 reference forward pass written for the tests, independent of the engine: every
// weight dequantized to f32 up front, naive loops, double accumulation, the whole sequence
// recomputed for each call (no KV cache). It reads the GGUF metadata itself and encodes the
// architecture rules (gemma3's sliding layers, local RoPE base, norms; gemma2's alternating
// sliding layers and soft-caps of attention scores and logits; smollm3's layers without RoPE;
// granite's multipliers; olmo2's missing pre-norms, whole-width q/k norms and OLMo 3's
// per-layer sliding pattern; phi3's fused tensors and LongRoPE; qwen3moe's routed experts,
// token by token; gpt-oss's sinks, YaRN, alternating sliding layers, expert biases,
// softmax-over-top-k gating and clamped SwiGLU; glm4moe's sigmoid routing with selection
// biases, renormalised and scaled weights, shared experts, leading dense layers, optional q/k
// norms, partial RoPE, and its prediction layer as an MTP head of its own; deepseek2's latent attention computed
// the unabsorbed way, each head's keys and values decompressed from the latent, and DeepSeek V2's
// softmax and V3's group-limited routing) on its own. Gemma 4 has a reference of its own
// (reference_gemma4.h), which these functions dispatch to.
#pragma once

#include "reference_gemma4.h"

#include "iwb/engine/gguf/gguf_file.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace iwb::test {

struct RefLayer {
  std::vector<float> attn_norm, wq, wk, wv, wo, bq, bk, bv, bo;  // matrices [out][in]
  std::vector<float> q_norm, k_norm, post_attention_norm;
  std::vector<float> ffn_norm, gate, up, down, post_ffw_norm;
  // Mixture of experts: router [n_expert][n_embd]; experts [n_expert][out][in].
  std::vector<float> gate_inp, gate_exps, up_exps, down_exps;
  // gpt-oss: router bias [n_expert], expert biases [n_expert][out], attention sinks [n_head].
  std::vector<float> gate_inp_b, gate_exps_b, up_exps_b, down_exps_b, sinks;
  // glm4moe: the selection bias [n_expert] and the shared experts' FFN.
  std::vector<float> exp_probs_b, gate_shexp, up_shexp, down_shexp;
  // deepseek2's latent attention: the query's latent and norm (or wq alone), the key/value
  // latent's projection and norm, the per-head decompressions [n_head][kv_lora][nope] (keys)
  // and [n_head][v][kv_lora] (values).
  std::vector<float> wq_a, q_a_norm, wkv_a, kv_a_norm, wk_b, wv_b;
};

struct RefModel {
  std::string arch;
  int64_t n_embd = 0, n_layer = 0, n_head = 0, n_kv_head = 0, head_dim = 0, n_ff = 0, vocab = 0, n_rot = 0;
  double eps = 1e-5, rope_base = 10000, rope_scale = 1;
  double rope_mscale = 1;  // LongRoPE's attention factor: multiplies RoPE's cos and sin (llama.cpp's attn_factor)
  int64_t sliding_window = 0;
  std::vector<bool> sliding_pattern;  // <arch>.attention.sliding_window_pattern (olmo2); empty: the rule
  double attn_softcap = 0, final_softcap = 0;
  // granite: embeddings times embd_scale, block outputs times residual_scale, q.k times
  // attn_scale (0: 1/sqrt(head size)), logits divided by logit_scale.
  double embd_scale = 1, residual_scale = 1, attn_scale = 0, logit_scale = 1;  // gemma2: cap * tanh(x / cap); 0: none
  int64_t n_expert = 0, n_expert_used = 0, n_ff_exp = 0;                       // qwen3moe, gpt-oss
  bool is_yarn = false;                                                        // rope.scaling.type yarn (gpt-oss)
  int64_t yarn_original_context = 0;
  // glm4moe: shared experts' count, leading dense layers, the routed weights' scale.
  int64_t n_shared_expert = 0, n_dense_lead = 0;
  double expert_weights_scale = 1;
  // DeepSeek routing: sigmoid (or softmax) scores, weights renormalised or not, experts chosen
  // from the best n_group_used of n_expert_groups groups (0: no groups).
  bool is_expert_sigmoid = true, is_expert_norm = true;
  int64_t n_expert_groups = 0, n_group_used = 0;
  // deepseek2: latent widths, each head's query/key (nope + rope) and value widths.
  int64_t kv_lora = 0, q_lora = 0, mla_k = 0, mla_v = 0;
  std::vector<float> embd, output_norm, output, rope_freqs;  // embd/output [vocab][n_embd]
  // A multi-token-prediction head (load_reference_model's is_mtp_head): nextn.enorm, hnorm and
  // eh_proj [n_embd][2 * n_embd].
  std::vector<float> nextn_enorm, nextn_hnorm, nextn_eh_proj;
  std::vector<RefLayer> layers;
  // gemma4: the whole model (n_embd, n_layer and vocab above are set too; nothing else is).
  std::shared_ptr<const RefGemma4> gemma4;
};

// Empty error string on success. `context_length` (0: the trained one, at most 4096, as the
// engine's default) picks LongRoPE's long or short factors. is_mtp_head: the model's first
// multi-token-prediction layer as a model of one layer, with its nextn.* tensors (its own
// embedding table, head norm and classifier where the file has them, else the trunk's).
RefModel load_reference_model(const gguf::GgufFile& file, std::string* error, int64_t context_length = 0,
                              bool is_mtp_head = false);

// Logits [vocab] of the last token of `tokens`. is_kv_f16: round keys and values to f16, as
// a KV cache stored in f16 does (the only rounding the reference then shares with the engine).
std::vector<float> reference_logits(const RefModel& m, const std::vector<int32_t>& tokens, bool is_kv_f16 = false);

// Logits [tokens][vocab] of every position of `tokens` (the logits at p predict token p + 1).
std::vector<std::vector<float>> reference_logits_all(const RefModel& m, const std::vector<int32_t>& tokens,
                                                     bool is_kv_f16 = false);

// Every position's last hidden state after the output norm, [tokens][n_embd] (what an MTP head
// reads).
std::vector<std::vector<float>> reference_hidden_states(const RefModel& m, const std::vector<int32_t>& tokens);

// An MTP head's logits [vocab] at the last position: position p reads token p and hidden[p - 1]
// (zeros at 0), llama.cpp's graph_mtp. head_hidden: the head's own hidden state there (after
// its head norm), which its next guess reads.
std::vector<float> reference_mtp_logits(const RefModel& head, const std::vector<int32_t>& tokens,
                                        const std::vector<std::vector<float>>& hidden,
                                        std::vector<float>* head_hidden = nullptr);

}  // namespace iwb::test
