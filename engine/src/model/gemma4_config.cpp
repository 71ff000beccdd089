// Gemma 4's configuration as llama.cpp's gemma4 loader reads it (src/models/gemma4.cpp,
// load_arch_hparams): per-layer KV heads, the sliding layers' own head size and RoPE width,
// attention scale 1 (the q norm does the scaling), the optional final soft-cap.
#include "model/gemma4_config.h"

#include <algorithm>
#include <cmath>
#include <string>

namespace iwb::gemma4 {
namespace {

std::string key(const ModelConfig& c, const char* suffix) { return c.architecture_name + "." + suffix; }

// An optional non-negative integer key; `fallback` when absent.
Status optional_count(const gguf::GgufFile& file, const std::string& k, int64_t fallback, int64_t* out) {
  const gguf::Value* v = file.find(k);
  if (v == nullptr) {
    *out = fallback;
    return {};
  }
  const std::optional<int64_t> i = v->as_int();
  if (!i || *i < 0) return make_error(ErrorCode::CorruptFile, "'" + k + "' must be a count");
  *out = *i;
  return {};
}

Status check_head_size(const std::string& k, int64_t value) {
  if (value <= 0 || value % 2 != 0) return make_error(ErrorCode::CorruptFile, "'" + k + "' must be positive and even");
  return {};
}

}  // namespace

Status read_ffn_widths(const gguf::GgufFile& file, ModelConfig* c) {
  const std::string k = key(*c, "feed_forward_length");
  const gguf::Value* v = file.find(k);
  const gguf::Array* a = v != nullptr ? v->as_array() : nullptr;
  c->layer_ff.clear();
  if (a == nullptr) return {};  // one width: model_config.cpp reads it
  if (static_cast<int64_t>(a->items.size()) != c->num_layers) {
    return make_error(ErrorCode::CorruptFile, "'" + k + "' has " + std::to_string(a->items.size()) + " entries for " +
                                                  std::to_string(c->num_layers) + " layers");
  }
  for (const gguf::Value& item : a->items) {
    const int64_t n = item.as_int().value_or(0);
    if (n <= 0) return make_error(ErrorCode::CorruptFile, "'" + k + "' must hold positive widths");
    c->layer_ff.push_back(n);
  }
  c->feed_forward_length = *std::max_element(c->layer_ff.begin(), c->layer_ff.end());
  return {};
}

Status read_kv_heads(const gguf::GgufFile& file, ModelConfig* c) {
  const std::string k = key(*c, "attention.head_count_kv");
  const gguf::Value* v = file.find(k);
  c->layer_kv_heads.clear();
  if (v == nullptr) {
    c->num_kv_heads = c->num_heads;
    return {};
  }
  std::vector<int64_t> counts;
  if (const gguf::Array* a = v->as_array()) {
    if (static_cast<int64_t>(a->items.size()) != c->num_layers) {
      return make_error(ErrorCode::CorruptFile, "'" + k + "' has " + std::to_string(a->items.size()) + " entries for " +
                                                    std::to_string(c->num_layers) + " layers");
    }
    for (const gguf::Value& item : a->items) counts.push_back(item.as_int().value_or(0));
  } else {
    counts.assign(static_cast<size_t>(c->num_layers), v->as_int().value_or(0));
  }
  for (const int64_t n : counts) {
    if (n <= 0 || c->num_heads % n != 0) {
      return make_error(ErrorCode::CorruptFile, "'" + k + "' holds " + std::to_string(n) +
                                                    ", which does not divide the head count (" +
                                                    std::to_string(c->num_heads) + ")");
    }
  }
  c->num_kv_heads = counts.front();
  if (std::any_of(counts.begin(), counts.end(), [&](int64_t n) { return n != counts.front(); })) {
    c->layer_kv_heads = std::move(counts);
  }
  return {};
}

Status read_keys(const gguf::GgufFile& file, ModelConfig* c) {
  // E2B / E4B: shared KV layers and per-layer embeddings (checked once the sliding layers are known).
  IWB_RETURN_IF_ERROR(optional_count(file, key(*c, "attention.shared_kv_layers"), 0, &c->num_kv_shared_layers));
  IWB_RETURN_IF_ERROR(
      optional_count(file, key(*c, "embedding_length_per_layer_input"), 0, &c->per_layer_embedding_length));
  if (c->num_kv_shared_layers > 0) {
    const int64_t first_shared = c->num_layers - c->num_kv_shared_layers;
    // llama.cpp's rule: the shared layers read the last two layers before them, the one before
    // a global layer and the one before that a sliding layer.
    if (first_shared < 2 || c->is_sliding(first_shared - 1) || !c->is_sliding(first_shared - 2)) {
      return make_error(ErrorCode::CorruptFile,
                        "'" + key(*c, "attention.shared_kv_layers") + "' = " + std::to_string(c->num_kv_shared_layers) +
                            " needs a global layer just before the shared ones and a sliding layer before that");
    }
  }
  // The sliding layers' head size and RoPE width (llama.cpp requires the head sizes).
  const int64_t global_k = c->head_dim_k, global_v = c->head_dim_v;
  IWB_RETURN_IF_ERROR(optional_count(file, key(*c, "attention.key_length_swa"), global_k, &c->head_dim_k_swa));
  IWB_RETURN_IF_ERROR(optional_count(file, key(*c, "attention.value_length_swa"), global_v, &c->head_dim_v_swa));
  IWB_RETURN_IF_ERROR(check_head_size(key(*c, "attention.key_length_swa"), c->head_dim_k_swa));
  IWB_RETURN_IF_ERROR(check_head_size(key(*c, "attention.value_length_swa"), c->head_dim_v_swa));
  IWB_RETURN_IF_ERROR(
      optional_count(file, key(*c, "rope.dimension_count_swa"), c->head_dim_k_swa, &c->rope_num_rotated_swa));
  if (c->rope_num_rotated_swa % 2 != 0 || c->rope_num_rotated_swa > c->head_dim_k_swa) {
    return make_error(ErrorCode::CorruptFile, "'" + key(*c, "rope.dimension_count_swa") +
                                                  "' must be even and at most the sliding layers' head size");
  }
  if (c->head_dim_k != c->head_dim_v || c->head_dim_k_swa != c->head_dim_v_swa) {
    return make_error(ErrorCode::CorruptFile, "Gemma 4 needs equal key and value head sizes ('" +
                                                  key(*c, "attention.key_length") + "', '" +
                                                  key(*c, "attention.value_length") + "' and their _swa keys)");
  }
  // Equal to the globals: the layers' shapes are the globals'.
  if (c->head_dim_k_swa == global_k) c->head_dim_k_swa = 0;
  if (c->head_dim_v_swa == global_v) c->head_dim_v_swa = 0;
  if (c->rope_num_rotated_swa == c->rope_num_rotated && c->head_dim_k_swa == 0) c->rope_num_rotated_swa = 0;
  // llama.cpp's default cap (30) holds without the key; 0 turns it off.
  c->final_logit_softcap = 30.0f;
  const gguf::Value* cap = file.find(key(*c, "final_logit_softcapping"));
  if (cap != nullptr) {
    const std::optional<double> f = cap->as_float();
    if (!f || !std::isfinite(*f) || *f < 0.0) {
      return make_error(ErrorCode::CorruptFile, "'" + key(*c, "final_logit_softcapping") + "' must be >= 0");
    }
    c->final_logit_softcap = static_cast<float>(*f);
  }
  c->has_parallel_dense_ffn = c->num_experts > 0;
  // num_kv_heads (as head_dim_k) names the global layers' shape; layer_kv_heads keeps every layer's.
  for (int64_t il = 0; il < c->num_layers && !c->layer_kv_heads.empty(); ++il) {
    if (!c->is_sliding(il)) {
      c->num_kv_heads = c->layer_kv_heads[static_cast<size_t>(il)];
      break;
    }
  }
  return {};
}

}  // namespace iwb::gemma4
