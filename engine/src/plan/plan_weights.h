// A plan op's weights looked up in a backend's own weight structs (host LayerWeights, the CUDA
// DeviceLayer): both name their members alike, so one lookup serves every backend.
#pragma once

#include "iwb/engine/plan/forward_plan.h"

#include <vector>

namespace iwb::plan {

// The layer's matrix `m` (PlanMatrix::Output lives in the model, not a layer: the caller's;
// the router and the expert tensors are layer_router's and layer_experts').
template <class Layer>
auto& layer_matrix(Layer& l, PlanMatrix m) {
  if constexpr (requires { l.ffn_gate_shexp; }) {  // weights that hold shared experts (the host's)
    if (m == PlanMatrix::FfnGateShexp) return l.ffn_gate_shexp;
    if (m == PlanMatrix::FfnUpShexp) return l.ffn_up_shexp;
    if (m == PlanMatrix::FfnDownShexp) return l.ffn_down_shexp;
  }
  if constexpr (requires { l.wkv_a; }) {  // weights that hold latent attention (the host's)
    if (m == PlanMatrix::WqA) return l.wq_a;
    if (m == PlanMatrix::WkvA) return l.wkv_a;
  }
  if constexpr (requires { l.nextn_eh_proj; }) {  // an MTP head's (the host's weights only)
    if (m == PlanMatrix::NextnEhProj) return l.nextn_eh_proj;
  }
  if constexpr (requires { l.ple_inp_gate; }) {  // Gemma 4's per-layer embedding (the host's only)
    if (m == PlanMatrix::PleInpGate) return l.ple_inp_gate;
    if (m == PlanMatrix::PleProjection) return l.ple_proj;
  }
  if constexpr (requires { l.linear_qkv; }) {  // Qwen 3.5's recurrent layer (the host's only)
    if (m == PlanMatrix::LinearQkv) return l.linear_qkv;
    if (m == PlanMatrix::LinearGateProj) return l.linear_gate;
    if (m == PlanMatrix::SsmBeta) return l.ssm_beta;
    if (m == PlanMatrix::SsmAlpha) return l.ssm_alpha;
    if (m == PlanMatrix::SsmOut) return l.ssm_out;
  }
  switch (m) {
    case PlanMatrix::Wq: return l.wq;
    case PlanMatrix::Wk: return l.wk;
    case PlanMatrix::Wv: return l.wv;
    case PlanMatrix::Wo: return l.wo;
    case PlanMatrix::FfnGate: return l.ffn_gate;
    case PlanMatrix::FfnUp: return l.ffn_up;
    case PlanMatrix::FfnDown: break;
    case PlanMatrix::Output:
    case PlanMatrix::FfnGateInp:
    case PlanMatrix::FfnGateExps:
    case PlanMatrix::FfnUpExps:
    case PlanMatrix::FfnDownExps:
    case PlanMatrix::FfnGateShexp:
    case PlanMatrix::FfnUpShexp:
    case PlanMatrix::FfnDownShexp:
    case PlanMatrix::WqA:
    case PlanMatrix::WkvA:
    case PlanMatrix::WkB:
    case PlanMatrix::WvB:
    case PlanMatrix::NextnEhProj:
    case PlanMatrix::PerLayerModelProj:
    case PlanMatrix::PleInpGate:
    case PlanMatrix::PleProjection:
    case PlanMatrix::LinearQkv:
    case PlanMatrix::LinearGateProj:
    case PlanMatrix::SsmBeta:
    case PlanMatrix::SsmAlpha:
    case PlanMatrix::SsmOut: break;
  }
  return l.ffn_down;
}

// Latent attention's per-head matrices (WkB: attn_k_b, WvB: attn_v_b), one per head as experts
// are stored (the host's weights only: no other backend runs latent attention).
template <class Layer>
auto& layer_head_matrices(Layer& l, PlanMatrix m) {
  return m == PlanMatrix::WkB ? l.wk_b : l.wv_b;
}

// A mixture-of-experts layer's expert tensor `m` (FfnGateExps, FfnUpExps, FfnDownExps).
template <class Layer>
auto& layer_experts(Layer& l, PlanMatrix m) {
  if (m == PlanMatrix::FfnGateExps) return l.ffn_gate_exps;
  if (m == PlanMatrix::FfnUpExps) return l.ffn_up_exps;
  return l.ffn_down_exps;
}

// The bias that goes with the layer's matrix `m`, or `none` for matrices without one.
template <class Layer, class Bias>
const Bias& layer_bias(Layer& l, PlanMatrix m, const Bias& none) {
  switch (m) {
    case PlanMatrix::Wq: return l.bq;
    case PlanMatrix::Wk: return l.bk;
    case PlanMatrix::Wv: return l.bv;
    case PlanMatrix::Wo: return l.bo;
    default: break;
  }
  if constexpr (requires { l.ffn_gate_inp_b; }) {  // weights that hold experts (the host's)
    if (m == PlanMatrix::FfnGateInp) return l.ffn_gate_inp_b;
  }
  return none;
}

// A mixture-of-experts layer's per-expert biases of expert tensor `m` (expert e's at e * out
// features), or `none` (the host's weights only: no backend but the CPU runs experts).
template <class Layer, class Bias>
const Bias& layer_expert_bias(Layer& l, PlanMatrix m, const Bias& none) {
  if constexpr (requires { l.ffn_gate_exps_b; }) {
    if (m == PlanMatrix::FfnGateExps) return l.ffn_gate_exps_b;
    if (m == PlanMatrix::FfnUpExps) return l.ffn_up_exps_b;
    if (m == PlanMatrix::FfnDownExps) return l.ffn_down_exps_b;
  }
  return none;
}

// The layer's norm weight `n` (PlanNorm::OutputNorm is the model's: the caller's).
template <class Layer>
auto& layer_norm(Layer& l, PlanNorm n) {
  if constexpr (requires { l.attn_kv_a_norm; }) {
    if (n == PlanNorm::QANorm) return l.attn_q_a_norm;
    if (n == PlanNorm::KvANorm) return l.attn_kv_a_norm;
  }
  if constexpr (requires { l.nextn_enorm; }) {  // an MTP head's (the host's weights only)
    if (n == PlanNorm::NextnENorm) return l.nextn_enorm;
    if (n == PlanNorm::NextnHNorm) return l.nextn_hnorm;
  }
  if constexpr (requires { l.post_ffw_norm_1; }) {  // Gemma 4's (the host's weights only)
    if (n == PlanNorm::RouterNorm) return l.router_norm;
    if (n == PlanNorm::PostFfwNorm1) return l.post_ffw_norm_1;
    if (n == PlanNorm::PreFfwNorm2) return l.pre_ffw_norm_2;
    if (n == PlanNorm::PostFfwNorm2) return l.post_ffw_norm_2;
    if (n == PlanNorm::PerLayerPostNorm) return l.ple_post_norm;
  }
  if constexpr (requires { l.ssm_norm; }) {  // Qwen 3.5's (the host's weights only)
    if (n == PlanNorm::SsmNorm) return l.ssm_norm;
  }
  switch (n) {
    case PlanNorm::AttnNorm: return l.attn_norm;
    case PlanNorm::QNorm: return l.q_norm;
    case PlanNorm::KNorm: return l.k_norm;
    case PlanNorm::PostAttentionNorm: return l.post_attention_norm;
    case PlanNorm::FfnNorm: return l.ffn_norm;
    case PlanNorm::PostFfwNorm:
    case PlanNorm::OutputNorm:
    case PlanNorm::QANorm:
    case PlanNorm::KvANorm:
    case PlanNorm::NextnENorm:
    case PlanNorm::NextnHNorm:
    case PlanNorm::Unit:  // no weight: the backend passes none
    case PlanNorm::RouterNorm:
    case PlanNorm::PostFfwNorm1:
    case PlanNorm::PreFfwNorm2:
    case PlanNorm::PostFfwNorm2:
    case PlanNorm::PerLayerPostNorm:
    case PlanNorm::SsmNorm: break;
  }
  return l.post_ffw_norm;
}

inline bool is_present(const std::vector<float>& v) { return !v.empty(); }
inline bool is_present(const float* p) { return p != nullptr; }

// The types and biases of a backend's weights (ModelWeights, DeviceWeights), for its plan.
template <class Weights>
PlanWeightTypes weight_types_of(const Weights& w) {
  PlanWeightTypes t;
  t.token_embd = w.token_embd.type;
  t.output = w.output.type;
  if constexpr (requires { w.per_layer_model_proj; }) t.per_layer_model_proj = w.per_layer_model_proj.type;
  t.layers.reserve(w.layers.size());
  for (const auto& l : w.layers) {
    LayerWeightTypes lt;
    lt.wq = l.wq.type;
    lt.wk = l.wk.type;
    lt.wv = l.wv.type;
    lt.wo = l.wo.type;
    lt.ffn_gate = l.ffn_gate.type;
    lt.ffn_up = l.ffn_up.type;
    lt.ffn_down = l.ffn_down.type;
    lt.has_bq = is_present(l.bq);
    lt.has_bk = is_present(l.bk);
    lt.has_bv = is_present(l.bv);
    lt.has_bo = is_present(l.bo);
    if constexpr (requires { l.ffn_gate_exps; }) {  // weights that hold experts (the host's)
      lt.ffn_gate_inp = l.ffn_gate_inp.type;
      lt.ffn_gate_exps = l.ffn_gate_exps.type;
      lt.ffn_up_exps = l.ffn_up_exps.type;
      lt.ffn_down_exps = l.ffn_down_exps.type;
      lt.has_router_bias = is_present(l.ffn_gate_inp_b);
      lt.has_expert_biases = is_present(l.ffn_gate_exps_b);
      lt.ffn_gate_shexp = l.ffn_gate_shexp.type;
      lt.ffn_up_shexp = l.ffn_up_shexp.type;
      lt.ffn_down_shexp = l.ffn_down_shexp.type;
    }
    if constexpr (requires { l.wkv_a; }) {
      lt.wq_a = l.wq_a.type;
      lt.wkv_a = l.wkv_a.type;
      lt.wk_b = l.wk_b.type;
      lt.wv_b = l.wv_b.type;
    }
    if constexpr (requires { l.nextn_eh_proj; }) lt.nextn_eh_proj = l.nextn_eh_proj.type;
    if constexpr (requires { l.output_scale; }) lt.has_output_scale = l.output_scale.has_value();
    if constexpr (requires { l.ple_inp_gate; }) {
      lt.ple_inp_gate = l.ple_inp_gate.type;
      lt.ple_proj = l.ple_proj.type;
    }
    if constexpr (requires { l.linear_qkv; }) {
      lt.linear_qkv = l.linear_qkv.type;
      lt.linear_gate = l.linear_gate.type;
      lt.ssm_beta = l.ssm_beta.type;
      lt.ssm_alpha = l.ssm_alpha.type;
      lt.ssm_out = l.ssm_out.type;
    }
    t.layers.push_back(lt);
  }
  return t;
}

// Each sequence's span of queries in a step whose tokens of a sequence are contiguous and at
// consecutive positions (the attention record's shape).
template <class Batch>
void attention_spans(const Batch& b, std::vector<op_costs::AttentionSpan>& spans) {
  spans.clear();
  const size_t n = b.token_sequences.size();
  for (size_t t = 0; t < n; ++t) {
    if (t == 0 || b.token_sequences[t] != b.token_sequences[t - 1]) spans.push_back({0, b.positions[t]});
    ++spans.back().num_tokens;
  }
}

}  // namespace iwb::plan
