// Building the model drafters: a draft model opened from its own GGUF (vocabulary checked
// against the target's), or the target's weights requantized to fewer bits in memory.
#include "iwb/engine/model/model_info.h"
#include "iwb/engine/tokenizer/tokenizer.h"
#include "spec/model_drafter.h"

#include "iwb/kernels/dequantize_fast.h"
#include "iwb/kernels/quantize.h"

#include <omp.h>

#include <algorithm>

namespace iwb::spec {
namespace {

// One matrix requantized row by row (dequantize to f32, quantize to `type`), in parallel.
// A matrix whose rows do not divide into the type's blocks, or already of that type, stays.
Status requantize(WeightMatrix* w, GgmlType type, const char* name, int num_threads, DraftModel* model) {
  if (w->data == nullptr || w->type == type || w->in_features % ggml_type_traits(type).block_size != 0) return {};
  const std::optional<size_t> src_row = ggml_row_bytes(w->type, w->in_features);
  const std::optional<size_t> dst_row = ggml_row_bytes(type, w->in_features);
  if (!src_row || !dst_row) return make_error(ErrorCode::Unsupported, std::string("cannot requantize ") + name);
  std::vector<uint8_t>& out = model->buffers.emplace_back(*dst_row * static_cast<size_t>(w->out_features));
  const auto* src = static_cast<const uint8_t*>(w->data);
  bool is_ok = true;
#pragma omp parallel num_threads(num_threads) reduction(&& : is_ok)
  {
    std::vector<float> row(static_cast<size_t>(w->in_features));
#pragma omp for schedule(static)
    for (int64_t r = 0; r < w->out_features; ++r) {
      const bool ok =
          dequantize_row(w->type, src + static_cast<size_t>(r) * *src_row, row.data(), w->in_features) &&
          quantize_row_ref(type, row.data(), out.data() + static_cast<size_t>(r) * *dst_row, w->in_features);
      is_ok = is_ok && ok;
    }
  }
  if (!is_ok) {
    return make_error(ErrorCode::InvalidArgument, std::string("requantizing ") + name + " to " +
                                                      std::string(ggml_type_name(type)) + " failed (a value has no " +
                                                      "quantized form)");
  }
  w->type = type;
  w->data = out.data();
  w->num_bytes = out.size();
  model->owned_bytes += out.size();
  return {};
}

}  // namespace

Result<std::unique_ptr<Drafter>> open_draft_model(const std::string& path, const tokenizer::Tokenizer& target,
                                                  const DraftPlacement& placement) {
  Result<std::unique_ptr<gguf::GgufFile>> file = gguf::GgufFile::open(path);
  if (!file) return file.status();
  Result<ModelSummary> summary = summarize_model(**file);
  if (!summary) return summary.status();
  if (summary->is_vocab_only) {
    return make_error(ErrorCode::Unsupported, "'" + path + "' holds only a tokenizer and cannot draft");
  }
  Result<tokenizer::Tokenizer> tok = tokenizer::Tokenizer::from_gguf(**file);
  if (!tok) return tok.status();
  if (Status s = check_vocabulary_match(target, *tok); !s) {
    return make_error(ErrorCode::InvalidArgument, "'" + path + "' cannot draft for this model: " + s.message());
  }
  auto model = std::make_unique<DraftModel>();
  Result<ModelConfig> config = model_config_from_gguf(**file);
  if (!config) return config.status();
  // A drafter's guesses past the target's choice are taken back, which a recurrent state cannot be.
  if (config->has_recurrent_layers()) {
    return make_error(ErrorCode::Unsupported, "'" + path + "' cannot draft: its recurrent layers (" +
                                                  config->architecture_name +
                                                  ") cannot take back the guesses the target rejects");
  }
  model->config = std::move(*config);
  model->file = std::move(*file);
  Result<ModelWeights> weights = bind_model_weights(*model->file, model->config);
  if (!weights) return weights.status();
  model->weights = std::move(*weights);
  Result<std::unique_ptr<ModelDrafter>> d =
      ModelDrafter::create(std::move(model), "draft model " + summary->name, placement);
  if (!d) return d.status();
  return std::unique_ptr<Drafter>(std::move(*d));
}

Result<std::unique_ptr<Drafter>> make_self_drafter(const gguf::GgufFile& target_file, const ModelConfig& config,
                                                   const ModelWeights& weights, GgmlType type,
                                                   const DraftPlacement& placement) {
  (void)target_file;  // the unchanged matrices point into its mapping, which must outlive the drafter
  if (!can_quantize_row_ref(type)) {
    return make_error(ErrorCode::InvalidArgument,
                      "self-drafting cannot requantize to " + std::string(ggml_type_name(type)));
  }
  auto model = std::make_unique<DraftModel>();
  model->config = config;
  model->weights = weights;
  ModelWeights& w = model->weights;
  const int threads = std::max(1, placement.num_threads);
  for (size_t il = 0; il < w.layers.size(); ++il) {
    LayerWeights& l = w.layers[il];
    const std::pair<WeightMatrix*, const char*> matrices[] = {
        {&l.wq, "attn_q"},         {&l.wk, "attn_k"},     {&l.wv, "attn_v"},        {&l.wo, "attn_output"},
        {&l.ffn_gate, "ffn_gate"}, {&l.ffn_up, "ffn_up"}, {&l.ffn_down, "ffn_down"}};
    for (const auto& [m, name] : matrices) IWB_RETURN_IF_ERROR(requantize(m, type, name, threads, model.get()));
  }
  // The classifier (a separate copy when it is tied to the embedding, which stays as it is for
  // the lookup).
  IWB_RETURN_IF_ERROR(requantize(&w.output, type, "output", threads, model.get()));
  if (w.output.data != w.token_embd.data) w.is_output_tied = false;
  Result<std::unique_ptr<ModelDrafter>> d =
      ModelDrafter::create(std::move(model), "self-draft " + std::string(ggml_type_name(type)), placement);
  if (!d) return d.status();
  return std::unique_ptr<Drafter>(std::move(*d));
}

}  // namespace iwb::spec
