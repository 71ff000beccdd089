// Fuzz target: the Prometheus text parser of the remote-server client (a /metrics body comes
// from whatever answers at the URL the user typed), then the server-kind detection and the
// mapping onto one snapshot, and the difference of two snapshots.
#include "iwb/engine/remote/prometheus_text.h"
#include "iwb/engine/remote/server_metrics.h"

#include <cstdint>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto families = iwb::remote::parse_prometheus_text(text);
  if (!families) return 0;
  (void)iwb::remote::detect_server_kind(*families);
  const iwb::remote::ServerSnapshot snapshot = iwb::remote::map_server_metrics(*families);
  (void)iwb::remote::counter_difference(snapshot, snapshot);
  (void)iwb::remote::counter_difference(iwb::remote::ServerSnapshot{}, snapshot);
  return 0;
}
