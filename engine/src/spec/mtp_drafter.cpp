// make_mtp_drafter: the target's multi-token-prediction head as a ModelDrafter (its one layer
// bound from the target's file, sharing the embedding table and classifier where the file has no
// copies of its own).
#include "model/model_weights.h"
#include "spec/model_drafter.h"

namespace iwb::spec {

Result<std::unique_ptr<Drafter>> make_mtp_drafter(const gguf::GgufFile& target_file, const ModelConfig& config,
                                                  const ModelWeights& weights, const DraftPlacement& placement) {
  if (config.num_nextn_layers <= 0) {
    return make_error(ErrorCode::Unsupported, "this " + config.architecture_name +
                                                  " model has no multi-token-prediction layers "
                                                  "(nextn_predict_layers); use another drafter");
  }
  auto model = std::make_unique<DraftModel>();
  model->config = mtp_head_config(config);
  model->is_mtp_head = true;
  Result<ModelWeights> head = bind_mtp_weights(target_file, config, weights);
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
