// build_forward_plan: the order of the forward pass for every architecture we run. What
// differs between them (biases, q/k norms per head or per token, pre-norms or none,
// post-norms, the activation, sliding windows, layers without RoPE, logit soft-capping, routed
// experts in place of the dense FFN) is data in ModelConfig that switches ops on or off here;
// gpt-oss's attention sinks, YaRN and expert gating are arguments of the ops the backend reads
// from the config and weights.
#include "iwb/engine/plan/forward_plan.h"

namespace iwb {
namespace {

class PlanBuilder {
 public:
  PlanBuilder(const ModelConfig& c, const PlanWeightTypes* types) : m_c(c), m_types(types) {}

  void embedding(std::vector<PlanOp>& out) const {
    PlanOp op;
    op.kind = PlanOpKind::Embedding;
    op.name = "token_embd";
    op.output = PlanBuffer::X;
    out.push_back(op);
  }

  // A layer's attention block, from its norm to the residual add of its output.
  void attention_block(int32_t il, std::vector<PlanOp>& out) const {
    const ModelConfig& c = m_c;
    if (c.is_recurrent(il)) {
      recurrent_block(il, out);
      return;
    }
    if (c.has_latent_attention()) {
      latent_attention_block(il, out);
      return;
    }
    const LayerWeightTypes t = layer_types(il);
    const int64_t d = c.embedding_length;
    const bool is_sliding = c.is_sliding(il);
    // The layer's own widths (Gemma 4's sliding and global layers differ; else the globals).
    const int64_t head_k = c.layer_head_dim_k(il), kv_heads = c.layer_num_kv_heads(il);
    // Gemma 4's shared KV layers compute queries only and read an earlier layer's cache.
    const bool has_own_kv = c.has_own_kv(il);
    // olmo2 has no pre-norm: q, k and v are products of the residual stream itself.
    const PlanBuffer in = c.has_pre_norms ? PlanBuffer::Xn : PlanBuffer::X;
    if (c.has_pre_norms) out.push_back(norm("attn_norm", il, PlanNorm::AttnNorm, PlanBuffer::X, PlanBuffer::Xn, 1, d));
    // Qwen 3.5: attn_q gives each head's query and its output gate, split apart below.
    const bool is_gated = c.has_attention_output_gate;
    const PlanProduct q =
        is_gated ? product("attn_q", PlanMatrix::Wq, PlanBuffer::QGate, t.wq, d, 2 * c.layer_q_width(il), t.has_bq)
                 : product("attn_q", PlanMatrix::Wq, PlanBuffer::Q, t.wq, d, c.layer_q_width(il), t.has_bq);
    if (has_own_kv) {
      out.push_back(
          matmuls(il, in,
                  {q, product("attn_k", PlanMatrix::Wk, PlanBuffer::K, t.wk, d, c.layer_k_width(il), t.has_bk),
                   product("attn_v", PlanMatrix::Wv, PlanBuffer::V, t.wv, d, c.layer_v_width(il), t.has_bv)}));
    } else {
      out.push_back(matmuls(il, in, {q}));
    }
    if (is_gated) {
      PlanOp split = simple(PlanOpKind::SplitQueryGate, "attn_q_split", il);
      split.input = PlanBuffer::QGate;
      split.output = PlanBuffer::Q;
      split.appended = PlanBuffer::AttnGate;
      split.rows_per_token = c.num_heads;
      split.width = head_k;
      out.push_back(split);
    }
    if (c.has_qk_norm && c.is_qk_norm_full_width) {
      // olmo2: each token's whole q and k are one row each.
      out.push_back(norm("q_norm", il, PlanNorm::QNorm, PlanBuffer::Q, PlanBuffer::Q, 1, c.q_width()));
      out.push_back(norm("k_norm", il, PlanNorm::KNorm, PlanBuffer::K, PlanBuffer::K, 1, c.k_width()));
    } else if (c.has_qk_norm) {
      // Per-head norms: every head of every token is one row of head_dim_k values.
      out.push_back(norm("q_norm", il, PlanNorm::QNorm, PlanBuffer::Q, PlanBuffer::Q, c.num_heads, head_k));
      if (has_own_kv)
        out.push_back(norm("k_norm", il, PlanNorm::KNorm, PlanBuffer::K, PlanBuffer::K, kv_heads, head_k));
    }
    if (c.has_value_norm && has_own_kv) {  // Gemma 4: each value head normed, without a weight
      out.push_back(norm("v_norm", il, PlanNorm::Unit, PlanBuffer::V, PlanBuffer::V, kv_heads, c.layer_head_dim_v(il)));
    }
    if (c.is_rope_layer(il)) {  // smollm3's NoPE layers attend with q and k as projected
      PlanOp rope = simple(PlanOpKind::Rope, "rope", il);
      rope.is_sliding = is_sliding;
      rope.is_query_only = !has_own_kv;
      out.push_back(rope);
    }
    if (has_own_kv) out.push_back(simple(PlanOpKind::KvWrite, "kv_write", il));
    PlanOp attention = simple(PlanOpKind::Attention, "attention", il);
    attention.input = PlanBuffer::Q;
    attention.output = PlanBuffer::Attn;
    attention.is_sliding = is_sliding;
    if (!has_own_kv) attention.kv_layer = static_cast<int32_t>(c.kv_source_layer(il));
    out.push_back(attention);
    if (is_gated) {
      PlanOp gate = simple(PlanOpKind::OutputGate, "attn_output_gate", il);
      gate.input = PlanBuffer::AttnGate;
      gate.output = PlanBuffer::Attn;
      gate.width = c.layer_attention_output_width(il);
      out.push_back(gate);
    }
    out.push_back(matmuls(il, PlanBuffer::Attn,
                          {product("attn_output", PlanMatrix::Wo, PlanBuffer::Proj, t.wo,
                                   c.layer_attention_output_width(il), d, t.has_bo)}));
    if (c.has_post_norms) {
      out.push_back(
          norm("post_attention_norm", il, PlanNorm::PostAttentionNorm, PlanBuffer::Proj, PlanBuffer::Proj, 1, d));
    }
    out.push_back(residual_add("attn_residual", il, PlanBuffer::X));
  }

  // Qwen 3.5's recurrent layer in place of attention (llama.cpp's build_layer_attn_linear): from
  // the normed input, attn_qkv's mixed heads, the gate z, and the per-head beta and alpha; the
  // mixed heads through the causal convolution and SiLU; the gated delta rule; its output normed
  // per value head (ssm_norm) and multiplied by silu(z) (the model's activation: qwen35's is
  // SiLU); ssm_out.
  void recurrent_block(int32_t il, std::vector<PlanOp>& out) const {
    const ModelConfig& c = m_c;
    const LayerWeightTypes t = layer_types(il);
    const int64_t d = c.embedding_length, channels = c.linear_conv_channels(), value = c.linear_value_width();
    const int64_t heads = c.linear_num_value_heads;
    out.push_back(norm("attn_norm", il, PlanNorm::AttnNorm, PlanBuffer::X, PlanBuffer::Xn, 1, d));
    out.push_back(matmuls(
        il, PlanBuffer::Xn,
        {product("attn_qkv", PlanMatrix::LinearQkv, PlanBuffer::LinearMixed, t.linear_qkv, d, channels, false),
         product("attn_gate", PlanMatrix::LinearGateProj, PlanBuffer::LinearGate, t.linear_gate, d, value, false)}));
    out.push_back(
        matmuls(il, PlanBuffer::Xn,
                {product("ssm_beta", PlanMatrix::SsmBeta, PlanBuffer::LinearBeta, t.ssm_beta, d, heads, false),
                 product("ssm_alpha", PlanMatrix::SsmAlpha, PlanBuffer::LinearAlpha, t.ssm_alpha, d, heads, false)}));
    PlanOp conv = simple(PlanOpKind::ShortConv, "ssm_conv", il);
    conv.input = PlanBuffer::LinearMixed;
    conv.output = PlanBuffer::LinearConv;
    conv.width = channels;
    out.push_back(conv);
    PlanOp rule = simple(PlanOpKind::DeltaNet, "delta_net", il);
    rule.input = PlanBuffer::LinearConv;
    rule.output = PlanBuffer::LinearOut;
    rule.width = value;
    out.push_back(rule);
    out.push_back(norm("ssm_norm", il, PlanNorm::SsmNorm, PlanBuffer::LinearOut, PlanBuffer::LinearOut, heads,
                       c.linear_head_dim));
    out.push_back(activation(il, PlanBuffer::LinearGate, PlanBuffer::LinearOut, 1, value));
    out.push_back(matmuls(il, PlanBuffer::LinearGate,
                          {product("ssm_out", PlanMatrix::SsmOut, PlanBuffer::Proj, t.ssm_out, value, d, false)}));
    out.push_back(residual_add("attn_residual", il, PlanBuffer::X));
  }

  // Multi-head latent attention with absorbed queries (llama.cpp's deepseek2 graph for files with
  // attn_k_b / attn_v_b): the query (through its latent where the model has one) and the key/value
  // latent from the normed input; the latent normed into V and, with the key's RoPE values, K;
  // each head's query taken into the latent space by attn_k_b; RoPE on the last values of each
  // query and key head; attention as one KV head; each head's output taken out of the latent
  // space by attn_v_b; attn_output.
  void latent_attention_block(int32_t il, std::vector<PlanOp>& out) const {
    const ModelConfig& c = m_c;
    const LayerWeightTypes t = layer_types(il);
    const int64_t d = c.embedding_length;
    out.push_back(norm("attn_norm", il, PlanNorm::AttnNorm, PlanBuffer::X, PlanBuffer::Xn, 1, d));
    const PlanProduct kv_a =
        product("attn_kv_a_mqa", PlanMatrix::WkvA, PlanBuffer::KvLatent, t.wkv_a, d, c.latent_kv_width(), false);
    if (c.q_lora_rank > 0) {
      out.push_back(
          matmuls(il, PlanBuffer::Xn,
                  {product("attn_q_a", PlanMatrix::WqA, PlanBuffer::QLatent, t.wq_a, d, c.q_lora_rank, false), kv_a}));
      out.push_back(
          norm("attn_q_a_norm", il, PlanNorm::QANorm, PlanBuffer::QLatent, PlanBuffer::QLatent, 1, c.q_lora_rank));
      out.push_back(matmuls(
          il, PlanBuffer::QLatent,
          {product("attn_q_b", PlanMatrix::Wq, PlanBuffer::QHeads, t.wq, c.q_lora_rank, c.q_heads_width(), false)}));
    } else {
      out.push_back(
          matmuls(il, PlanBuffer::Xn,
                  {product("attn_q", PlanMatrix::Wq, PlanBuffer::QHeads, t.wq, d, c.q_heads_width(), false), kv_a}));
    }
    PlanOp latent = simple(PlanOpKind::LatentKv, "attn_kv_a_norm", il);
    latent.norm = PlanNorm::KvANorm;
    latent.input = PlanBuffer::KvLatent;
    latent.output = PlanBuffer::K;
    latent.width = c.kv_lora_rank;
    out.push_back(latent);
    out.push_back(head_matmuls(
        il, PlanBuffer::QHeads,
        product("attn_k_b", PlanMatrix::WkB, PlanBuffer::Q, t.wk_b, c.mla_nope_width(), c.kv_lora_rank, false)));
    out.push_back(simple(PlanOpKind::Rope, "rope", il));
    out.push_back(simple(PlanOpKind::KvWrite, "kv_write", il));
    PlanOp attention = simple(PlanOpKind::Attention, "attention", il);
    attention.input = PlanBuffer::Q;
    attention.output = PlanBuffer::Attn;
    out.push_back(attention);
    out.push_back(head_matmuls(
        il, PlanBuffer::Attn,
        product("attn_v_b", PlanMatrix::WvB, PlanBuffer::AttnHeads, t.wv_b, c.kv_lora_rank, c.mla_head_dim_v, false)));
    out.push_back(matmuls(
        il, PlanBuffer::AttnHeads,
        {product("attn_output", PlanMatrix::Wo, PlanBuffer::Proj, t.wo, c.attention_projection_width(), d, t.has_bo)}));
    out.push_back(residual_add("attn_residual", il, PlanBuffer::X));
  }

  // The feed-forward block over the residual rows in `residual`: X for the body's layers, Final
  // (the gathered rows that sample) for the last layer's, which runs in the logits section.
  void ffn_block(int32_t il, PlanBuffer residual, std::vector<PlanOp>& out) const {
    const ModelConfig& c = m_c;
    const LayerWeightTypes t = layer_types(il);
    const int64_t d = c.embedding_length;
    const PlanBuffer in = c.has_pre_norms ? PlanBuffer::Xn : residual;  // olmo2: the residual rows themselves
    if (c.is_expert_layer(il) && c.has_parallel_dense_ffn) {
      parallel_moe_ffn(il, t, residual, out);
    } else {
      if (c.has_pre_norms) out.push_back(norm("ffn_norm", il, PlanNorm::FfnNorm, residual, PlanBuffer::Xn, 1, d));
      if (c.is_expert_layer(il)) {
        moe_ffn(il, t, out);
      } else {
        dense_ffn(il, t, in, out);
      }
    }
    if (c.has_post_norms) {
      out.push_back(norm("post_ffw_norm", il, PlanNorm::PostFfwNorm, PlanBuffer::Proj, PlanBuffer::Proj, 1, d));
    }
    out.push_back(residual_add("ffn_residual", il, residual));
    if (c.has_per_layer_embeddings()) per_layer_embedding(il, t, residual, out);
    if (t.has_output_scale) {  // Gemma 4: the layer's output times its scalar
      PlanOp scale = simple(PlanOpKind::LayerScale, "layer_output_scale", il);
      scale.input = residual;
      scale.output = residual;
      out.push_back(scale);
    }
  }

  // Gemma 4's per-layer embedding at the end of a layer (E2B / E4B): the layer's output through
  // inp_gate, GELU, times the layer's per-layer input, through proj and post_norm, added back.
  void per_layer_embedding(int32_t il, const LayerWeightTypes& t, PlanBuffer residual, std::vector<PlanOp>& out) const {
    const int64_t d = m_c.embedding_length, p = m_c.per_layer_embedding_length;
    out.push_back(matmuls(
        il, residual, {product("inp_gate", PlanMatrix::PleInpGate, PlanBuffer::PleGate, t.ple_inp_gate, d, p, false)}));
    PlanOp gate = activation(il, PlanBuffer::PleGate, PlanBuffer::PleIn, 1, p);
    gate.is_multiplier_layer_slice = true;
    out.push_back(gate);
    out.push_back(matmuls(il, PlanBuffer::PleGate,
                          {product("proj", PlanMatrix::PleProjection, PlanBuffer::Proj, t.ple_proj, p, d, false)}));
    out.push_back(norm("post_norm", il, PlanNorm::PerLayerPostNorm, PlanBuffer::Proj, PlanBuffer::Proj, 1, d));
    out.push_back(residual_add("per_layer_residual", il, residual));
  }

  // Gemma 4's per-layer inputs of every token, after the embedding (E2B / E4B).
  void per_layer_inputs(std::vector<PlanOp>& out) const {
    const GgmlType type = m_types != nullptr ? m_types->per_layer_model_proj : GgmlType::F32;
    out.push_back(matmuls(-1, PlanBuffer::X,
                          {product("per_layer_model_proj", PlanMatrix::PerLayerModelProj, PlanBuffer::PleProj, type,
                                   m_c.embedding_length, m_c.per_layer_inputs_width(), false)}));
    PlanOp inputs = simple(PlanOpKind::PerLayerInputs, "per_layer_inputs", -1);
    inputs.input = PlanBuffer::PleProj;
    inputs.output = PlanBuffer::PleIn;
    inputs.width = m_c.per_layer_embedding_length;
    inputs.rows_per_token = m_c.num_layers;
    out.push_back(inputs);
  }

  // The dense FFN of `in` (normed) into Proj.
  void dense_ffn(int32_t il, const LayerWeightTypes& t, PlanBuffer in, std::vector<PlanOp>& out) const {
    const int64_t d = m_c.embedding_length, ff = m_c.layer_feed_forward_length(il);
    out.push_back(matmuls(il, in,
                          {product("ffn_gate", PlanMatrix::FfnGate, PlanBuffer::Gate, t.ffn_gate, d, ff, false),
                           product("ffn_up", PlanMatrix::FfnUp, PlanBuffer::Up, t.ffn_up, d, ff, false)}));
    out.push_back(activation(il, PlanBuffer::Gate, PlanBuffer::Up, 1, ff));
    out.push_back(matmuls(il, PlanBuffer::Gate,
                          {product("ffn_down", PlanMatrix::FfnDown, PlanBuffer::Proj, t.ffn_down, ff, d, false)}));
  }

  // Gemma 4's expert layer (llama.cpp's gemma4 graph): the router reads the residual rows
  // normed with ffn_gate_inp.scale / sqrt(n_embd); the dense FFN (ffn_norm .. post_ffw_norm_1)
  // writes Proj; the experts (pre_ffw_norm_2 .. post_ffw_norm_2) write MoeOut, added to Proj.
  // Xn holds each part's input in turn.
  void parallel_moe_ffn(int32_t il, const LayerWeightTypes& t, PlanBuffer residual, std::vector<PlanOp>& out) const {
    const ModelConfig& c = m_c;
    const int64_t d = c.embedding_length;
    out.push_back(norm("ffn_gate_inp_norm", il, PlanNorm::RouterNorm, residual, PlanBuffer::Xn, 1, d));
    out.push_back(matmuls(il, PlanBuffer::Xn,
                          {product("ffn_gate_inp", PlanMatrix::FfnGateInp, PlanBuffer::RouterLogits, t.ffn_gate_inp, d,
                                   c.num_experts, t.has_router_bias)}));
    out.push_back(norm("ffn_norm", il, PlanNorm::FfnNorm, residual, PlanBuffer::Xn, 1, d));
    dense_ffn(il, t, PlanBuffer::Xn, out);
    out.push_back(norm("post_ffw_norm_1", il, PlanNorm::PostFfwNorm1, PlanBuffer::Proj, PlanBuffer::Proj, 1, d));
    out.push_back(norm("pre_ffw_norm_2", il, PlanNorm::PreFfwNorm2, residual, PlanBuffer::Xn, 1, d));
    routed_experts(il, t, PlanBuffer::MoeOut, false, out);
    out.push_back(norm("post_ffw_norm_2", il, PlanNorm::PostFfwNorm2, PlanBuffer::MoeOut, PlanBuffer::MoeOut, 1, d));
    PlanOp add = residual_add("ffn_moe_add", il, PlanBuffer::Proj);
    add.input = PlanBuffer::MoeOut;
    out.push_back(add);
  }

  // Routed experts (llama.cpp's build_moe_ffn): the router's logits, top-k gating that also
  // groups each token's rows by expert, the experts' gate/up products, the activation over
  // every routed row, the down products, and the weighted sum into Proj. With shared experts
  // (glm4moe) their FFN writes Proj first and the weighted sum is added to it.
  void moe_ffn(int32_t il, const LayerWeightTypes& t, std::vector<PlanOp>& out) const {
    const ModelConfig& c = m_c;
    const int64_t d = c.embedding_length;
    out.push_back(matmuls(il, PlanBuffer::Xn,
                          {product("ffn_gate_inp", PlanMatrix::FfnGateInp, PlanBuffer::RouterLogits, t.ffn_gate_inp, d,
                                   c.num_experts, t.has_router_bias)}));
    const bool has_shared = c.num_shared_experts > 0;
    if (has_shared) {
      const int64_t sff = c.shared_expert_width();
      out.push_back(matmuls(
          il, PlanBuffer::Xn,
          {product("ffn_gate_shexp", PlanMatrix::FfnGateShexp, PlanBuffer::SharedGate, t.ffn_gate_shexp, d, sff, false),
           product("ffn_up_shexp", PlanMatrix::FfnUpShexp, PlanBuffer::SharedUp, t.ffn_up_shexp, d, sff, false)}));
      out.push_back(activation(il, PlanBuffer::SharedGate, PlanBuffer::SharedUp, 1, sff));
      out.push_back(matmuls(
          il, PlanBuffer::SharedGate,
          {product("ffn_down_shexp", PlanMatrix::FfnDownShexp, PlanBuffer::Proj, t.ffn_down_shexp, sff, d, false)}));
      if (c.has_shared_expert_gate) {  // Qwen 3.5 MoE: the shared expert's output gated per token
        PlanOp gate = simple(PlanOpKind::SharedExpertGate, "ffn_shexp_gate", il);
        gate.input = PlanBuffer::Xn;
        gate.output = PlanBuffer::Proj;
        gate.width = d;
        out.push_back(gate);
      }
    }
    routed_experts(il, t, PlanBuffer::Proj, has_shared, out);
  }

  // From the router's logits and Xn: the top-k gating, the experts' products and their
  // weighted sum into `output` (added to it when `is_accumulating`).
  void routed_experts(int32_t il, const LayerWeightTypes& t, PlanBuffer output, bool is_accumulating,
                      std::vector<PlanOp>& out) const {
    const ModelConfig& c = m_c;
    const int64_t d = c.embedding_length, ff = c.expert_feed_forward_length, k = c.num_experts_used;
    PlanOp routing = simple(PlanOpKind::ExpertRouting, "ffn_moe_gating", il);
    routing.input = PlanBuffer::RouterLogits;
    routing.output = PlanBuffer::ExpertIn;
    out.push_back(routing);
    PlanOp gate_up = matmuls(
        il, PlanBuffer::ExpertIn,
        {product("ffn_gate_exps", PlanMatrix::FfnGateExps, PlanBuffer::ExpertGate, t.ffn_gate_exps, d, ff, false),
         product("ffn_up_exps", PlanMatrix::FfnUpExps, PlanBuffer::ExpertUp, t.ffn_up_exps, d, ff, false)});
    gate_up.kind = PlanOpKind::ExpertMatmuls;
    gate_up.matmul_kind = OpKind::ExpertMatmul;
    out.push_back(gate_up);
    out.push_back(activation(il, PlanBuffer::ExpertGate, PlanBuffer::ExpertUp, k, ff));
    PlanOp down = matmuls(il, PlanBuffer::ExpertGate,
                          {product("ffn_down_exps", PlanMatrix::FfnDownExps, PlanBuffer::ExpertOut, t.ffn_down_exps, ff,
                                   d, t.has_expert_biases)});
    down.kind = PlanOpKind::ExpertMatmuls;
    down.matmul_kind = OpKind::ExpertMatmul;
    out.push_back(down);
    PlanOp combine = simple(PlanOpKind::ExpertCombine, "ffn_moe_combine", il);
    combine.input = PlanBuffer::ExpertOut;
    combine.output = output;
    combine.is_accumulating = is_accumulating;
    out.push_back(combine);
  }

  // An MTP head's input (llama.cpp's graph_mtp): the token's embedding and the target's hidden
  // state of the token before, each RMS-normed, joined and taken to the layer's width.
  void mtp_input(std::vector<PlanOp>& out) const {
    const int64_t d = m_c.embedding_length;
    embedding(out);
    out.push_back(norm("nextn_enorm", 0, PlanNorm::NextnENorm, PlanBuffer::X, PlanBuffer::Xn, 1, d));
    out.push_back(norm("nextn_hnorm", 0, PlanNorm::NextnHNorm, PlanBuffer::HiddenIn, PlanBuffer::Proj, 1, d));
    PlanOp join = simple(PlanOpKind::Concat, "nextn_concat", 0);
    join.input = PlanBuffer::Xn;
    join.appended = PlanBuffer::Proj;
    join.output = PlanBuffer::Joined;
    join.width = d;
    out.push_back(join);
    const LayerWeightTypes t = layer_types(0);
    out.push_back(
        matmuls(0, PlanBuffer::Joined,
                {product("nextn_eh_proj", PlanMatrix::NextnEhProj, PlanBuffer::X, t.nextn_eh_proj, 2 * d, d, false)}));
  }

  // Every token's last hidden state, normed (exported; the logits section gathers from it).
  void hidden(std::vector<PlanOp>& out) const {
    out.push_back(
        norm("output_norm", -1, PlanNorm::OutputNorm, PlanBuffer::X, PlanBuffer::Hidden, 1, m_c.embedding_length));
  }

  // The rows that sample, gathered after the last layer's attention: its feed-forward block
  // (a twenty-eighth of a 28-layer model's FFN work) then runs on them alone, as llama.cpp's
  // graphs do with inp_out_ids; no other row's output after that block is read by anything
  // (the cache holds keys and values from before it). Then the output norm and the classifier.
  // With exports_hidden the body has done all of that but the classifier: its rows are gathered
  // from Hidden.
  // With is_last_layer_whole (per-layer embeddings) the body ran the last layer for every row:
  // the rows are gathered from X and normed.
  void logits(bool exports_hidden, bool is_last_layer_whole, std::vector<PlanOp>& out) const {
    const ModelConfig& c = m_c;
    const int64_t d = c.embedding_length;
    PlanOp gather = simple(PlanOpKind::GatherRows, "gather_rows", -1);
    gather.input = exports_hidden ? PlanBuffer::Hidden : PlanBuffer::X;
    gather.output = PlanBuffer::Final;
    out.push_back(gather);
    if (!exports_hidden) {
      if (c.num_layers > 0 && !is_last_layer_whole) {
        ffn_block(static_cast<int32_t>(c.num_layers - 1), PlanBuffer::Final, out);
      }
      out.push_back(norm("output_norm", -1, PlanNorm::OutputNorm, PlanBuffer::Final, PlanBuffer::Final, 1, d));
    }
    const GgmlType output_type = m_types != nullptr ? m_types->output : GgmlType::F32;
    PlanOp classifier =
        matmuls(-1, PlanBuffer::Final,
                {product("output", PlanMatrix::Output, PlanBuffer::Logits, output_type, d, c.vocab_size, false)});
    classifier.matmul_kind = OpKind::Logits;
    out.push_back(classifier);
    if (c.final_logit_softcap > 0.0f) {
      PlanOp softcap = simple(PlanOpKind::Softcap, "logit_softcap", -1);
      softcap.input = PlanBuffer::Logits;
      softcap.output = PlanBuffer::Logits;
      out.push_back(softcap);
    }
  }

 private:
  LayerWeightTypes layer_types(int32_t il) const {
    if (m_types == nullptr || static_cast<size_t>(il) >= m_types->layers.size()) return {};
    return m_types->layers[static_cast<size_t>(il)];
  }

  static PlanOp simple(PlanOpKind kind, const char* name, int32_t layer) {
    PlanOp op;
    op.kind = kind;
    op.name = name;
    op.layer = layer;
    return op;
  }

  // output = act(gate) * up over rows_per_token rows of `width` per token, in place in `gate`.
  static PlanOp activation(int32_t layer, PlanBuffer gate, PlanBuffer up, int64_t rows_per_token, int64_t width) {
    PlanOp op = simple(PlanOpKind::GatedActivation, "activation", layer);
    op.input = gate;
    op.output = gate;
    op.multiplier = up;
    op.rows_per_token = rows_per_token;
    op.width = width;
    return op;
  }

  // output += Proj, over the rows of `output` (the residual stream, or the gathered rows).
  static PlanOp residual_add(const char* name, int32_t layer, PlanBuffer output) {
    PlanOp op = simple(PlanOpKind::ResidualAdd, name, layer);
    op.input = PlanBuffer::Proj;
    op.output = output;
    return op;
  }

  static PlanOp norm(const char* name, int32_t layer, PlanNorm weight, PlanBuffer in, PlanBuffer out,
                     int64_t rows_per_token, int64_t width) {
    PlanOp op = simple(PlanOpKind::RmsNorm, name, layer);
    op.norm = weight;
    op.input = in;
    op.output = out;
    op.rows_per_token = rows_per_token;
    op.width = width;
    return op;
  }

  static PlanProduct product(const char* name, PlanMatrix matrix, PlanBuffer output, GgmlType type, int64_t in,
                             int64_t out, bool has_bias) {
    return PlanProduct{name, matrix, output, type, in, out, has_bias};
  }

  // One product per head: each of num_heads rows of `input` per token times that head's matrix.
  PlanOp head_matmuls(int32_t layer, PlanBuffer input, const PlanProduct& p) const {
    PlanOp op = matmuls(layer, input, {p});
    op.kind = PlanOpKind::HeadMatmuls;
    op.rows_per_token = m_c.num_heads;
    return op;
  }

  static PlanOp matmuls(int32_t layer, PlanBuffer input, std::initializer_list<PlanProduct> products) {
    PlanOp op = simple(PlanOpKind::Matmuls, products.begin()->name, layer);
    op.input = input;
    for (const PlanProduct& p : products) op.products[static_cast<size_t>(op.num_products++)] = p;
    op.output = op.products[0].output;
    return op;
  }

  const ModelConfig& m_c;
  const PlanWeightTypes* m_types;
};

}  // namespace

ForwardPlan build_forward_plan(const ModelConfig& config, const PlanWeightTypes* types, const PlanOptions& options) {
  ForwardPlan plan;
  plan.config = config;
  plan.options = options;
  plan.options.exports_hidden = options.exports_hidden || options.is_mtp_head;
  const bool exports_hidden = plan.options.exports_hidden;
  if (types != nullptr) plan.token_embd_type = types->token_embd;
  PlanBuilder b(config, types);
  if (options.is_mtp_head) {
    b.mtp_input(plan.body);
  } else {
    b.embedding(plan.body);
  }
  // Gemma 4's per-layer inputs are laid out for every token: the last layer runs whole.
  const bool is_last_layer_whole = exports_hidden || config.has_per_layer_embeddings();
  if (config.has_per_layer_embeddings()) b.per_layer_inputs(plan.body);
  for (int64_t il = 0; il < config.num_layers; ++il) {
    b.attention_block(static_cast<int32_t>(il), plan.body);
    if (il + 1 < config.num_layers || is_last_layer_whole) {
      b.ffn_block(static_cast<int32_t>(il), PlanBuffer::X, plan.body);
    }
  }
  if (exports_hidden) b.hidden(plan.body);
  b.logits(exports_hidden, is_last_layer_whole, plan.logits);
  return plan;
}

}  // namespace iwb
