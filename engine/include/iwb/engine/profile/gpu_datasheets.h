// Datasheet roofs of GPUs that serve models (memory bandwidth and dense 16-bit tensor FLOP/s),
// for predicting a remote server's decode speed where we cannot probe the machine. The
// figures and where they come from are in gpu_datasheets.cpp.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace iwb {

struct GpuDatasheet {
  std::string name;                  // "H100 SXM", ...
  double bandwidth_bytes_per_s = 0;  // HBM/GDDR peak as the vendor states it
  double peak_flops = 0;             // dense (no 2:4 sparsity) BF16/FP16 tensor, FP32 accumulate
  std::string note;                  // which figure was taken, and any doubt about it
};

// In the order a user scans them: NVIDIA data-centre, then workstation/consumer, then AMD.
const std::vector<GpuDatasheet>& gpu_datasheets();
// nullptr when no entry has this name.
const GpuDatasheet* find_gpu_datasheet(std::string_view name);

}  // namespace iwb
