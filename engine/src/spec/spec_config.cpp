// Speculative decoding settings: names and validation.
#include "iwb/engine/spec/spec_config.h"

#include "iwb/kernels/quantize.h"

namespace iwb::spec {

const char* drafter_kind_name(DrafterKind kind) {
  switch (kind) {
    case DrafterKind::None: return "none";
    case DrafterKind::DraftModel: return "draft";
    case DrafterKind::PromptLookup: return "lookup";
    case DrafterKind::SelfDraft: return "self";
    case DrafterKind::Mtp: return "mtp";
  }
  return "?";
}

Result<DrafterKind> parse_drafter_kind(std::string_view name) {
  if (name == "none" || name == "off") return DrafterKind::None;
  if (name == "draft" || name == "draft-model" || name == "draft-simple") return DrafterKind::DraftModel;
  if (name == "lookup" || name == "prompt-lookup" || name == "ngram" || name == "ngram-simple") {
    return DrafterKind::PromptLookup;
  }
  if (name == "self" || name == "self-draft") return DrafterKind::SelfDraft;
  if (name == "mtp" || name == "draft-mtp") return DrafterKind::Mtp;
  return make_error(ErrorCode::InvalidArgument,
                    "unknown drafter '" + std::string(name) + "': use draft, lookup, self, mtp or none");
}

Status validate(const SpeculativeConfig& c) {
  if (!c.is_enabled()) return {};
  if (c.num_draft_tokens < 1 || c.num_draft_tokens > kMaxDraftTokens) {
    return make_error(ErrorCode::InvalidArgument, "the number of draft tokens must be 1 to " +
                                                      std::to_string(kMaxDraftTokens) + ", not " +
                                                      std::to_string(c.num_draft_tokens));
  }
  if (!(c.draft_min_probability >= 0.0f && c.draft_min_probability <= 1.0f)) {
    return make_error(ErrorCode::InvalidArgument,
                      "the drafts' minimum probability must be 0 to 1, not " + std::to_string(c.draft_min_probability));
  }
  if (c.kind == DrafterKind::DraftModel && c.draft_model_path.empty()) {
    return make_error(ErrorCode::InvalidArgument, "draft-model speculation needs a draft model file");
  }
  if (c.kind == DrafterKind::PromptLookup &&
      (c.lookup_min_ngram < 1 || c.lookup_max_ngram < c.lookup_min_ngram || c.lookup_max_ngram > 64)) {
    return make_error(ErrorCode::InvalidArgument, "prompt lookup n-grams must satisfy 1 <= min <= max <= 64, not " +
                                                      std::to_string(c.lookup_min_ngram) + ".." +
                                                      std::to_string(c.lookup_max_ngram));
  }
  if (c.kind == DrafterKind::SelfDraft &&
      (!can_quantize_row_ref(c.self_draft_type) || c.self_draft_type == GgmlType::Q8_1 ||
       c.self_draft_type == GgmlType::Q8_K)) {
    return make_error(ErrorCode::InvalidArgument,
                      "self-drafting cannot requantize to " + std::string(ggml_type_name(c.self_draft_type)));
  }
  return {};
}

}  // namespace iwb::spec
