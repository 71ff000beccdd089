// Binding GGUF tensors to the forward pass's weight slots, by llama.cpp's tensor names (a
// mixture-of-experts layer's experts as one 3-D tensor each, viewed per expert).
#include "model/model_weights.h"

#include "iwb/kernels/dequantize.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <string_view>

namespace iwb {
namespace {

std::string layer_name(int64_t layer, const char* suffix) { return "blk." + std::to_string(layer) + "." + suffix; }

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string s;
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? " x " : "") + std::to_string(shape[i]);
  return s;
}

class Binder {
 public:
  Binder(const gguf::GgufFile& file, ModelWeights* weights) : m_file(file), m_weights(weights) {}

  // A required (or, with is_optional, possibly absent) matrix of the given shape.
  Status matrix(const std::string& name, int64_t in, int64_t out, WeightMatrix* dst, bool is_optional = false) {
    const gguf::TensorInfo* t = m_file.find_tensor(name);
    if (!t) {
      if (is_optional) return {};
      return make_error(ErrorCode::NotFound, "the model is missing tensor '" + name + "'");
    }
    IWB_RETURN_IF_ERROR(check(*t, {in, out}));
    IWB_RETURN_IF_ERROR(check_type(*t, in));
    dst->type = t->type;
    dst->data = m_file.tensor_data(*t).data();
    dst->in_features = in;
    dst->out_features = out;
    dst->num_bytes = t->num_bytes;
    m_weights->num_bytes += t->num_bytes;
    return {};
  }

  // Consecutive row ranges of one fused matrix [in, sum of parts' rows] as separate matrices:
  // rows are whole blocks of any type, so each part is a plain matrix over the same bytes.
  Status fused_matrix(const std::string& name, int64_t in,
                      std::initializer_list<std::pair<int64_t, WeightMatrix*>> parts) {
    int64_t total = 0;
    for (const auto& part : parts) total += part.first;
    WeightMatrix whole;
    IWB_RETURN_IF_ERROR(matrix(name, in, total, &whole));
    const uint64_t row_bytes = *ggml_row_bytes(whole.type, in);
    int64_t row = 0;
    for (const auto& [rows, dst] : parts) {
      *dst = whole;
      dst->data = static_cast<const uint8_t*>(whole.data) + static_cast<uint64_t>(row) * row_bytes;
      dst->out_features = rows;
      dst->num_bytes = static_cast<uint64_t>(rows) * row_bytes;
      row += rows;
    }
    return {};
  }

  bool has(const std::string& name) const { return m_file.find_tensor(name) != nullptr; }

  // A 3-D tensor of `num_experts` matrices of the given shape (one row-slice per expert).
  Status experts(const std::string& name, int64_t in, int64_t out, int64_t num_experts, ExpertMatrices* dst) {
    const gguf::TensorInfo* t = m_file.find_tensor(name);
    if (!t) {
      return make_error(ErrorCode::NotFound, "the model is missing tensor '" + name + "' (the routed experts of a " +
                                                 "mixture-of-experts layer, " + std::to_string(num_experts) +
                                                 " matrices of " + std::to_string(in) + " x " + std::to_string(out) +
                                                 ")");
    }
    IWB_RETURN_IF_ERROR(check(*t, {in, out, num_experts}));
    IWB_RETURN_IF_ERROR(check_type(*t, in));
    dst->type = t->type;
    dst->data = m_file.tensor_data(*t).data();
    dst->in_features = in;
    dst->out_features = out;
    dst->num_experts = num_experts;
    dst->expert_bytes = *ggml_row_bytes(t->type, in) * static_cast<uint64_t>(out);
    dst->num_bytes = t->num_bytes;
    m_weights->num_bytes += t->num_bytes;
    return {};
  }

  // A 3-D tensor whose experts each hold a gate matrix's rows, then an up matrix's ([in, 2 *
  // out, num_experts]): two views with the whole expert's stride.
  Status fused_experts(const std::string& name, int64_t in, int64_t out, int64_t num_experts, ExpertMatrices* gate,
                       ExpertMatrices* up) {
    ExpertMatrices whole;
    IWB_RETURN_IF_ERROR(experts(name, in, 2 * out, num_experts, &whole));
    const uint64_t half = whole.expert_bytes / 2;
    for (ExpertMatrices* part : {gate, up}) {
      *part = whole;
      part->out_features = out;
      part->expert_bytes = half;
      part->expert_stride = whole.expert_bytes;
      part->num_bytes = whole.num_bytes / 2;
    }
    up->data = static_cast<const uint8_t*>(whole.data) + half;
    return {};
  }

  // A vector of n values (with rows > 0: a [n x rows] table, e.g. one bias per expert), copied
  // out as f32; empty when optional and absent.
  Status vector(const std::string& name, int64_t n, std::vector<float>* dst, bool is_optional = false,
                int64_t rows = 0) {
    const gguf::TensorInfo* t = m_file.find_tensor(name);
    if (!t) {
      if (is_optional) return {};
      return make_error(ErrorCode::NotFound, "the model is missing tensor '" + name + "'");
    }
    IWB_RETURN_IF_ERROR(rows > 0 ? check(*t, {n, rows}) : check(*t, {n}));
    const int64_t count = n * std::max<int64_t>(rows, 1);
    dst->resize(static_cast<size_t>(count));
    if (!dequantize_row_ref(t->type, m_file.tensor_data(*t).data(), dst->data(), count)) {
      return make_error(ErrorCode::Unsupported, "tensor '" + name + "' is stored as " +
                                                    std::string(ggml_type_name(t->type)) +
                                                    ", which this engine cannot read as a vector");
    }
    m_weights->num_bytes += t->num_bytes;
    return {};
  }

 private:
  // A matrix type the kernels compute with, in rows of whole blocks.
  static Status check_type(const gguf::TensorInfo& t, int64_t in) {
    if (!ggml_can_dequantize(t.type)) {
      return make_error(ErrorCode::Unsupported, "tensor '" + t.name + "' is stored as " +
                                                    std::string(ggml_type_name(t.type)) +
                                                    ", which this engine cannot compute with");
    }
    if (!ggml_row_bytes(t.type, in)) {
      return make_error(ErrorCode::CorruptFile, "tensor '" + t.name + "' has rows of " + std::to_string(in) +
                                                    " values, not a whole number of " +
                                                    std::string(ggml_type_name(t.type)) + " blocks");
    }
    return {};
  }

  static Status check(const gguf::TensorInfo& t, const std::vector<int64_t>& expected) {
    // Trailing 1s are allowed: some writers store a vector as [n x 1].
    std::vector<int64_t> shape = t.shape;
    while (shape.size() > expected.size() && shape.back() == 1) shape.pop_back();
    if (shape != expected) {
      return make_error(ErrorCode::CorruptFile, "tensor '" + t.name + "' has shape " + shape_text(t.shape) +
                                                    ", expected " + shape_text(expected));
    }
    return {};
  }

  const gguf::GgufFile& m_file;
  ModelWeights* m_weights;
};

// Latent attention's tensors (llama.cpp's deepseek2 loader, attn_k_b / attn_v_b files).
Status bind_latent_attention(Binder& b, const ModelConfig& c, int64_t il, LayerWeights* l) {
  const int64_t d = c.embedding_length;
  if (c.q_lora_rank > 0) {
    IWB_RETURN_IF_ERROR(b.matrix(layer_name(il, "attn_q_a.weight"), d, c.q_lora_rank, &l->wq_a));
    IWB_RETURN_IF_ERROR(b.vector(layer_name(il, "attn_q_a_norm.weight"), c.q_lora_rank, &l->attn_q_a_norm));
    IWB_RETURN_IF_ERROR(b.matrix(layer_name(il, "attn_q_b.weight"), c.q_lora_rank, c.q_heads_width(), &l->wq));
  } else {
    IWB_RETURN_IF_ERROR(b.matrix(layer_name(il, "attn_q.weight"), d, c.q_heads_width(), &l->wq));
  }
  IWB_RETURN_IF_ERROR(b.matrix(layer_name(il, "attn_kv_a_mqa.weight"), d, c.latent_kv_width(), &l->wkv_a));
  IWB_RETURN_IF_ERROR(b.vector(layer_name(il, "attn_kv_a_norm.weight"), c.kv_lora_rank, &l->attn_kv_a_norm));
  IWB_RETURN_IF_ERROR(
      b.experts(layer_name(il, "attn_k_b.weight"), c.mla_nope_width(), c.kv_lora_rank, c.num_heads, &l->wk_b));
  IWB_RETURN_IF_ERROR(
      b.experts(layer_name(il, "attn_v_b.weight"), c.kv_lora_rank, c.mla_head_dim_v, c.num_heads, &l->wv_b));
  return b.matrix(layer_name(il, "attn_output.weight"), c.attention_projection_width(), d, &l->wo);
}

// Ordinary attention's tensors: q, k, v (fused or apart) with their biases, the output, q/k
// norms, post-norms and sinks where the model has them.
Status bind_attention(Binder& b, const ModelConfig& c, int64_t il, LayerWeights* l) {
  const int64_t d = c.embedding_length;
  // The layer's own widths (Gemma 4's sliding and global layers differ).
  const int64_t k_width = c.layer_k_width(il), v_width = c.layer_v_width(il);
  // attn_q's rows: with an output gate (Qwen 3.5) each head's query and its gate.
  const int64_t q_width = c.layer_q_width(il) * (c.has_attention_output_gate ? 2 : 1);
  // llama.cpp's converters write q, k and v fused for some models (phi3) and apart for most.
  const bool is_qkv_fused = b.has(layer_name(il, "attn_qkv.weight"));
  if (is_qkv_fused) {
    IWB_RETURN_IF_ERROR(b.fused_matrix(layer_name(il, "attn_qkv.weight"), d,
                                       {{q_width, &l->wq}, {k_width, &l->wk}, {v_width, &l->wv}}));
  } else if (!c.has_own_kv(il)) {
    // Gemma 4's shared KV layers: queries only (they read an earlier layer's cache).
    IWB_RETURN_IF_ERROR(b.matrix(layer_name(il, "attn_q.weight"), d, q_width, &l->wq));
  } else {
    IWB_RETURN_IF_ERROR(b.matrix(layer_name(il, "attn_q.weight"), d, q_width, &l->wq));
    IWB_RETURN_IF_ERROR(b.matrix(layer_name(il, "attn_k.weight"), d, k_width, &l->wk));
    // Gemma 4's layers without attn_v take their values from the keys' projection (llama.cpp:
    // Vcur = Kcur before the k norm): the same matrix twice.
    const bool is_value_from_key = c.has_value_norm && !b.has(layer_name(il, "attn_v.weight"));
    if (is_value_from_key) {
      l->wv = l->wk;
    } else {
      IWB_RETURN_IF_ERROR(b.matrix(layer_name(il, "attn_v.weight"), d, v_width, &l->wv));
    }
  }
  IWB_RETURN_IF_ERROR(b.matrix(layer_name(il, "attn_output.weight"), c.layer_attention_output_width(il), d, &l->wo));
  std::vector<float> bqkv;
  if (is_qkv_fused) {
    IWB_RETURN_IF_ERROR(b.vector(layer_name(il, "attn_qkv.bias"), q_width + k_width + v_width, &bqkv, true));
  }
  if (!bqkv.empty()) {
    const auto q_end = bqkv.begin() + q_width, k_end = q_end + k_width;
    l->bq.assign(bqkv.begin(), q_end);
    l->bk.assign(q_end, k_end);
    l->bv.assign(k_end, bqkv.end());
  } else {
    const bool is_bias_optional = !c.requires_qkv_bias;
    IWB_RETURN_IF_ERROR(b.vector(layer_name(il, "attn_q.bias"), q_width, &l->bq, is_bias_optional));
    if (c.has_own_kv(il)) {
      IWB_RETURN_IF_ERROR(b.vector(layer_name(il, "attn_k.bias"), k_width, &l->bk, is_bias_optional));
      IWB_RETURN_IF_ERROR(b.vector(layer_name(il, "attn_v.bias"), v_width, &l->bv, is_bias_optional));
    }
  }
  IWB_RETURN_IF_ERROR(b.vector(layer_name(il, "attn_output.bias"), d, &l->bo, true));
  if (c.has_qk_norm) {  // glm4moe: the config says so when the file has them
    const int64_t q_norm = c.is_qk_norm_full_width ? c.q_norm_width() : c.layer_head_dim_k(il);
    const int64_t k_norm = c.is_qk_norm_full_width ? c.k_norm_width() : c.layer_head_dim_k(il);
    IWB_RETURN_IF_ERROR(b.vector(layer_name(il, "attn_q_norm.weight"), q_norm, &l->q_norm));
    if (c.has_own_kv(il)) IWB_RETURN_IF_ERROR(b.vector(layer_name(il, "attn_k_norm.weight"), k_norm, &l->k_norm));
  }
  if (c.has_post_norms) {
    IWB_RETURN_IF_ERROR(b.vector(layer_name(il, "post_attention_norm.weight"), d, &l->post_attention_norm));
    IWB_RETURN_IF_ERROR(b.vector(layer_name(il, "post_ffw_norm.weight"), d, &l->post_ffw_norm));
  }
  if (c.has_attention_sinks) {
    IWB_RETURN_IF_ERROR(b.vector(layer_name(il, "attn_sinks.weight"), c.num_heads, &l->attn_sinks));
  }
  return {};
}

// Gemma 4's expert layer beyond the experts and the dense FFN (llama.cpp's gemma4 loader): the
// router's input scale (folded with 1 / sqrt(n_embd) into one norm weight), each expert's output
// scale, and the norms around the two parts.
Status bind_gemma4_moe(Binder& b, const ModelConfig& c, int64_t il, LayerWeights* l) {
  const int64_t d = c.embedding_length;
  IWB_RETURN_IF_ERROR(b.vector(layer_name(il, "ffn_gate_inp.scale"), d, &l->router_norm));
  const float inv_sqrt_d = 1.0f / std::sqrt(static_cast<float>(d));
  for (float& x : l->router_norm) x *= inv_sqrt_d;
  IWB_RETURN_IF_ERROR(b.vector(layer_name(il, "ffn_down_exps.scale"), c.num_experts, &l->ffn_down_exps_scale, true));
  IWB_RETURN_IF_ERROR(b.vector(layer_name(il, "post_ffw_norm_1.weight"), d, &l->post_ffw_norm_1));
  IWB_RETURN_IF_ERROR(b.vector(layer_name(il, "pre_ffw_norm_2.weight"), d, &l->pre_ffw_norm_2));
  return b.vector(layer_name(il, "post_ffw_norm_2.weight"), d, &l->post_ffw_norm_2);
}

// The pre-FFN norm and the FFN: routed (and shared) experts, or dense.
Status bind_feed_forward(Binder& b, const ModelConfig& c, int64_t il, LayerWeights* l) {
  const int64_t d = c.embedding_length;
  if (c.has_pre_norms) {
    IWB_RETURN_IF_ERROR(b.vector(layer_name(il, (c.ffn_norm_name + ".weight").c_str()), d, &l->ffn_norm));
  }
  if (c.has_parallel_dense_ffn && c.is_expert_layer(il)) IWB_RETURN_IF_ERROR(bind_gemma4_moe(b, c, il, l));
  if (c.is_expert_layer(il)) {
    const int64_t eff = c.expert_feed_forward_length, e = c.num_experts;
    IWB_RETURN_IF_ERROR(b.matrix(layer_name(il, "ffn_gate_inp.weight"), d, e, &l->ffn_gate_inp));
    if ((c.has_parallel_dense_ffn || c.has_shared_expert_gate) && b.has(layer_name(il, "ffn_gate_up_exps.weight"))) {
      // Gemma 4's and Qwen 3.5's converters may store each expert's gate and up rows together (gate first).
      IWB_RETURN_IF_ERROR(
          b.fused_experts(layer_name(il, "ffn_gate_up_exps.weight"), d, eff, e, &l->ffn_gate_exps, &l->ffn_up_exps));
    } else {
      IWB_RETURN_IF_ERROR(b.experts(layer_name(il, "ffn_gate_exps.weight"), d, eff, e, &l->ffn_gate_exps));
      IWB_RETURN_IF_ERROR(b.experts(layer_name(il, "ffn_up_exps.weight"), d, eff, e, &l->ffn_up_exps));
    }
    IWB_RETURN_IF_ERROR(b.experts(layer_name(il, "ffn_down_exps.weight"), eff, d, e, &l->ffn_down_exps));
    if (c.has_expert_biases) {  // required, as llama.cpp's openai-moe loader requires them
      IWB_RETURN_IF_ERROR(b.vector(layer_name(il, "ffn_gate_inp.bias"), e, &l->ffn_gate_inp_b));
      IWB_RETURN_IF_ERROR(b.vector(layer_name(il, "ffn_gate_exps.bias"), eff, &l->ffn_gate_exps_b, false, e));
      IWB_RETURN_IF_ERROR(b.vector(layer_name(il, "ffn_up_exps.bias"), eff, &l->ffn_up_exps_b, false, e));
      IWB_RETURN_IF_ERROR(b.vector(layer_name(il, "ffn_down_exps.bias"), d, &l->ffn_down_exps_b, false, e));
    }
    if (c.has_expert_selection_bias) {
      IWB_RETURN_IF_ERROR(b.vector(layer_name(il, "exp_probs_b.bias"), e, &l->exp_probs_b));
    }
    if (c.num_shared_experts > 0) {
      const int64_t sff = c.shared_expert_width();
      IWB_RETURN_IF_ERROR(b.matrix(layer_name(il, "ffn_gate_shexp.weight"), d, sff, &l->ffn_gate_shexp));
      IWB_RETURN_IF_ERROR(b.matrix(layer_name(il, "ffn_up_shexp.weight"), d, sff, &l->ffn_up_shexp));
      IWB_RETURN_IF_ERROR(b.matrix(layer_name(il, "ffn_down_shexp.weight"), sff, d, &l->ffn_down_shexp));
      if (c.has_shared_expert_gate) {
        IWB_RETURN_IF_ERROR(b.vector(layer_name(il, "ffn_gate_inp_shexp.weight"), d, &l->ffn_gate_inp_shexp));
      }
    }
    if (!c.has_parallel_dense_ffn) return {};  // Gemma 4's expert layers also have the dense FFN below
  }
  const int64_t ff = c.layer_feed_forward_length(il);
  if (c.has_fused_gate_up) {
    // llama.cpp's phi3 graph runs swiglu on ffn_up's output: silu of the first half times the second.
    IWB_RETURN_IF_ERROR(b.fused_matrix(layer_name(il, "ffn_up.weight"), d, {{ff, &l->ffn_gate}, {ff, &l->ffn_up}}));
  } else {
    IWB_RETURN_IF_ERROR(b.matrix(layer_name(il, "ffn_gate.weight"), d, ff, &l->ffn_gate));
    IWB_RETURN_IF_ERROR(b.matrix(layer_name(il, "ffn_up.weight"), d, ff, &l->ffn_up));
  }
  IWB_RETURN_IF_ERROR(b.matrix(layer_name(il, "ffn_down.weight"), ff, d, &l->ffn_down));
  return {};
}

// Qwen 3.5's recurrent layer (llama.cpp's qwen35 loader): the gated delta net's tensors.
Status bind_recurrent(Binder& b, const ModelConfig& c, int64_t il, LayerWeights* l) {
  const int64_t d = c.embedding_length, channels = c.linear_conv_channels(), heads = c.linear_num_value_heads;
  IWB_RETURN_IF_ERROR(b.matrix(layer_name(il, "attn_qkv.weight"), d, channels, &l->linear_qkv));
  IWB_RETURN_IF_ERROR(b.matrix(layer_name(il, "attn_gate.weight"), d, c.linear_value_width(), &l->linear_gate));
  IWB_RETURN_IF_ERROR(b.matrix(layer_name(il, "ssm_beta.weight"), d, heads, &l->ssm_beta));
  IWB_RETURN_IF_ERROR(b.matrix(layer_name(il, "ssm_alpha.weight"), d, heads, &l->ssm_alpha));
  IWB_RETURN_IF_ERROR(b.matrix(layer_name(il, "ssm_out.weight"), c.linear_value_width(), d, &l->ssm_out));
  IWB_RETURN_IF_ERROR(
      b.vector(layer_name(il, "ssm_conv1d.weight"), c.linear_conv_kernel, &l->ssm_conv1d, false, channels));
  IWB_RETURN_IF_ERROR(b.vector(layer_name(il, "ssm_dt.bias"), heads, &l->ssm_dt_bias));
  IWB_RETURN_IF_ERROR(b.vector(layer_name(il, "ssm_a"), heads, &l->ssm_a));
  return b.vector(layer_name(il, "ssm_norm.weight"), c.linear_head_dim, &l->ssm_norm);
}

Status bind_layer(Binder& b, const ModelConfig& c, int64_t il, LayerWeights* l) {
  const int64_t d = c.embedding_length;
  if (c.has_pre_norms) IWB_RETURN_IF_ERROR(b.vector(layer_name(il, "attn_norm.weight"), d, &l->attn_norm));
  if (c.is_recurrent(il)) {
    IWB_RETURN_IF_ERROR(bind_recurrent(b, c, il, l));
  } else if (c.has_latent_attention()) {
    IWB_RETURN_IF_ERROR(bind_latent_attention(b, c, il, l));
  } else {
    IWB_RETURN_IF_ERROR(bind_attention(b, c, il, l));
  }
  if (c.has_value_norm) {  // Gemma 4: the layer's output scalar, where the file has one
    std::vector<float> scale;
    IWB_RETURN_IF_ERROR(b.vector(layer_name(il, "layer_output_scale.weight"), 1, &scale, true));
    if (!scale.empty()) l->output_scale = scale[0];
  }
  if (c.has_per_layer_embeddings()) {  // Gemma 4 E2B / E4B
    const int64_t p = c.per_layer_embedding_length;
    IWB_RETURN_IF_ERROR(b.matrix(layer_name(il, "inp_gate.weight"), d, p, &l->ple_inp_gate));
    IWB_RETURN_IF_ERROR(b.matrix(layer_name(il, "proj.weight"), p, d, &l->ple_proj));
    IWB_RETURN_IF_ERROR(b.vector(layer_name(il, "post_norm.weight"), d, &l->ple_post_norm));
  }
  return bind_feed_forward(b, c, il, l);
}

}  // namespace

// Expert tensors this engine's mixture-of-experts FFN does not run for this architecture (shared
// experts and DeepSeek's selection biases outside glm4moe, llama.cpp's merged gate/up experts):
// ignoring them would compute another model, so they are refused by name.
Status refuse_unknown_expert_tensors(const gguf::GgufFile& file, const ModelConfig& c) {
  for (const gguf::TensorInfo& t : file.tensors()) {
    for (const char* part : {"_shexp", "exp_probs_b", "ffn_gate_up_exps", "_exps.bias", "ffn_gate_inp.bias"}) {
      const std::string_view p(part);
      if ((c.has_parallel_dense_ffn || c.has_shared_expert_gate) && p == "ffn_gate_up_exps") continue;  // bound below
      if (c.has_expert_biases && (p == "_exps.bias" || p == "ffn_gate_inp.bias")) continue;  // gpt-oss's, bound below
      if (c.has_expert_selection_bias && p == "exp_probs_b") continue;                       // glm4moe's, bound below
      if (p == "_shexp" && c.num_shared_experts > 0 &&
          (c.has_shared_expert_gate || t.name.find("ffn_gate_inp_shexp") == std::string::npos)) {
        continue;  // glm4moe's shared experts, and Qwen 3.5 MoE's gated one (not Qwen2-MoE's)
      }
      if (t.name.find(part) != std::string::npos) {
        return make_error(ErrorCode::Unsupported, "tensor '" + t.name + "' belongs to a mixture-of-experts layout " +
                                                      "this engine does not run (it runs routed experts only: " +
                                                      "ffn_gate_inp, ffn_gate_exps, ffn_up_exps, ffn_down_exps)");
      }
    }
  }
  return {};
}

Result<ModelWeights> bind_model_weights(const gguf::GgufFile& file, const ModelConfig& c,
                                        const BindProgress& progress) {
  ModelWeights w;
  if (c.has_experts()) IWB_RETURN_IF_ERROR(refuse_unknown_expert_tensors(file, c));
  Binder b(file, &w);
  IWB_RETURN_IF_ERROR(b.matrix("token_embd.weight", c.embedding_length, c.vocab_size, &w.token_embd));
  IWB_RETURN_IF_ERROR(b.vector("output_norm.weight", c.embedding_length, &w.output_norm));
  // granite divides its logits by logit_scale: the same as dividing the output norm's weights,
  // which the classifier's input is multiplied by (one op less, and the CUDA backend needs none).
  if (c.logit_scale != 1.0f) {
    for (float& x : w.output_norm) x /= c.logit_scale;
  }
  IWB_RETURN_IF_ERROR(b.matrix("output.weight", c.embedding_length, c.vocab_size, &w.output, true));
  if (w.output.data == nullptr) {
    w.output = w.token_embd;  // tied embeddings: the classifier is the embedding table
    w.is_output_tied = true;
  }
  IWB_RETURN_IF_ERROR(b.vector("rope_freqs.weight", c.rope_num_rotated / 2, &w.rope_freqs, true));
  if (w.rope_freqs.empty()) {
    IWB_RETURN_IF_ERROR(b.vector("rope_factors_long.weight", c.rope_num_rotated / 2, &w.rope_factors_long, true));
    IWB_RETURN_IF_ERROR(b.vector("rope_factors_short.weight", c.rope_num_rotated / 2, &w.rope_factors_short, true));
    w.rope_freqs = w.rope_factors_short;
  }
  if (c.has_per_layer_embeddings()) {  // Gemma 4 E2B / E4B
    const int64_t width = c.per_layer_inputs_width();
    IWB_RETURN_IF_ERROR(b.matrix("per_layer_token_embd.weight", width, c.vocab_size, &w.per_layer_token_embd));
    IWB_RETURN_IF_ERROR(b.matrix("per_layer_model_proj.weight", c.embedding_length, width, &w.per_layer_model_proj));
    IWB_RETURN_IF_ERROR(b.vector("per_layer_proj_norm.weight", c.per_layer_embedding_length, &w.per_layer_proj_norm));
  }
  w.layers.resize(static_cast<size_t>(c.num_layers));
  for (int64_t il = 0; il < c.num_layers; ++il) {
    IWB_RETURN_IF_ERROR(bind_layer(b, c, il, &w.layers[static_cast<size_t>(il)]));
    if (progress) progress(static_cast<double>(il + 1) / static_cast<double>(c.num_layers));
  }
  return w;
}

Result<ModelWeights> bind_mtp_weights(const gguf::GgufFile& file, const ModelConfig& c, const ModelWeights& target,
                                      bool is_head_only_file) {
  if (c.num_nextn_layers <= 0) {
    return make_error(ErrorCode::Unsupported,
                      "the model has no multi-token-prediction layers (no nextn_predict_layers in the file)");
  }
  const int64_t il = c.num_layers;  // the first block after the trunk
  const int64_t d = c.embedding_length;
  if (file.find_tensor(layer_name(il, "nextn.eh_proj.weight")) == nullptr) {
    return make_error(ErrorCode::NotFound, "the file announces " + std::to_string(c.num_nextn_layers) +
                                               " multi-token-prediction layer(s) but holds no '" +
                                               layer_name(il, "nextn.eh_proj.weight") +
                                               "' (converted without them: give the head's own mtp- file)");
  }
  // An mtp- file's own copies of the model's tensors, or the target's.
  WeightMatrix token_embd = target.token_embd, output = target.output;
  std::vector<float> output_norm = target.output_norm;
  bool is_output_tied = target.is_output_tied;
  uint64_t own_bytes = 0;
  if (is_head_only_file) {
    ModelWeights own;
    Binder root(file, &own);
    IWB_RETURN_IF_ERROR(root.matrix("token_embd.weight", d, c.vocab_size, &own.token_embd));
    IWB_RETURN_IF_ERROR(root.vector("output_norm.weight", d, &own.output_norm));
    if (c.logit_scale != 1.0f) {
      for (float& x : own.output_norm) x /= c.logit_scale;
    }
    IWB_RETURN_IF_ERROR(root.matrix("output.weight", d, c.vocab_size, &own.output, true));
    is_output_tied = own.output.data == nullptr;
    token_embd = own.token_embd;
    output = is_output_tied ? own.token_embd : own.output;
    output_norm = std::move(own.output_norm);
    own_bytes = own.num_bytes;  // the file's copies are the drafter's memory
  }
  ModelWeights w;
  Binder b(file, &w);
  w.layers.resize(1);
  LayerWeights& l = w.layers[0];
  IWB_RETURN_IF_ERROR(bind_layer(b, c, il, &l));
  IWB_RETURN_IF_ERROR(b.vector(layer_name(il, "nextn.enorm.weight"), d, &l.nextn_enorm));
  IWB_RETURN_IF_ERROR(b.vector(layer_name(il, "nextn.hnorm.weight"), d, &l.nextn_hnorm));
  IWB_RETURN_IF_ERROR(b.matrix(layer_name(il, "nextn.eh_proj.weight"), 2 * d, d, &l.nextn_eh_proj));
  IWB_RETURN_IF_ERROR(b.matrix(layer_name(il, "nextn.embed_tokens.weight"), d, c.vocab_size, &w.token_embd, true));
  if (w.token_embd.data == nullptr) w.token_embd = token_embd;
  IWB_RETURN_IF_ERROR(b.vector(layer_name(il, "nextn.shared_head_norm.weight"), d, &w.output_norm, true));
  if (w.output_norm.empty()) {
    w.output_norm = std::move(output_norm);
  } else if (c.logit_scale != 1.0f) {
    for (float& x : w.output_norm) x /= c.logit_scale;  // as the target's (bind_model_weights)
  }
  IWB_RETURN_IF_ERROR(b.matrix(layer_name(il, "nextn.shared_head_head.weight"), d, c.vocab_size, &w.output, true));
  if (w.output.data == nullptr) {
    w.output = output;
    w.is_output_tied = is_output_tied;
  }
  w.num_bytes += own_bytes;
  w.rope_freqs = target.rope_freqs;
  w.rope_factors_long = target.rope_factors_long;
  w.rope_factors_short = target.rope_factors_short;
  return w;
}

void select_rope_factors(const ModelConfig& c, int64_t context_length, ModelWeights* w) {
  if (w->rope_factors_long.empty() && w->rope_factors_short.empty()) return;
  const int64_t original = c.rope_original_context > 0 ? c.rope_original_context : c.context_length_train;
  w->rope_freqs = context_length > original ? w->rope_factors_long : w->rope_factors_short;
}

}  // namespace iwb
