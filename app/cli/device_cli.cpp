// The line saying where a model ran (see device_cli.h).
#include "device_cli.h"

#include "iwb/engine/model/model_info.h"

#include <cstdio>

namespace iwb::cli {

std::string device_line(const Engine& engine) {
  const ModelSummary& m = engine.model();
  std::string line = "device: " + m.device_description;
  if (!m.device_fallback_reason.empty()) line += " [auto chose the CPU: " + m.device_fallback_reason + "]";
  if (!m.weights_memory.empty()) line += "; weights " + m.weights_memory;
  if (m.load_seconds > 0) {
    char seconds[32];
    std::snprintf(seconds, sizeof seconds, "%.2f", m.load_seconds);
    line += std::string("; loaded in ") + seconds + " s";
  }
  return line;
}

}  // namespace iwb::cli
