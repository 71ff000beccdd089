// One sequence the scheduler serves: its tokens (prompt, then generated), how many of them
// have their K/V in the cache, and where it is in its life.
#pragma once

#include "iwb/engine/paged/paged_types.h"

#include <cstdint>
#include <vector>

namespace iwb {

using RequestId = uint64_t;  // as in runtime/engine.h

// Finished sequences leave the scheduler at once (their blocks freed), so they have no status.
enum class SequenceStatus { Waiting, Running };

struct Sequence {
  SequenceId id = 0;
  RequestId request = 0;
  // Prompt tokens then generated tokens. After a preemption all of them are recomputed as if
  // they were the prompt; num_prompt_tokens stays the user's prompt length.
  std::vector<int32_t> tokens;
  int64_t num_prompt_tokens = 0;
  // Leading tokens whose K/V are in the cache (prefix-cache hits included). While decoding it
  // is tokens.size() - 1: the last sampled token is the next one to run.
  int64_t num_computed_tokens = 0;
  SequenceStatus status = SequenceStatus::Waiting;
  int64_t arrival = 0;           // order of add_sequence/fork calls: admission is first come, first served
  int64_t num_preemptions = 0;
  int64_t num_cached_prompt_tokens = 0;  // prefix-cache hit of the latest admission

  int64_t num_tokens() const { return static_cast<int64_t>(tokens.size()); }
  int64_t num_generated_tokens() const { return num_tokens() - num_prompt_tokens; }
};

}  // namespace iwb
