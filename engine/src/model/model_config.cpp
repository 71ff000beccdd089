// ModelConfig from GGUF metadata. Defaults and per-architecture facts follow llama.cpp's
// loader (src/llama-model.cpp), so a GGUF written by llama.cpp's converter runs the same here.
#include "iwb/engine/model/model_config.h"

#include "model/gemma4_config.h"
#include "model/qwen35_config.h"

#include <algorithm>
#include <cmath>
#include <string_view>

namespace iwb {
namespace {

class KeyReader {
 public:
  KeyReader(const gguf::GgufFile& file, std::string arch) : m_file(file), m_arch(std::move(arch)) {}

  std::string key(std::string_view suffix) const { return m_arch + "." + std::string(suffix); }
  const gguf::GgufFile& file() const { return m_file; }

  // A required positive integer; per-layer arrays are refused (no supported model has them).
  Status positive_int(std::string_view suffix, int64_t* out) const {
    const std::string k = key(suffix);
    const gguf::Value* v = m_file.find(k);
    if (!v) return make_error(ErrorCode::NotFound, "the model has no '" + k + "' metadata key");
    if (v->as_array()) {
      return make_error(ErrorCode::Unsupported, "'" + k + "' varies per layer, which this engine does not support");
    }
    const std::optional<int64_t> i = v->as_int();
    if (!i || *i <= 0) return make_error(ErrorCode::CorruptFile, "'" + k + "' must be a positive integer");
    *out = *i;
    return {};
  }

  // An optional positive integer: `fallback` when absent.
  Status optional_int(std::string_view suffix, int64_t fallback, int64_t* out) const {
    if (!m_file.find(key(suffix))) {
      *out = fallback;
      return {};
    }
    return positive_int(suffix, out);
  }

  Status optional_float(std::string_view suffix, float fallback, float* out) const {
    const std::string k = key(suffix);
    const gguf::Value* v = m_file.find(k);
    if (!v) {
      *out = fallback;
      return {};
    }
    const std::optional<double> f = v->as_float();
    if (!f || !std::isfinite(*f)) return make_error(ErrorCode::CorruptFile, "'" + k + "' must be a finite number");
    *out = static_cast<float>(*f);
    return {};
  }

 private:
  const gguf::GgufFile& m_file;
  std::string m_arch;
};

Status read_rope_scaling(const KeyReader& keys, const gguf::GgufFile& file, const ArchitectureTraits& traits,
                         ModelConfig* c) {
  const std::string type = file.get_string(keys.key("rope.scaling.type")).value_or("");
  float factor = 0.0f;
  IWB_RETURN_IF_ERROR(keys.optional_float("rope.scaling.factor", 0.0f, &factor));
  if (factor == 0.0f) IWB_RETURN_IF_ERROR(keys.optional_float("rope.scale_linear", 0.0f, &factor));
  // "longrope" (phi3) scales like linear here; its per-frequency factors are tensors.
  if (!type.empty() && type != "none" && type != "linear" && type != "longrope" && type != "yarn") {
    return make_error(ErrorCode::Unsupported, "RoPE scaling '" + type + "' (" + keys.key("rope.scaling.type") +
                                                  ") is not supported; only linear, LongRoPE and YaRN scaling are");
  }
  if (type == "yarn") {
    float log_mul = 0.0f;
    IWB_RETURN_IF_ERROR(keys.optional_float("rope.scaling.yarn_log_multiplier", 0.0f, &log_mul));
    if (log_mul != 0.0f && !traits.has_latent_attention) {
      return make_error(ErrorCode::Unsupported, "YaRN with '" + keys.key("rope.scaling.yarn_log_multiplier") +
                                                    "' (DeepSeek's attention scaling) is supported for deepseek2 only");
    }
    // llama.cpp's converter writes 0.1 * mscale_all_dim and its loader divides it out again.
    c->rope_yarn_log_multiplier = log_mul / 0.1f;
    c->rope_ext_factor = 1.0f;
    IWB_RETURN_IF_ERROR(keys.optional_int("rope.scaling.original_context_length", c->context_length_train,
                                          &c->rope_yarn_original_context));
  }
  IWB_RETURN_IF_ERROR(keys.optional_int("rope.scaling.original_context_length", 0, &c->rope_original_context));
  IWB_RETURN_IF_ERROR(keys.optional_float("rope.scaling.attn_factor", 1.0f, &c->rope_attn_factor));
  if (!(c->rope_attn_factor > 0.0f)) {
    return make_error(ErrorCode::CorruptFile, "'" + keys.key("rope.scaling.attn_factor") + "' must be positive");
  }
  if (type == "none" || factor == 0.0f) return {};
  if (factor < 0.0f) return make_error(ErrorCode::CorruptFile, "the RoPE scaling factor must be positive");
  c->rope_freq_scale = 1.0f / factor;
  if (c->rope_ext_factor != 0.0f) {
    // llama.cpp: attn_factor = get_mscale(factor) / (1 + 0.1 ln factor), in float (1 up to rounding).
    const float f = 1.0f / c->rope_freq_scale;
    // With DeepSeek's log multiplier, llama.cpp's ratio get_mscale(f, m) / get_mscale(f, m) is 1
    // for deepseek2 (its mscale is mscale_all_dim): the magnitude goes into attention_scale.
    const float mscale = f <= 1.0f || c->rope_yarn_log_multiplier != 0.0f ? 1.0f : 0.1f * std::log(f) + 1.0f;
    c->rope_yarn_attn_factor = mscale * (1.0f / (1.0f + 0.1f * std::log(f)));
  }
  return {};
}

// <arch>.attention.sliding_window_pattern, as llama.cpp's load_swa_pattern reads it: one bool
// per layer (true: the layer slides; OLMo 3's converter writes this), or a period n (all but
// every n-th layer slide). Without the key the architecture row's period stands.
Status read_sliding_pattern(const KeyReader& keys, ModelConfig* c) {
  const std::string k = keys.key("attention.sliding_window_pattern");
  const gguf::Value* v = keys.file().find(k);
  if (v == nullptr) return {};
  if (const gguf::Array* a = v->as_array()) {
    if (static_cast<int64_t>(a->items.size()) != c->num_layers) {
      return make_error(ErrorCode::CorruptFile, "'" + k + "' has " + std::to_string(a->items.size()) + " entries for " +
                                                    std::to_string(c->num_layers) + " layers");
    }
    for (size_t il = 0; il < a->items.size(); ++il) {
      const std::optional<bool> b = a->items[il].as_bool();
      if (!b) return make_error(ErrorCode::CorruptFile, "'" + k + "' must hold one bool per layer");
      c->is_sliding_layer[il] = *b;
    }
    return {};
  }
  const std::optional<int64_t> period = v->as_int();
  if (!period || *period < 0) return make_error(ErrorCode::CorruptFile, "'" + k + "' must be a period or bools");
  for (int64_t il = 0; il < c->num_layers; ++il) {
    c->is_sliding_layer[static_cast<size_t>(il)] = *period == 0 || il % *period < *period - 1;  // set_swa_pattern
  }
  return {};
}

// What the architecture's row leaves to the file: the window of its sliding layers and their
// RoPE base, the soft-caps (gemma2's, gemma3's final one), granite's multipliers.
Status read_architecture_keys(const KeyReader& keys, const ArchitectureTraits& traits, ModelConfig* c) {
  int64_t window = 0;
  if (traits.is_sliding_window_required) {
    IWB_RETURN_IF_ERROR(keys.positive_int("attention.sliding_window", &window));  // as llama.cpp's gpt-oss
  } else if (traits.sliding_period > 0) {
    IWB_RETURN_IF_ERROR(keys.optional_int("attention.sliding_window", traits.default_sliding_window, &window));
  }
  apply_architecture(traits, window, c);
  if (window > 0) IWB_RETURN_IF_ERROR(read_sliding_pattern(keys, c));
  if (window > 0 && traits.is_sliding_rope_global) {
    // gpt-oss, gemma2, olmo2: the sliding layers rotate with the global base unless the file
    // gives them one (olmo2's without the global layers' scaling: apply_architecture).
    IWB_RETURN_IF_ERROR(keys.optional_float("rope.freq_base_swa", c->rope_freq_base, &c->rope_freq_base_swa));
  } else if (window > 0) {
    // The local layers keep RoPE base 10000 and no scaling, whatever the global layers use.
    IWB_RETURN_IF_ERROR(keys.optional_float("rope.freq_base_swa", 10000.0f, &c->rope_freq_base_swa));
    c->rope_freq_scale_swa = 1.0f;
  } else if (traits.id == ModelArchitecture::Gemma3) {
    // Without sliding layers llama.cpp's gemma3 graph applies the final soft-cap if given.
    IWB_RETURN_IF_ERROR(keys.optional_float("final_logit_softcapping", 0.0f, &c->final_logit_softcap));
  }
  if (traits.has_granite_scales) {
    // As llama.cpp's granite loader: 0 (or absent) leaves a multiplier off; logit_scale is required.
    if (keys.file().find(keys.key("logit_scale")) == nullptr) {
      return make_error(ErrorCode::NotFound, "the model has no '" + keys.key("logit_scale") + "' metadata key");
    }
    float embedding = 0.0f, residual = 0.0f, attention = 0.0f;
    IWB_RETURN_IF_ERROR(keys.optional_float("logit_scale", 1.0f, &c->logit_scale));
    IWB_RETURN_IF_ERROR(keys.optional_float("embedding_scale", 0.0f, &embedding));
    IWB_RETURN_IF_ERROR(keys.optional_float("residual_scale", 0.0f, &residual));
    IWB_RETURN_IF_ERROR(keys.optional_float("attention.scale", 0.0f, &attention));
    if (c->logit_scale <= 0.0f) {
      return make_error(ErrorCode::CorruptFile, "'" + keys.key("logit_scale") + "' must be positive");
    }
    if (embedding != 0.0f) c->embedding_scale = embedding;
    if (residual != 0.0f) c->residual_scale = residual;
    if (attention != 0.0f) c->attention_scale = attention;
    const gguf::Value* finetuned = keys.file().find(keys.key("rope.scaling.finetuned"));
    if (finetuned != nullptr && finetuned->as_bool() == std::optional<bool>(false)) {
      return make_error(ErrorCode::Unsupported,
                        "granite without RoPE ('" + keys.key("rope.scaling.finetuned") + "' false) is not supported");
    }
  }
  if (traits.has_logit_softcaps) {
    IWB_RETURN_IF_ERROR(keys.optional_float("attn_logit_softcapping", 50.0f, &c->attention_softcap));
    IWB_RETURN_IF_ERROR(keys.optional_float("final_logit_softcapping", 30.0f, &c->final_logit_softcap));
    if (c->attention_softcap <= 0.0f || c->final_logit_softcap <= 0.0f) {
      return make_error(ErrorCode::CorruptFile, "'" + keys.key("attn_logit_softcapping") + "' and '" +
                                                    keys.key("final_logit_softcapping") + "' must be positive");
    }
  }
  return {};
}

// A non-negative integer key, `fallback` when absent (counts that may be 0).
Status count_key(const KeyReader& keys, std::string_view suffix, int64_t fallback, int64_t* out) {
  const gguf::Value* v = keys.file().find(keys.key(suffix));
  if (v == nullptr) {
    *out = fallback;
    return {};
  }
  const std::optional<int64_t> i = v->as_int();
  if (!i || *i < 0) return make_error(ErrorCode::CorruptFile, "'" + keys.key(suffix) + "' must be a count");
  *out = *i;
  return {};
}

bool has_selection_bias_tensor(const gguf::GgufFile& file) {
  for (const gguf::TensorInfo& t : file.tensors()) {
    if (t.name.find("exp_probs_b") != std::string::npos) return true;
  }
  return false;
}

// DeepSeek routing's keys, as llama.cpp's glm4moe and deepseek2 loaders read them: the gating
// function (absent: the architecture's default), the weights' scale (0 or absent: none) and
// renormalisation (absent: off), the shared experts (required), the leading dense layers, and
// the multi-token-prediction layers, which come off the layer count.
Status read_deepseek_routing_keys(const KeyReader& keys, const gguf::GgufFile& file, const ArchitectureTraits& traits,
                                  ModelConfig* c) {
  int64_t gating = 0;
  IWB_RETURN_IF_ERROR(count_key(keys, "expert_gating_func", 0, &gating));
  if (gating != 0 && gating != 1 && gating != 2) {  // llama.cpp's NONE, SOFTMAX, SIGMOID
    return make_error(ErrorCode::Unsupported, "'" + keys.key("expert_gating_func") + "' = " + std::to_string(gating) +
                                                  " is not supported (1: softmax and 2: sigmoid are)");
  }
  c->is_expert_gating_sigmoid = gating == 2 || (gating == 0 && traits.is_expert_gating_sigmoid_by_default);
  c->has_expert_selection_bias = !traits.is_selection_bias_optional || has_selection_bias_tensor(file);
  float scale = 0.0f;
  IWB_RETURN_IF_ERROR(keys.optional_float("expert_weights_scale", 0.0f, &scale));
  c->expert_weights_scale = scale != 0.0f ? scale : 1.0f;
  const gguf::Value* norm = file.find(keys.key("expert_weights_norm"));
  c->is_expert_weight_normalized = norm != nullptr && norm->as_bool().value_or(false);
  if (!file.find(keys.key("expert_shared_count"))) {
    return make_error(ErrorCode::NotFound, "the model has no '" + keys.key("expert_shared_count") + "' metadata key");
  }
  IWB_RETURN_IF_ERROR(count_key(keys, "expert_shared_count", 0, &c->num_shared_experts));
  IWB_RETURN_IF_ERROR(count_key(keys, "leading_dense_block_count", 0, &c->num_leading_dense_layers));
  IWB_RETURN_IF_ERROR(count_key(keys, "nextn_predict_layers", 0, &c->num_nextn_layers));
  if (c->num_nextn_layers >= c->num_layers) {
    return make_error(ErrorCode::CorruptFile, "'" + keys.key("nextn_predict_layers") + "' (" +
                                                  std::to_string(c->num_nextn_layers) +
                                                  ") leaves no trunk layers of '" + keys.key("block_count") + "' (" +
                                                  std::to_string(c->num_layers) + ")");
  }
  c->num_layers -= c->num_nextn_layers;
  c->is_sliding_layer.resize(static_cast<size_t>(c->num_layers));
  if (gating == 0 && !traits.is_expert_gating_sigmoid_by_default && (c->num_layers == 47 || c->num_layers == 48)) {
    // llama.cpp's deepseek2 loader: GLM-4.7-Flash files without the key route by sigmoid (it
    // tells them from DeepSeek V2 by their 47 or 48 layers and 154,880 tokens).
    const gguf::TensorInfo* embd = file.find_tensor("token_embd.weight");
    c->is_expert_gating_sigmoid = embd != nullptr && embd->shape.size() == 2 && embd->shape[1] == 154880;
  }
  if (c->num_leading_dense_layers > c->num_layers) {
    return make_error(ErrorCode::CorruptFile, "'" + keys.key("leading_dense_block_count") + "' exceeds the layers");
  }
  if (c->num_leading_dense_layers > 0 && c->feed_forward_length <= 0) {
    return make_error(ErrorCode::NotFound, "the model has no '" + keys.key("feed_forward_length") +
                                               "' metadata key for its leading dense layers");
  }
  // Optional per-head q/k norms: llama.cpp binds them where the file has them.
  if (traits.is_qk_norm_optional) c->has_qk_norm = file.find_tensor("blk.0.attn_q_norm.weight") != nullptr;
  return {};
}

// Group-limited routing's keys (llama.cpp applies them to any architecture whose file sets
// more than one group): equal groups of at least two experts (a group's score is the sum of its
// two best), and enough experts in the groups used for a token's k.
Status read_expert_group_keys(const KeyReader& keys, ModelConfig* c) {
  const int64_t groups = c->num_expert_groups;
  const std::string count_name = keys.key("expert_group_count");
  if (c->num_experts % groups != 0 || c->num_experts / groups < 2) {
    return make_error(ErrorCode::CorruptFile, "'" + count_name + "' (" + std::to_string(groups) + ") must split the " +
                                                  std::to_string(c->num_experts) +
                                                  " experts into equal groups of at least two");
  }
  IWB_RETURN_IF_ERROR(keys.positive_int("expert_group_used_count", &c->num_expert_groups_used));
  if (c->num_expert_groups_used > groups ||
      c->num_expert_groups_used * (c->num_experts / groups) < c->num_experts_used) {
    return make_error(ErrorCode::CorruptFile, "'" + keys.key("expert_group_used_count") + "' (" +
                                                  std::to_string(c->num_expert_groups_used) + ") of '" + count_name +
                                                  "' (" + std::to_string(groups) + ") leaves fewer than '" +
                                                  keys.key("expert_used_count") + "' experts to choose from");
  }
  return {};
}

// Multi-head latent attention's keys, as llama.cpp's deepseek2 loader reads them for files with
// attn_k_b / attn_v_b (key_length_mla and value_length_mla present); older files hold attn_kv_b
// instead and are refused. The file's attention.key_length / value_length / head_count_kv are
// the latent attention's (kv_lora_rank + RoPE values, kv_lora_rank, 1), as the converter writes.
// The attention scale is llama.cpp's: mscale^2 / sqrt(key_length_mla), mscale from YaRN's factor
// and the log multiplier.
Status read_latent_attention_keys(const KeyReader& keys, const gguf::GgufFile& file, ModelConfig* c) {
  if (!file.find(keys.key("attention.key_length_mla")) || !file.find(keys.key("attention.value_length_mla"))) {
    return make_error(ErrorCode::Unsupported,
                      "this " + c->architecture_name + " file has no '" + keys.key("attention.key_length_mla") +
                          "': it stores attn_kv_b, which llama.cpp's converter now splits into attn_k_b and "
                          "attn_v_b; convert the model again with a current convert_hf_to_gguf.py");
  }
  IWB_RETURN_IF_ERROR(keys.positive_int("attention.kv_lora_rank", &c->kv_lora_rank));
  if (file.find(keys.key("attention.q_lora_rank"))) {
    IWB_RETURN_IF_ERROR(keys.positive_int("attention.q_lora_rank", &c->q_lora_rank));
  }
  IWB_RETURN_IF_ERROR(keys.positive_int("attention.key_length_mla", &c->mla_head_dim_k));
  IWB_RETURN_IF_ERROR(keys.positive_int("attention.value_length_mla", &c->mla_head_dim_v));
  if (c->num_kv_heads != 1 || c->head_dim_k != c->kv_lora_rank + c->rope_num_rotated ||
      c->head_dim_v != c->kv_lora_rank || c->mla_head_dim_k <= c->rope_num_rotated) {
    return make_error(ErrorCode::CorruptFile,
                      "latent attention needs one KV head ('" + keys.key("attention.head_count_kv") +
                          "' = " + std::to_string(c->num_kv_heads) + "), '" + keys.key("attention.key_length") +
                          "' = kv_lora_rank + RoPE values (" + std::to_string(c->head_dim_k) + " vs " +
                          std::to_string(c->kv_lora_rank) + " + " + std::to_string(c->rope_num_rotated) + "), '" +
                          keys.key("attention.value_length") + "' = kv_lora_rank (" + std::to_string(c->head_dim_v) +
                          ") and '" + keys.key("attention.key_length_mla") + "' above the RoPE values");
  }
  c->attention_scale = latent_attention_scale(*c);
  return {};
}

// The routed experts of a mixture-of-experts row (llama.cpp's loader: expert_count and
// expert_used_count are required, the expert width defaults to feed_forward_length / k), and a
// clear refusal of expert keys on rows this engine runs dense (Mixtral is "llama" with experts).
Status read_expert_keys(const KeyReader& keys, const gguf::GgufFile& file, const ArchitectureTraits& traits,
                        ModelConfig* c) {
  // Gemma 4's rows run experts where the file has them (26B-A4B), a dense FFN otherwise (31B).
  const bool has_experts = traits.has_experts || (traits.is_gemma4 && file.find(keys.key("expert_count")) != nullptr);
  if (!has_experts) {
    const gguf::Value* v = file.find(keys.key("expert_count"));
    const std::optional<int64_t> n = v != nullptr ? v->as_int() : std::nullopt;
    if (n && *n > 0) {
      return make_error(
          ErrorCode::Unsupported,
          "this '" + std::string(traits.name) + "' model is a mixture of experts (" + keys.key("expert_count") + " = " +
              std::to_string(*n) +
              "), which this engine runs only for qwen3moe, gpt-oss, glm4moe, deepseek2, gemma4 and qwen35moe; its "
              "dense '" +
              traits.name +
              "' path would "
              "look for ffn_gate/ffn_up/ffn_down tensors the file does not have");
    }
    return {};
  }
  IWB_RETURN_IF_ERROR(keys.positive_int("expert_count", &c->num_experts));
  IWB_RETURN_IF_ERROR(keys.positive_int("expert_used_count", &c->num_experts_used));
  if (c->num_experts_used > c->num_experts) {
    return make_error(ErrorCode::CorruptFile,
                      "'" + keys.key("expert_used_count") + "' (" + std::to_string(c->num_experts_used) +
                          ") exceeds '" + keys.key("expert_count") + "' (" + std::to_string(c->num_experts) + ")");
  }
  IWB_RETURN_IF_ERROR(keys.optional_int("expert_feed_forward_length", c->feed_forward_length / c->num_experts_used,
                                        &c->expert_feed_forward_length));
  if (c->expert_feed_forward_length <= 0) {
    return make_error(ErrorCode::NotFound, "the model has no '" + keys.key("expert_feed_forward_length") +
                                               "' metadata key (nor a feed_forward_length to derive it from)");
  }
  // Group-limited routing (DeepSeek V3's n_group / topk_group: experts only from the best groups),
  // which llama.cpp applies to any architecture whose file sets more than one group; 1 is none
  // (what GLM-4.5's converter writes).
  IWB_RETURN_IF_ERROR(count_key(keys, "expert_group_count", 0, &c->num_expert_groups));
  if (c->num_expert_groups > 1) IWB_RETURN_IF_ERROR(read_expert_group_keys(keys, c));
  if (traits.has_deepseek_routing) IWB_RETURN_IF_ERROR(read_deepseek_routing_keys(keys, file, traits, c));
  if (traits.has_gated_shared_expert) {
    // llama.cpp's qwen35moe loader: the shared expert's width, else feed_forward_length.
    IWB_RETURN_IF_ERROR(keys.optional_int("expert_shared_feed_forward_length", c->feed_forward_length,
                                          &c->shared_expert_feed_forward_length));
    if (c->shared_expert_feed_forward_length <= 0) {
      return make_error(ErrorCode::NotFound, "the model has no '" + keys.key("expert_shared_feed_forward_length") +
                                                 "' metadata key (nor a feed_forward_length to take it from)");
    }
    c->num_shared_experts = 1;
    c->has_shared_expert_gate = true;
  }
  return {};
}

}  // namespace

ModelConfig mtp_head_config(const ModelConfig& config) {
  ModelConfig c = config;
  // One layer, numbered 0 in the head's own weights and KV cache (blk.<num_layers> in the file).
  c.num_layers = 1;
  c.num_nextn_layers = 0;
  c.num_leading_dense_layers = config.is_expert_layer(config.num_layers) ? 0 : 1;
  const size_t last = static_cast<size_t>(config.num_layers);
  c.is_sliding_layer.assign(1, last < config.is_sliding_layer.size() && config.is_sliding_layer[last]);
  if (config.has_recurrent_layers() && !config.is_recurrent(config.num_layers)) {
    // Qwen 3.5's block is a full-attention layer (llama.cpp: "MTP block looks like a
    // full-attention Qwen3.5 decoder block"): the head is a model without recurrent layers, and
    // can take back its guesses like any attention model.
    c.is_recurrent_layer.clear();
    c.layer_kv_heads.assign(1, config.num_kv_heads);
    c.linear_num_key_heads = c.linear_num_value_heads = 0;
  }
  return c;
}

namespace {
template <typename Width>
int64_t widest(const ModelConfig& c, Width width) {
  int64_t w = 0;
  for (int64_t il = 0; il < std::max<int64_t>(c.num_layers, 1); ++il) w = std::max(w, width(il));
  return w;
}
}  // namespace

int64_t ModelConfig::num_recurrent_layers() const {
  return std::count(is_recurrent_layer.begin(), is_recurrent_layer.end(), true);
}

int64_t ModelConfig::max_q_width() const {
  return widest(*this, [&](int64_t il) { return layer_q_width(il); });
}
int64_t ModelConfig::max_k_width() const {
  return widest(*this, [&](int64_t il) { return layer_k_width(il); });
}
int64_t ModelConfig::max_v_width() const {
  return widest(*this, [&](int64_t il) { return layer_v_width(il); });
}
int64_t ModelConfig::max_attention_output_width() const {
  return widest(*this, [&](int64_t il) { return layer_attention_output_width(il); });
}

float latent_attention_scale(const ModelConfig& c) {
  // attn_factor_org cancels the 1 / (1 + 0.1 ln f) llama.cpp put into RoPE's factor for YaRN.
  const float f = 1.0f / c.rope_freq_scale;
  const float attn_factor = c.rope_ext_factor != 0.0f ? c.rope_yarn_attn_factor : 1.0f;
  const float mscale =
      attn_factor * (1.0f + 0.1f * std::log(f)) * (1.0f + 0.1f * c.rope_yarn_log_multiplier * std::log(f));
  return mscale * mscale / std::sqrt(static_cast<float>(c.mla_head_dim_k));
}

void apply_architecture(const ArchitectureTraits& a, int64_t sliding_window, ModelConfig* c) {
  c->architecture = a.id;
  c->architecture_name = a.name;
  c->rope_layout = a.rope_layout;
  c->ffn_activation = a.ffn_activation;
  c->requires_qkv_bias = a.requires_qkv_bias;
  c->has_fused_gate_up = a.has_fused_gate_up;
  c->has_qk_norm = a.has_qk_norm;
  c->is_qk_norm_full_width = a.is_qk_norm_full_width;
  c->has_pre_norms = a.has_pre_norms;
  c->has_post_norms = a.has_post_norms;
  c->is_expert_weight_normalized = a.is_expert_weight_normalized;
  c->is_expert_softmax_over_top_k = a.is_expert_softmax_over_top_k;
  c->has_expert_biases = a.has_expert_biases;
  c->has_attention_sinks = a.has_attention_sinks;
  c->ffn_norm_name = a.ffn_norm_name;
  c->no_rope_layer_step = a.no_rope_layer_step;
  c->has_attention_output_gate = a.has_attention_output_gate;
  if (a.has_scaled_embedding) c->embedding_scale = std::sqrt(static_cast<float>(c->embedding_length));
  c->attention_scale = 1.0f / std::sqrt(static_cast<float>(c->head_dim_k));
  if (a.id == ModelArchitecture::Gemma3 || a.id == ModelArchitecture::Gemma2) {
    // gemma_pytorch scales queries by 1/sqrt(query_pre_attn_scalar): head_dim for every size
    // but 27B, whose scalar is n_embd / n_head (llama.cpp picks 27B by its layers: 62 in
    // gemma 3, 46 in gemma 2).
    const int64_t layers_of_27b = a.id == ModelArchitecture::Gemma3 ? 62 : 46;
    const int64_t scale_dim = c->num_layers == layers_of_27b ? c->embedding_length / c->num_heads : c->head_dim_k;
    c->attention_scale = 1.0f / std::sqrt(static_cast<float>(scale_dim));
  }
  if (a.is_gemma4) {
    c->attention_scale = 1.0f;  // llama.cpp's f_attention_scale for gemma4: the q norm scales
    c->has_value_norm = true;
    c->is_rope_freqs_global_only = true;
  }
  c->is_sliding_layer.assign(static_cast<size_t>(c->num_layers), false);
  c->sliding_window = a.sliding_period > 0 ? sliding_window : 0;
  if (c->sliding_window > 0 && a.is_sliding_rope_unscaled) {  // olmo2 (OLMo 3): factor 1, no YaRN
    c->is_sliding_rope_unscaled = true;
    c->rope_freq_scale_swa = 1.0f;
  }
  if (c->sliding_window > 0) {
    for (int64_t il = 0; il < c->num_layers; ++il) {
      c->is_sliding_layer[static_cast<size_t>(il)] = il % a.sliding_period < a.sliding_period - 1;
    }
  }
}

Result<ModelConfig> model_config_from_gguf(const gguf::GgufFile& file) {
  const std::optional<std::string> arch = file.get_string("general.architecture");
  if (!arch) return make_error(ErrorCode::NotFound, "the model has no 'general.architecture' metadata key");
  ModelConfig c;
  c.architecture_name = *arch;
  const ArchitectureTraits* traits = find_architecture(*arch);
  if (traits == nullptr) {
    std::string list;
    for (const std::string& name : supported_architectures()) list += (list.empty() ? "" : ", ") + name;
    return make_error(ErrorCode::Unsupported,
                      "architecture '" + *arch + "' is not supported by this engine (supported: " + list + ")");
  }

  const KeyReader keys(file, *arch);
  IWB_RETURN_IF_ERROR(keys.positive_int("context_length", &c.context_length_train));
  IWB_RETURN_IF_ERROR(keys.positive_int("embedding_length", &c.embedding_length));
  IWB_RETURN_IF_ERROR(keys.positive_int("block_count", &c.num_layers));
  // llama.cpp's limit (LLAMA_MAX_LAYERS); per-layer tables are sized by this count before any
  // tensor is looked at, so a corrupt count must not reach them.
  constexpr int64_t kMaxLayers = 512;
  if (c.num_layers > kMaxLayers) {
    return make_error(ErrorCode::CorruptFile, "'" + keys.key("block_count") + "' is " + std::to_string(c.num_layers) +
                                                  "; no model has more than " + std::to_string(kMaxLayers) + " layers");
  }
  // A mixture-of-experts FFN has no dense width of its own (llama.cpp reads it optionally).
  if (traits->has_experts) {
    IWB_RETURN_IF_ERROR(keys.optional_int("feed_forward_length", 0, &c.feed_forward_length));
  } else if (traits->is_gemma4 && file.find(keys.key("feed_forward_length")) != nullptr &&
             file.find(keys.key("feed_forward_length"))->as_array() != nullptr) {
    IWB_RETURN_IF_ERROR(gemma4::read_ffn_widths(file, &c));  // one width per layer (E2B)
  } else {
    IWB_RETURN_IF_ERROR(keys.positive_int("feed_forward_length", &c.feed_forward_length));
  }
  IWB_RETURN_IF_ERROR(keys.positive_int("attention.head_count", &c.num_heads));
  if (traits->is_gemma4) {
    IWB_RETURN_IF_ERROR(gemma4::read_kv_heads(file, &c));  // one count per layer
  } else {
    IWB_RETURN_IF_ERROR(keys.optional_int("attention.head_count_kv", c.num_heads, &c.num_kv_heads));
  }
  if (c.num_heads % c.num_kv_heads != 0) {
    return make_error(ErrorCode::CorruptFile, "the head count (" + std::to_string(c.num_heads) +
                                                  ") is not a multiple of the KV head count (" +
                                                  std::to_string(c.num_kv_heads) + ")");
  }
  if (!file.find(keys.key("attention.key_length")) && c.embedding_length % c.num_heads != 0) {
    return make_error(ErrorCode::CorruptFile, "the model width is not a multiple of the head count");
  }
  IWB_RETURN_IF_ERROR(keys.optional_int("attention.key_length", c.embedding_length / c.num_heads, &c.head_dim_k));
  IWB_RETURN_IF_ERROR(keys.optional_int("attention.value_length", c.embedding_length / c.num_heads, &c.head_dim_v));
  IWB_RETURN_IF_ERROR(keys.optional_int("rope.dimension_count", c.head_dim_k, &c.rope_num_rotated));
  if (c.rope_num_rotated % 2 != 0 || c.rope_num_rotated > c.head_dim_k) {
    return make_error(ErrorCode::CorruptFile,
                      "'" + keys.key("rope.dimension_count") + "' must be even and at most the head size");
  }
  if (!file.find(keys.key("attention.layer_norm_rms_epsilon"))) {
    return make_error(ErrorCode::NotFound,
                      "the model has no '" + keys.key("attention.layer_norm_rms_epsilon") + "' metadata key");
  }
  IWB_RETURN_IF_ERROR(keys.optional_float("attention.layer_norm_rms_epsilon", 1e-5f, &c.rms_norm_eps));
  IWB_RETURN_IF_ERROR(keys.optional_float("rope.freq_base", 10000.0f, &c.rope_freq_base));
  IWB_RETURN_IF_ERROR(read_rope_scaling(keys, file, *traits, &c));
  c.rope_freq_base_swa = c.rope_freq_base;
  c.rope_freq_scale_swa = c.rope_freq_scale;
  // Attention soft-capping (<arch>.attn_logit_softcapping) is read for gemma2 alone, as
  // llama.cpp reads it: other rows leave it off even when a file carries the key.
  IWB_RETURN_IF_ERROR(read_architecture_keys(keys, *traits, &c));
  if (c.rope_attn_factor != 1.0f) {
    if (c.rope_num_rotated != c.head_dim_k) {
      return make_error(ErrorCode::Unsupported, "'" + keys.key("rope.scaling.attn_factor") +
                                                    "' with RoPE on part of each head is not supported");
    }
    c.attention_scale *= c.rope_attn_factor * c.rope_attn_factor;
  }
  IWB_RETURN_IF_ERROR(read_expert_keys(keys, file, *traits, &c));
  if (traits->is_gemma4) IWB_RETURN_IF_ERROR(gemma4::read_keys(file, &c));
  if (traits->has_recurrent_layers) IWB_RETURN_IF_ERROR(qwen35::read_keys(file, &c));
  if (traits->has_latent_attention) IWB_RETURN_IF_ERROR(read_latent_attention_keys(keys, file, &c));

  const gguf::TensorInfo* embd = file.find_tensor("token_embd.weight");
  if (!embd) return make_error(ErrorCode::NotFound, "the model has no tensor 'token_embd.weight'");
  if (embd->shape.size() != 2 || embd->shape[0] != c.embedding_length || embd->shape[1] <= 0) {
    return make_error(ErrorCode::CorruptFile, "tensor 'token_embd.weight' has shape " + embd->shape_string() +
                                                  ", expected " + std::to_string(c.embedding_length) +
                                                  " x vocabulary size");
  }
  c.vocab_size = embd->shape[1];
  return c;
}

}  // namespace iwb
