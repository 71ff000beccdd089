// The KV pool's byte budget from EngineOptions (its comment states the rule) and the memory
// the pool may take: host memory for the CPU, free device memory after weights and scratch
// for a GPU.
#pragma once

#include "iwb/engine/runtime/engine.h"

#include <cstdint>
#include <string>

namespace iwb {

struct KvBudgetInput {
  uint64_t bytes_per_position = 0;  // K and V of every layer for one position
  int64_t context_length = 0;       // per sequence
  uint64_t available_bytes = 0;     // what the pool may take from; 0: unknown
  // A device pool by default takes kDeviceKvDefaultFraction of what is available, up to the
  // max_running_sequences full contexts it could ever use; the host pool keeps the CPU rule.
  bool is_device = false;
  const char* memory_name = "memory";  // "memory", "free memory on cuda:0": for messages
};

inline constexpr double kDeviceKvDefaultFraction = 0.9;

Result<uint64_t> kv_budget_bytes(const EngineOptions& options, const KvBudgetInput& input);

// Refuses, before anything is read or allocated, a CPU load that cannot fit: weights larger
// than the machine's memory (they would be paged in from disk for every token), or a KV pool
// larger than the memory available now (zero-filling it would bring in the OOM killer). The
// message names both figures. 0 for total or available: unknown, not checked.
Status check_host_memory(uint64_t weight_bytes, uint64_t kv_pool_bytes, uint64_t total_bytes, uint64_t available_bytes);

// "12 KiB", "340 MiB".
std::string describe_bytes(uint64_t bytes);

}  // namespace iwb
