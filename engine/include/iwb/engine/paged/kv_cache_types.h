// The types the KV cache stores keys and values in, chosen separately as llama.cpp's
// -ctk/--cache-type-k and -ctv/--cache-type-v: f16, q8_0, q5_1, q5_0, q4_1 or q4_0, or vLLM's
// FP8 E4M3 ("fp8_e4m3", also "fp8").
#pragma once

#include "iwb/engine/status.h"
#include "iwb/kernels/ggml_type.h"

#include <string>
#include <string_view>

namespace iwb {

struct KvCacheTypes {
  GgmlType k = GgmlType::F16;
  GgmlType v = GgmlType::F16;
  // vLLM's --calculate-kv-scales: an FP8 side's per-layer scale (k_scale, v_scale) is computed
  // from the first batch each layer writes (max |x| / 200 for keys, / 100 for values) instead of
  // vLLM's default 1. Only with an fp8_e4m3 side.
  bool calculate_scales = false;

  KvCacheTypes() = default;
  KvCacheTypes(GgmlType both) : k(both), v(both) {}  // NOLINT: implicit on purpose (one type for both)
  KvCacheTypes(GgmlType keys, GgmlType values) : k(keys), v(values) {}
  bool is_f16() const { return k == GgmlType::F16 && v == GgmlType::F16; }
  bool has_fp8() const { return k == GgmlType::F8_E4M3 || v == GgmlType::F8_E4M3; }
  bool operator==(const KvCacheTypes&) const = default;
};

// "f16", "q8_0", ... (any case, as llama.cpp spells them), "fp8_e4m3" or "fp8"; an error naming the
// choices otherwise.
Result<GgmlType> parse_kv_cache_type(std::string_view name);
// "q8_0" (both sides alike) or "q8_0/q4_0" (keys/values): the form runs are stored under;
// "+calibrated" follows when calculate_scales is set ("fp8_e4m3+calibrated").
std::string kv_cache_types_name(const KvCacheTypes& types);
// The inverse of kv_cache_types_name (an error for "+calibrated" without an fp8_e4m3 side).
Result<KvCacheTypes> parse_kv_cache_types(std::string_view name);
// The names a user may give, for help texts and choice lists.
const char* kv_cache_type_choices();

}  // namespace iwb
