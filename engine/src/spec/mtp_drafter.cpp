// make_mtp_drafter: the target's multi-token-prediction head as a ModelDrafter, its one layer
// bound from the target's file (sharing the embedding table and classifier where the file has no
// copies of its own), or from the head's own mtp- file.
#include "model/model_weights.h"
#include "spec/model_drafter.h"

namespace iwb::spec {
namespace {

// The mtp- file's keys must describe the target's model (its trunk included: the head reads the
// trunk's hidden states and comes after its last layer).
Status check_head_file(const ModelConfig& target, const ModelConfig& head, const std::string& path) {
  auto differs = [&](const char* what, int64_t a, int64_t b) {
    return make_error(ErrorCode::InvalidArgument, "'" + path + "' is not this model's MTP head: its " + what + " is " +
                                                      std::to_string(b) + ", the model's " + std::to_string(a));
  };
  if (head.architecture_name != target.architecture_name) {
    return make_error(ErrorCode::InvalidArgument, "'" + path + "' is a " + head.architecture_name +
                                                      " file; the model is " + target.architecture_name);
  }
  if (head.embedding_length != target.embedding_length) {
    return differs("embedding length", target.embedding_length, head.embedding_length);
  }
  if (head.vocab_size != target.vocab_size) return differs("vocabulary", target.vocab_size, head.vocab_size);
  if (head.num_layers != target.num_layers) return differs("trunk's layer count", target.num_layers, head.num_layers);
  return {};
}

}  // namespace

Result<std::unique_ptr<Drafter>> make_mtp_drafter(const gguf::GgufFile& target_file, const ModelConfig& config,
                                                  const ModelWeights& weights, const DraftPlacement& placement,
                                                  const std::string& head_path) {
  auto model = std::make_unique<DraftModel>();
  const gguf::GgufFile* file = &target_file;
  ModelConfig file_config = config;
  if (!head_path.empty()) {
    Result<std::unique_ptr<gguf::GgufFile>> opened = gguf::GgufFile::open(head_path);
    if (!opened) return make_error(opened.status().code(), "'" + head_path + "': " + opened.error_message());
    Result<ModelConfig> head_config = model_config_from_gguf(**opened);
    if (!head_config)
      return make_error(head_config.status().code(), "'" + head_path + "': " + head_config.error_message());
    IWB_RETURN_IF_ERROR(check_head_file(config, *head_config, head_path));
    // The model's config, which read its trunk's tensors too (whether its layers norm q and k:
    // the head's file has no blk.0), with the head file's count of heads.
    file_config.num_nextn_layers = head_config->num_nextn_layers;
    model->file = std::move(*opened);
    file = model->file.get();
  }
  if (file_config.num_nextn_layers <= 0) {
    return make_error(
        ErrorCode::Unsupported,
        (head_path.empty() ? "this " + config.architecture_name + " model has" : "'" + head_path + "' has") +
            " no multi-token-prediction layers (nextn_predict_layers); use another drafter" +
            (head_path.empty() ? ", or give the head's own mtp- file with -md" : ""));
  }
  model->config = mtp_head_config(file_config);
  model->is_mtp_head = true;
  Result<ModelWeights> head = bind_mtp_weights(*file, file_config, weights, !head_path.empty());
  if (!head) {
    return make_error(head.status().code(),
                      "the model's multi-token-prediction layer cannot be read: " + head.error_message());
  }
  model->weights = std::move(*head);
  const std::string name = "MTP head (layer " + std::to_string(config.num_layers) + ")";
  Result<std::unique_ptr<ModelDrafter>> d = ModelDrafter::create(std::move(model), name, placement);
  if (!d) return d.status();
  return std::unique_ptr<Drafter>(std::move(*d));
}

}  // namespace iwb::spec
