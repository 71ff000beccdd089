// Speculation values: settings to the engine's config, meta-type registration.
#include "worker/spec_values.h"

#include "iwb/kernels/ggml_type.h"

namespace iwb::ui {

iwb::Result<iwb::spec::SpeculativeConfig> SpeculationSettings::toConfig() const {
  iwb::spec::SpeculativeConfig c;
  iwb::Result<iwb::spec::DrafterKind> k = iwb::spec::parse_drafter_kind(kind.isEmpty() ? "none" : kind.toStdString());
  if (!k) return k.status();
  c.kind = *k;
  // A path only where the drafter reads one (a draft model; an MTP head's own file).
  if (c.kind == iwb::spec::DrafterKind::DraftModel || c.kind == iwb::spec::DrafterKind::Mtp) {
    c.draft_model_path = draftModelPath.toStdString();
  }
  c.num_draft_tokens = numDraftTokens;
  c.is_adaptive = isAdaptive;
  c.draft_min_probability = static_cast<float>(minProbability);
  const std::optional<iwb::GgmlType> type = iwb::ggml_type_from_name(selfDraftType.toStdString());
  if (!type) {
    return iwb::make_error(iwb::ErrorCode::InvalidArgument,
                           "unknown tensor type '" + selfDraftType.toStdString() + "'");
  }
  c.self_draft_type = *type;
  IWB_RETURN_IF_ERROR(iwb::spec::validate(c));
  return c;
}

void registerSpeculationMetaTypes() {
  qRegisterMetaType<iwb::ui::SpeculationSettings>();
  qRegisterMetaType<iwb::ui::SpeculationStep>();
  qRegisterMetaType<iwb::ui::SpeculationReport>();
}

}  // namespace iwb::ui
