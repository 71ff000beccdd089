// PagedEngine's choice of drafter (a draft model or the requantized target, on the target's
// device; or prompt lookup). Drafting and verification are SpeculationControl's.
#include "runtime/paged_engine.h"

namespace iwb {

Status PagedEngine::set_speculation(const spec::SpeculativeConfig& config) {
  IWB_RETURN_IF_ERROR(spec::validate(config));
  std::unique_ptr<spec::Drafter> drafter;
  // The drafter runs where the target runs, with a cache as large as the target's.
  spec::DraftPlacement placement;
  placement.device = m_backend->device_id();
  placement.num_threads = num_threads();
  placement.num_kv_positions = m_kv.num_slots();
  placement.kv_block_size = m_kv.block_size;
  switch (config.kind) {
    case spec::DrafterKind::None: break;
    case spec::DrafterKind::PromptLookup:
      drafter = spec::make_prompt_lookup_drafter(config.lookup_max_ngram, config.lookup_min_ngram);
      break;
    case spec::DrafterKind::DraftModel: {
      Result<std::unique_ptr<spec::Drafter>> d =
          spec::open_draft_model(config.draft_model_path, m_tokenizer, placement);
      if (!d) return d.status();
      drafter = std::move(*d);
      break;
    }
    case spec::DrafterKind::SelfDraft: {
      Result<std::unique_ptr<spec::Drafter>> d =
          spec::make_self_drafter(*m_file, m_config, m_weights, config.self_draft_type, placement);
      if (!d) return d.status();
      drafter = std::move(*d);
      break;
    }
  }
  return set_drafter(std::move(drafter), config);
}

Status PagedEngine::set_drafter(std::unique_ptr<spec::Drafter> drafter, const spec::SpeculativeConfig& config) {
  return m_speculation.set(std::move(drafter), config, m_requests);
}

}  // namespace iwb
