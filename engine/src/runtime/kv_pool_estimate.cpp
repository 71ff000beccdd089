// estimate_kv_pool: PagedEngine's pool sizing (paged_engine.cpp) without loading the model.
#include "iwb/engine/runtime/kv_pool_estimate.h"

#include "iwb/engine/paged/paged_kv_storage.h"
#include "runtime/kv_budget.h"

#include <algorithm>

namespace iwb {

Result<KvPoolEstimate> estimate_kv_pool(const ModelSummary& model, const EngineOptions& options,
                                        uint64_t available_bytes, bool is_device) {
  if (model.is_vocab_only) return make_error(ErrorCode::InvalidArgument, "a vocabulary-only model has no KV cache");
  const ModelHyperParams& h = model.hparams;
  KvCacheShape shape{h.trunk_layers(), h.head_count_kv, h.key_length, h.value_length, h.kv_lora_rank > 0};
  for (const ModelHyperParams::LayerKv& l : h.layer_kv) {  // Gemma 4's layers differ
    shape.layers.push_back({l.head_count_kv, l.key_length, l.value_length});
  }
  KvPoolEstimate e;
  // As PagedEngine::load picks it.
  e.context_length = options.context_length > 0 ? options.context_length : std::min<int64_t>(h.context_length, 4096);
  e.block_size = options.kv_block_size;
  e.bytes_per_position = PagedKvStorage::bytes_per_block(shape, 1, options.kv_cache_type);
  KvBudgetInput in;
  in.bytes_per_position = e.bytes_per_position;
  in.context_length = e.context_length;
  in.available_bytes = available_bytes;
  in.is_device = is_device;
  Result<uint64_t> budget = kv_budget_bytes(options, in);
  if (!budget) return budget.status();
  e.budget_bytes = *budget;
  Result<int64_t> num_blocks =
      PagedKvStorage::num_blocks_for_budget(shape, e.block_size, e.budget_bytes, options.kv_cache_type);
  if (!num_blocks) return num_blocks.status();
  e.num_blocks = *num_blocks;
  e.bytes =
      PagedKvStorage::bytes_per_block(shape, e.block_size, options.kv_cache_type) * static_cast<uint64_t>(e.num_blocks);
  return e;
}

}  // namespace iwb
