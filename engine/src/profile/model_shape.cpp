// ModelShapes for the cost model: from a GGUF file (through the same binding the engine
// uses, so per-layer types are the file's) or from presets of well-known models (dimensions
// from their published configs).
#include "iwb/engine/profile/cost_model.h"

#include "model/model_weights.h"

#include <cmath>
#include <filesystem>

namespace iwb {
namespace {

uint64_t matrix_bytes(GgmlType type, int64_t in, int64_t out) {
  const auto row = ggml_row_bytes(type, in);
  return row ? static_cast<uint64_t>(*row) * static_cast<uint64_t>(out) : 0;
}

uint64_t sum_weight_bytes(const ModelShape& m) {
  const ModelConfig& c = m.config;
  const int64_t d = c.embedding_length, ff = c.feed_forward_length;
  uint64_t total = matrix_bytes(m.token_embd_type, d, c.vocab_size);
  if (!m.is_output_tied) total += matrix_bytes(m.output_type, d, c.vocab_size);
  for (const LayerWeightTypes& t : m.layers) {
    total += matrix_bytes(t.wq, d, c.q_width()) + matrix_bytes(t.wk, d, c.k_width()) +
             matrix_bytes(t.wv, d, c.v_width()) + matrix_bytes(t.wo, c.attention_output_width(), d) +
             matrix_bytes(t.ffn_gate, d, ff) + matrix_bytes(t.ffn_up, d, ff) + matrix_bytes(t.ffn_down, ff, d);
  }
  return total;
}

struct Preset {
  const char* name;
  ModelArchitecture arch;
  int64_t n_embd, n_layer, n_head, n_kv_head, head_dim, n_ff, vocab, context;
  bool is_tied;
  float rope_base;
  int64_t sliding_window;  // gemma3: five sliding layers, then a global one
};

// From each model's published config.json.
constexpr Preset kPresets[] = {
    {"llama-3.2-1b", ModelArchitecture::Llama, 2048, 16, 32, 8, 64, 8192, 128256, 131072, true, 500000.0f, 0},
    {"llama-3-8b", ModelArchitecture::Llama, 4096, 32, 32, 8, 128, 14336, 128256, 8192, false, 500000.0f, 0},
    {"tinyllama-1.1b", ModelArchitecture::Llama, 2048, 22, 32, 4, 64, 5632, 32000, 2048, false, 10000.0f, 0},
    {"qwen2.5-0.5b", ModelArchitecture::Qwen2, 896, 24, 14, 2, 64, 4864, 151936, 32768, true, 1000000.0f, 0},
    {"qwen2.5-1.5b", ModelArchitecture::Qwen2, 1536, 28, 12, 2, 128, 8960, 151936, 32768, true, 1000000.0f, 0},
    {"gemma-3-270m", ModelArchitecture::Gemma3, 640, 18, 4, 1, 256, 2048, 262144, 32768, true, 1000000.0f, 512},
};

ModelConfig preset_config(const Preset& p) {
  ModelConfig c;
  c.architecture = p.arch;
  c.architecture_name = p.arch == ModelArchitecture::Llama ? "llama" : p.arch == ModelArchitecture::Qwen2 ? "qwen2" : "gemma3";
  c.context_length_train = p.context;
  c.embedding_length = p.n_embd;
  c.num_layers = p.n_layer;
  c.num_heads = p.n_head;
  c.num_kv_heads = p.n_kv_head;
  c.head_dim_k = c.head_dim_v = p.head_dim;
  c.feed_forward_length = p.n_ff;
  c.vocab_size = p.vocab;
  c.rope_num_rotated = p.head_dim;
  c.rope_freq_base = c.rope_freq_base_swa = p.rope_base;
  c.attention_scale = 1.0f / std::sqrt(static_cast<float>(p.head_dim));
  c.is_sliding_layer.assign(static_cast<size_t>(p.n_layer), false);
  c.rope_layout = p.arch == ModelArchitecture::Llama ? RopeLayout::Normal : RopeLayout::NeoX;
  c.requires_qkv_bias = p.arch == ModelArchitecture::Qwen2;
  if (p.arch == ModelArchitecture::Gemma3) {
    c.ffn_activation = GatedActivation::GeluTanh;
    c.has_qk_norm = true;
    c.has_post_norms = true;
    c.embedding_scale = std::sqrt(static_cast<float>(p.n_embd));
    c.sliding_window = p.sliding_window;
    c.rope_freq_base_swa = 10000.0f;
    for (int64_t il = 0; il < p.n_layer; ++il) c.is_sliding_layer[static_cast<size_t>(il)] = il % 6 < 5;
  }
  return c;
}

}  // namespace

const std::vector<std::string>& model_shape_preset_names() {
  static const std::vector<std::string> kNames = [] {
    std::vector<std::string> names;
    for (const Preset& p : kPresets) names.emplace_back(p.name);
    return names;
  }();
  return kNames;
}

Result<ModelShape> model_shape_preset(std::string_view name, GgmlType type) {
  const Preset* preset = nullptr;
  for (const Preset& p : kPresets) {
    if (name == p.name) preset = &p;
  }
  if (!preset) {
    std::string list;
    for (const std::string& n : model_shape_preset_names()) list += (list.empty() ? "" : ", ") + n;
    return make_error(ErrorCode::NotFound, "no model shape preset '" + std::string(name) + "' (presets: " + list + ")");
  }
  if (!ggml_type_traits(static_cast<uint32_t>(type))) {
    return make_error(ErrorCode::InvalidArgument, "weight type id " + std::to_string(static_cast<uint32_t>(type)) +
                                                      " is not a GGUF tensor type");
  }
  ModelShape m;
  m.name = preset->name;
  m.config = preset_config(*preset);
  const ModelConfig& c = m.config;
  // Every matrix's rows must be whole blocks of the type (llama.cpp's quantizer falls back to
  // another type where they are not; a preset keeps one type, so it refuses instead).
  const int64_t block = ggml_type_traits(type).block_size;
  for (const int64_t width : {c.embedding_length, c.feed_forward_length, c.attention_output_width()}) {
    if (width % block != 0) {
      return make_error(ErrorCode::InvalidArgument,
                        std::string(preset->name) + " has rows of " + std::to_string(width) + " values, not a multiple of " +
                            std::string(ggml_type_name(type)) + "'s " + std::to_string(block) + "-value blocks");
    }
  }
  m.token_embd_type = type;
  m.output_type = type;
  m.is_output_tied = preset->is_tied;
  LayerWeightTypes layer{type, type, type, type, type, type, type};
  layer.has_bq = layer.has_bk = layer.has_bv = c.requires_qkv_bias;
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
  for (const LayerWeights& l : weights->layers) {
    LayerWeightTypes t{l.wq.type, l.wk.type, l.wv.type, l.wo.type, l.ffn_gate.type, l.ffn_up.type, l.ffn_down.type};
    t.has_bq = !l.bq.empty();
    t.has_bk = !l.bk.empty();
    t.has_bv = !l.bv.empty();
    t.has_bo = !l.bo.empty();
    m.layers.push_back(t);
  }
  m.weight_bytes = sum_weight_bytes(m);
  return m;
}

}  // namespace iwb
