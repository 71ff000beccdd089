// The line saying where a command's model ran (its --device and -ngl are rows of
// options/option_groups.h).
#pragma once

#include "iwb/engine/runtime/engine.h"

#include <string>

namespace iwb::cli {

// "device: cuda:0 (NVIDIA H100 80GB HBM3)" or "device: cpu (8 threads; auto: no CUDA device: ...)".
std::string device_line(const Engine& engine);

}  // namespace iwb::cli
