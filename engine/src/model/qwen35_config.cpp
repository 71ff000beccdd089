// Qwen 3.5's configuration as llama.cpp's qwen35 loader reads it (src/models/qwen35.cpp,
// load_arch_hparams): the gated delta net's sizes and which layers are recurrent.
#include "model/qwen35_config.h"

#include <algorithm>
#include <string>

namespace iwb::qwen35 {
namespace {

std::string key(const ModelConfig& c, const char* suffix) { return c.architecture_name + "." + suffix; }

Status positive(const gguf::GgufFile& file, const std::string& k, int64_t* out) {
  const gguf::Value* v = file.find(k);
  if (v == nullptr) return make_error(ErrorCode::NotFound, "the model has no '" + k + "' metadata key");
  const std::optional<int64_t> i = v->as_int();
  if (!i || *i <= 0) return make_error(ErrorCode::CorruptFile, "'" + k + "' must be a positive integer");
  *out = *i;
  return {};
}

// attention.recurrent_layers: one flag per stored block (the MTP layers' included), or the
// full-attention interval.
Status read_recurrent_layers(const gguf::GgufFile& file, int64_t num_blocks, ModelConfig* c) {
  c->is_recurrent_layer.assign(static_cast<size_t>(c->num_layers), false);
  const std::string k = key(*c, "attention.recurrent_layers");
  if (const gguf::Value* v = file.find(k)) {
    const gguf::Array* a = v->as_array();
    if (a == nullptr || static_cast<int64_t>(a->items.size()) != num_blocks) {
      return make_error(ErrorCode::CorruptFile,
                        "'" + k + "' must hold one flag per block (" + std::to_string(num_blocks) + ")");
    }
    for (int64_t il = 0; il < c->num_layers; ++il) {
      const gguf::Value& item = a->items[static_cast<size_t>(il)];
      const std::optional<bool> flag = item.as_bool();
      const std::optional<int64_t> number = item.as_int();
      if (!flag && !number) return make_error(ErrorCode::CorruptFile, "'" + k + "' must hold flags");
      c->is_recurrent_layer[static_cast<size_t>(il)] = flag ? *flag : *number != 0;
    }
    return {};
  }
  int64_t interval = 4;  // llama.cpp's default
  if (file.find(key(*c, "full_attention_interval")) != nullptr) {
    IWB_RETURN_IF_ERROR(positive(file, key(*c, "full_attention_interval"), &interval));
  }
  for (int64_t il = 0; il < c->num_layers; ++il)
    c->is_recurrent_layer[static_cast<size_t>(il)] = (il + 1) % interval != 0;
  return {};
}

// rope.dimension_sections (interleaved M-RoPE): for text every position component is the
// token's position but the fourth, which is 0. A rotated pair whose sector falls to the fourth
// component stays unrotated in llama.cpp; with sections that leave none there (Qwen 3.5's
// [11, 11, 10, 0] over 64 rotated values) the rotation is plain NeoX RoPE, which the engine runs.
Status check_rope_sections(const gguf::GgufFile& file, ModelConfig* c) {
  const std::string k = key(*c, "rope.dimension_sections");
  const gguf::Value* v = file.find(k);
  if (v == nullptr) return {};  // plain NeoX
  const gguf::Array* a = v->as_array();
  if (a == nullptr || a->items.size() < 3)
    return make_error(ErrorCode::CorruptFile, "'" + k + "' must hold 4 sections");
  int64_t sections[4] = {0, 0, 0, 0};
  for (size_t i = 0; i < std::min<size_t>(4, a->items.size()); ++i) {
    const std::optional<int64_t> n = a->items[i].as_int();
    if (!n || *n < 0) return make_error(ErrorCode::CorruptFile, "'" + k + "' must hold counts");
    sections[i] = *n;
  }
  const int64_t total = sections[0] + sections[1] + sections[2] + sections[3];
  if (total <= 0) return make_error(ErrorCode::CorruptFile, "'" + k + "' must not be all zero");
  for (int64_t pair = 0; pair < c->rope_num_rotated / 2; ++pair) {
    const int64_t sector = pair % total;
    const bool is_text_position = (sector % 3 == 0 && sector < 3 * sections[0]) ||
                                  (sector % 3 == 1 && sector < 3 * sections[1]) ||
                                  (sector % 3 == 2 && sector < 3 * sections[2]);
    if (!is_text_position) {
      return make_error(ErrorCode::Unsupported,
                        "'" + k + "' leaves rotated pair " + std::to_string(pair) +
                            " to the fourth position component, which this engine does not run (it runs "
                            "M-RoPE sections whose every rotated pair takes the text position)");
    }
  }
  return {};
}

}  // namespace

Status read_keys(const gguf::GgufFile& file, ModelConfig* c) {
  IWB_RETURN_IF_ERROR(positive(file, key(*c, "ssm.conv_kernel"), &c->linear_conv_kernel));
  IWB_RETURN_IF_ERROR(positive(file, key(*c, "ssm.group_count"), &c->linear_num_key_heads));
  IWB_RETURN_IF_ERROR(positive(file, key(*c, "ssm.time_step_rank"), &c->linear_num_value_heads));
  IWB_RETURN_IF_ERROR(positive(file, key(*c, "ssm.state_size"), &c->linear_head_dim));
  int64_t inner = 0;
  IWB_RETURN_IF_ERROR(positive(file, key(*c, "ssm.inner_size"), &inner));
  if (c->linear_num_value_heads % c->linear_num_key_heads != 0) {
    return make_error(ErrorCode::CorruptFile, "'" + key(*c, "ssm.time_step_rank") + "' (value heads, " +
                                                  std::to_string(c->linear_num_value_heads) +
                                                  ") is not a multiple of '" + key(*c, "ssm.group_count") +
                                                  "' (key heads, " + std::to_string(c->linear_num_key_heads) + ")");
  }
  // llama.cpp sizes the value heads by state_size and runs them as inner_size / time_step_rank.
  if (inner != c->linear_value_width()) {
    return make_error(ErrorCode::CorruptFile,
                      "'" + key(*c, "ssm.inner_size") + "' is " + std::to_string(inner) +
                          ", expected time_step_rank x state_size = " + std::to_string(c->linear_value_width()));
  }

  const int64_t num_blocks = c->num_layers;
  const gguf::Value* nextn = file.find(key(*c, "nextn_predict_layers"));
  if (nextn != nullptr) {
    const std::optional<int64_t> n = nextn->as_int();
    if (!n || *n < 0 || *n >= c->num_layers) {
      return make_error(ErrorCode::CorruptFile, "'" + key(*c, "nextn_predict_layers") + "' must be fewer than the " +
                                                    std::to_string(c->num_layers) + " blocks");
    }
    // The multi-token-prediction blocks follow the trunk; the forward pass does not run them.
    c->num_nextn_layers = *n;
    c->num_layers -= *n;
  }
  IWB_RETURN_IF_ERROR(read_recurrent_layers(file, num_blocks, c));
  IWB_RETURN_IF_ERROR(check_rope_sections(file, c));
  c->layer_kv_heads.assign(static_cast<size_t>(c->num_layers), c->num_kv_heads);
  for (int64_t il = 0; il < c->num_layers; ++il) {
    if (c->is_recurrent(il)) c->layer_kv_heads[static_cast<size_t>(il)] = 0;
  }
  if (c->num_recurrent_layers() == c->num_layers) {
    const std::string why = file.find(key(*c, "attention.recurrent_layers")) != nullptr
                                ? "'" + key(*c, "attention.recurrent_layers") + "' marks"
                                : "'" + key(*c, "full_attention_interval") + "' makes";
    return make_error(ErrorCode::Unsupported, why +
                                                  " every layer of this model recurrent; this engine runs Qwen 3.5 "
                                                  "with attention layers between the recurrent ones");
  }
  return {};
}

}  // namespace iwb::qwen35
