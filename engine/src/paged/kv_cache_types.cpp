// KV cache type names (see kv_cache_types.h).
#include "iwb/engine/paged/kv_cache_types.h"

#include "iwb/kernels/paged_attention.h"

#include <cctype>

namespace iwb {

namespace {

constexpr const char* kCalibratedSuffix = "+calibrated";

bool is_fp8_name(std::string_view name) {
  std::string s(name);
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s == "fp8_e4m3" || s == "fp8" || s == "f8_e4m3";  // ours, vLLM's --kv-cache-dtype fp8, ggml-like
}

}  // namespace

Result<GgmlType> parse_kv_cache_type(std::string_view name) {
  if (is_fp8_name(name)) return GgmlType::F8_E4M3;
  const std::optional<GgmlType> type = ggml_type_from_name(name);
  if (!type || !is_kv_cache_type(*type)) {
    return make_error(ErrorCode::InvalidArgument, "the KV cache type is one of " + std::string(kv_cache_type_choices()) +
                                                      ", not '" + std::string(name) + "'");
  }
  return *type;
}

std::string kv_cache_types_name(const KvCacheTypes& types) {
  auto lower = [](GgmlType t) {
    if (t == GgmlType::F8_E4M3) return std::string("fp8_e4m3");
    std::string s(ggml_type_name(t));
    for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return s;
  };
  const std::string name = types.k == types.v ? lower(types.k) : lower(types.k) + "/" + lower(types.v);
  return types.calculate_scales ? name + kCalibratedSuffix : name;
}

Result<KvCacheTypes> parse_kv_cache_types(std::string_view name) {
  const bool is_calibrated = name.ends_with(kCalibratedSuffix);
  if (is_calibrated) {
    name.remove_suffix(std::string_view(kCalibratedSuffix).size());
    Result<KvCacheTypes> types = parse_kv_cache_types(name);
    if (!types) return types.status();
    if (!types->has_fp8()) {
      return make_error(ErrorCode::InvalidArgument,
                        "calculated KV scales (--calculate-kv-scales) need an fp8_e4m3 "
                        "side of the cache, not " +
                            std::string(name));
    }
    types->calculate_scales = true;
    return *types;
  }
  const size_t slash = name.find('/');
  Result<GgmlType> k = parse_kv_cache_type(name.substr(0, slash));
  if (!k) return k.status();
  if (slash == std::string_view::npos) return KvCacheTypes(*k);
  Result<GgmlType> v = parse_kv_cache_type(name.substr(slash + 1));
  if (!v) return v.status();
  return KvCacheTypes(*k, *v);
}

const char* kv_cache_type_choices() { return "f16, q8_0, q5_1, q5_0, q4_1, q4_0, fp8_e4m3"; }

}  // namespace iwb
