// The --device option of the commands that load a model (run, bench, batch-bench, eval,
// spec-bench, profile-overhead, imatrix) and the line saying where the model ran.
#pragma once

#include "iwb/engine/runtime/engine.h"

#include <cstdio>
#include <string>

namespace iwb::cli {

inline constexpr const char* kDeviceUsage =
    "  --device DEV            where the model runs: auto (a CUDA GPU when one works, else the CPU),\n"
    "                          cpu, or cuda:N (default auto)\n";

// Parses argv[*i] when it is --device (advancing *i past its value, which must be auto, cpu,
// cuda or cuda:N). Returns 1 when it took the option, 0 when argv[*i] is another option, -1
// (message printed) on a missing or bad value.
int parse_device_option(const char* command, int argc, char** argv, int* i, std::string* device);

// "device: cuda:0 (NVIDIA H100 80GB HBM3)" or "device: cpu (8 threads; auto: no CUDA device: ...)".
std::string device_line(const Engine& engine);

}  // namespace iwb::cli
