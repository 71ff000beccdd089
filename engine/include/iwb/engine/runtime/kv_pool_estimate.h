// The paged KV pool an engine will allocate for a model, predicted before loading it: the
// engine's own budget rule (EngineOptions: kv_cache_bytes, kv_cache_fraction, else
// kDefaultKvContexts full contexts capped by the memory available) cut to whole blocks.
// The Memory tab's estimate, so that it matches what the engine measures after the load.
#pragma once

#include "iwb/engine/model/model_info.h"
#include "iwb/engine/runtime/engine.h"

#include <cstdint>

namespace iwb {

struct KvPoolEstimate {
  int64_t context_length = 0;  // per sequence, as the engine picks it from the options
  uint64_t budget_bytes = 0;   // the budget before whole blocks
  int32_t block_size = 0;      // positions per block
  int64_t num_blocks = 0;
  uint64_t bytes_per_position = 0;  // K and V of every layer
  uint64_t bytes = 0;               // num_blocks whole blocks: what the pool allocates

  int64_t num_positions() const { return num_blocks * block_size; }
  // The pool in full contexts (4.0 for the CPU default).
  double num_contexts() const {
    return context_length > 0 ? static_cast<double>(num_positions()) / static_cast<double>(context_length) : 0;
  }
};

// `available_bytes`: host memory available (the CPU) or free device memory after the weights
// (a GPU, `is_device`); 0 when unknown (no cap). An error for a vocabulary-only model or
// options the engine would refuse (a budget below one block).
Result<KvPoolEstimate> estimate_kv_pool(const ModelSummary& model, const EngineOptions& options,
                                        uint64_t available_bytes, bool is_device = false);

}  // namespace iwb
