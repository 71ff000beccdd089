// --device for the CLI (see device_cli.h).
#include "device_cli.h"

#include "iwb/engine/backend/device_selection.h"

namespace iwb::cli {

int parse_device_option(const char* command, int argc, char** argv, int* i, std::string* device) {
  if (std::string(argv[*i]) != "--device") return 0;
  if (*i + 1 >= argc) {
    std::fprintf(stderr, "iwb %s: --device needs a value (auto, cpu or cuda:N)\n", command);
    return -1;
  }
  const std::string v = argv[++*i];
  if (Result<DeviceRequest> request = parse_device_request(v); !request) {
    std::fprintf(stderr, "iwb %s: %s\n", command, request.error_message().c_str());
    return -1;
  }
  *device = v;
  return 1;
}

std::string device_line(const Engine& engine) {
  const ModelSummary& m = engine.model();
  std::string line = "device: " + m.device_description;
  if (!m.device_fallback_reason.empty()) line += " [auto chose the CPU: " + m.device_fallback_reason + "]";
  return line;
}

}  // namespace iwb::cli
