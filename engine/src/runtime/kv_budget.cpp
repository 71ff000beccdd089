// kv_budget_bytes: how many bytes the paged KV pool gets (see EngineOptions).
#include "runtime/kv_budget.h"

#include <algorithm>

namespace iwb {

std::string describe_bytes(uint64_t bytes) {
  if (bytes < (1u << 20)) return std::to_string((bytes + 512) >> 10) + " KiB";
  if (bytes >= (uint64_t{100} << 30)) return std::to_string((bytes + (uint64_t{1} << 29)) >> 30) + " GiB";
  return std::to_string((bytes + (1u << 19)) >> 20) + " MiB";
}

Status check_host_memory(uint64_t weight_bytes, uint64_t kv_pool_bytes, uint64_t total_bytes,
                         uint64_t available_bytes) {
  if (total_bytes > 0 && weight_bytes > total_bytes) {
    return make_error(ErrorCode::OutOfMemory, "the model's weights need " + describe_bytes(weight_bytes) +
                                                  " but this machine has " + describe_bytes(total_bytes) +
                                                  " of memory in all: use a smaller quantization of the model");
  }
  if (available_bytes > 0 && kv_pool_bytes > available_bytes) {
    return make_error(ErrorCode::OutOfMemory, "the KV cache needs " + describe_bytes(kv_pool_bytes) + " but only " +
                                                  describe_bytes(available_bytes) +
                                                  " of memory is available now: lower --kv-mem or the context (-c), "
                                                  "or quantize the cache (-ctk/-ctv q8_0)");
  }
  return {};
}

Result<uint64_t> kv_budget_bytes(const EngineOptions& o, const KvBudgetInput& in) {
  if (o.kv_cache_bytes > 0) return o.kv_cache_bytes;
  const uint64_t available = in.available_bytes;
  if (o.kv_cache_fraction > 0) {
    if (available == 0) {
      return make_error(ErrorCode::InvalidArgument, std::string("the available ") + in.memory_name +
                                                        " is unknown here: give the KV cache size in bytes rather "
                                                        "than as a fraction");
    }
    return static_cast<uint64_t>(o.kv_cache_fraction * static_cast<double>(available));
  }
  const uint64_t one_context = static_cast<uint64_t>(in.context_length) * in.bytes_per_position;
  if (in.is_device) {
    // Memory beyond what every running sequence's full context needs would never hold anything
    // but old prefixes; a small model would otherwise get a pool of millions of blocks.
    const uint64_t useful = static_cast<uint64_t>(std::max<int64_t>(1, o.max_running_sequences)) * one_context;
    const auto share = static_cast<uint64_t>(kDeviceKvDefaultFraction * static_cast<double>(available));
    return std::max(std::min(useful, share), std::min(one_context, available));
  }
  uint64_t budget = static_cast<uint64_t>(kDefaultKvContexts) * one_context;
  if (available > 0) budget = std::min(budget, available / 4);
  return std::max(budget, one_context);
}

}  // namespace iwb
