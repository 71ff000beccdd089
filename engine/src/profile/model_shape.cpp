// ModelShapes for the cost model: from a GGUF file (through the same binding the engine
// uses, so per-layer types are the file's) or from the synth presets of well-known models
// (dimensions from their published configs).
#include "iwb/engine/profile/cost_model.h"

#include "iwb/engine/synth/synth_preset.h"
#include "model/model_weights.h"
#include "plan/plan_weights.h"

#include <cmath>
#include <filesystem>

namespace iwb {
namespace {

uint64_t matrix_bytes(GgmlType type, int64_t in, int64_t out) {
  const auto row = ggml_row_bytes(type, in);
  return row ? static_cast<uint64_t>(*row) * static_cast<uint64_t>(out) : 0;
}

// One layer's attention matrices: q, k, v and the output, or latent attention's (the query's
// latent and its product, the key/value latent, every head's attn_k_b and attn_v_b, the output).
uint64_t attention_weight_bytes(const ModelConfig& c, const LayerWeightTypes& t, int64_t il) {
  const int64_t d = c.embedding_length;
  if (c.is_recurrent(il)) {  // Qwen 3.5's gated delta net in place of attention
    const int64_t heads = c.linear_num_value_heads, value = c.linear_value_width();
    return matrix_bytes(t.linear_qkv, d, c.linear_conv_channels()) + matrix_bytes(t.linear_gate, d, value) +
           matrix_bytes(t.ssm_beta, d, heads) + matrix_bytes(t.ssm_alpha, d, heads) + matrix_bytes(t.ssm_out, value, d);
  }
  if (!c.has_latent_attention()) {
    const int64_t q_rows = c.q_width() * (c.has_attention_output_gate ? 2 : 1);  // Qwen 3.5: queries and gates
    return matrix_bytes(t.wq, d, q_rows) + matrix_bytes(t.wk, d, c.k_width()) + matrix_bytes(t.wv, d, c.v_width()) +
           matrix_bytes(t.wo, c.attention_output_width(), d);
  }
  const int64_t q_in = c.q_lora_rank > 0 ? c.q_lora_rank : d;
  uint64_t total = matrix_bytes(t.wq, q_in, c.q_heads_width()) + matrix_bytes(t.wkv_a, d, c.latent_kv_width()) +
                   matrix_bytes(t.wk_b, c.mla_nope_width(), c.kv_lora_rank * c.num_heads) +
                   matrix_bytes(t.wv_b, c.kv_lora_rank, c.mla_head_dim_v * c.num_heads) +
                   matrix_bytes(t.wo, c.attention_projection_width(), d);
  if (c.q_lora_rank > 0) total += matrix_bytes(t.wq_a, d, c.q_lora_rank);
  return total;
}

uint64_t sum_weight_bytes(const ModelShape& m) {
  const ModelConfig& c = m.config;
  const int64_t d = c.embedding_length, ff = c.feed_forward_length;
  uint64_t total = matrix_bytes(m.token_embd_type, d, c.vocab_size);
  if (!m.is_output_tied) total += matrix_bytes(m.output_type, d, c.vocab_size);
  for (size_t il = 0; il < m.layers.size(); ++il) {
    const LayerWeightTypes& t = m.layers[il];
    total += attention_weight_bytes(c, t, static_cast<int64_t>(il));
    if (c.is_expert_layer(static_cast<int64_t>(il))) {
      // Every expert's weights: what memory holds, whichever experts a token reads.
      const int64_t eff = c.expert_feed_forward_length, e = c.num_experts, sff = c.shared_expert_width();
      total += matrix_bytes(t.ffn_gate_inp, d, e) + matrix_bytes(t.ffn_gate_exps, d, eff * e) +
               matrix_bytes(t.ffn_up_exps, d, eff * e) + matrix_bytes(t.ffn_down_exps, eff, d * e);
      if (sff > 0) {
        total += matrix_bytes(t.ffn_gate_shexp, d, sff) + matrix_bytes(t.ffn_up_shexp, d, sff) +
                 matrix_bytes(t.ffn_down_shexp, sff, d);
      }
    } else {
      total += matrix_bytes(t.ffn_gate, d, ff) + matrix_bytes(t.ffn_up, d, ff) + matrix_bytes(t.ffn_down, ff, d);
    }
  }
  return total;
}

}  // namespace

// The cost model's presets are `iwb synth`'s real shapes (synth_preset.h): one list of the
// models we know the dimensions of.
const std::vector<std::string>& model_shape_preset_names() {
  static const std::vector<std::string> kNames = [] {
    std::vector<std::string> names;
    for (const synth::SynthShape& s : synth::synth_presets()) {
      if (!s.is_test_shape) names.push_back(s.name);
    }
    return names;
  }();
  return kNames;
}

Result<ModelShape> model_shape_preset(std::string_view name, GgmlType type) {
  const synth::SynthShape* preset = nullptr;
  for (const synth::SynthShape& s : synth::synth_presets()) {
    if (!s.is_test_shape && name == s.name) preset = &s;
  }
  if (!preset) {
    std::string list;
    for (const std::string& n : model_shape_preset_names()) list += (list.empty() ? "" : ", ") + n;
    return make_error(ErrorCode::NotFound, "no model shape preset '" + std::string(name) + "' (presets: " + list + ")");
  }
  if (!ggml_type_traits(static_cast<uint32_t>(type))) {
    return make_error(ErrorCode::InvalidArgument,
                      "weight type id " + std::to_string(static_cast<uint32_t>(type)) + " is not a GGUF tensor type");
  }
  ModelShape m;
  m.name = preset->name;
  m.config = synth::shape_config(*preset);
  const ModelConfig& c = m.config;
  // Every matrix's rows must be whole blocks of the type (llama.cpp's quantizer falls back to
  // another type where they are not; a preset keeps one type, so it refuses instead).
  const int64_t block = ggml_type_traits(type).block_size;
  for (const int64_t width :
       {c.embedding_length, c.has_experts() ? c.expert_feed_forward_length : c.feed_forward_length,
        c.has_dense_layers() ? c.feed_forward_length : c.embedding_length, c.attention_projection_width()}) {
    if (width % block != 0) {
      return make_error(ErrorCode::InvalidArgument,
                        preset->name + " has rows of " + std::to_string(width) + " values, not a multiple of " +
                            std::string(ggml_type_name(type)) + "'s " + std::to_string(block) + "-value blocks");
    }
  }
  m.token_embd_type = type;
  m.output_type = type;
  m.is_output_tied = preset->is_embedding_tied;
  LayerWeightTypes layer{type, type, type, type, type, type, type};
  layer.has_bq = layer.has_bk = layer.has_bv = c.requires_qkv_bias || preset->has_qkv_bias;
  // The router stays F32 in llama.cpp's files (llama-quantize never quantizes ffn_gate_inp).
  layer.ffn_gate_exps = layer.ffn_up_exps = layer.ffn_down_exps = type;
  layer.ffn_gate_shexp = layer.ffn_up_shexp = layer.ffn_down_shexp = type;
  if (c.has_expert_biases) {  // gpt-oss: biases everywhere, and its experts MXFP4 as iwb synth writes them
    layer.has_bq = layer.has_bk = layer.has_bv = layer.has_bo = true;
    layer.has_router_bias = layer.has_expert_biases = true;
    if (preset->has_mxfp4_experts && type != GgmlType::F32) {
      layer.ffn_gate_exps = layer.ffn_up_exps = layer.ffn_down_exps = GgmlType::MXFP4;
    }
  }
  if (c.has_latent_attention()) {
    // Latent attention's narrower rows (DeepSeek's per-head 128 and its 1536 query latent) take
    // Q8_0 where the type's blocks do not fit them, as llama.cpp's quantizer falls back.
    auto fitting = [&](int64_t row) { return row % block == 0 ? type : GgmlType::Q8_0; };
    layer.wq = fitting(c.q_lora_rank > 0 ? c.q_lora_rank : c.embedding_length);
    layer.wq_a = layer.wkv_a = type;
    layer.wk_b = fitting(c.mla_nope_width());
    layer.wv_b = fitting(c.kv_lora_rank);
  }
  layer.linear_qkv = layer.linear_gate = layer.ssm_beta = layer.ssm_alpha = layer.ssm_out = type;
  m.layers.assign(static_cast<size_t>(c.num_layers), layer);
  m.weight_bytes = sum_weight_bytes(m);
  return m;
}

Result<ModelShape> model_shape_from_gguf(const std::string& path) {
  Result<std::unique_ptr<gguf::GgufFile>> file = gguf::GgufFile::open(path);
  if (!file) return file.status();
  Result<ModelConfig> config = model_config_from_gguf(**file);
  if (!config) return config.status();
  Result<ModelWeights> weights = bind_model_weights(**file, *config);
  if (!weights) return weights.status();
  ModelShape m;
  m.name = std::filesystem::path(path).filename().string();
  m.config = std::move(*config);
  m.token_embd_type = weights->token_embd.type;
  m.output_type = weights->output.type;
  m.is_output_tied = weights->is_output_tied;
  m.layers = plan::weight_types_of(*weights).layers;
  m.weight_bytes = sum_weight_bytes(m);
  return m;
}

}  // namespace iwb
