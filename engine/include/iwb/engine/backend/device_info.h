// What the engine can compute on: the host CPU and any CUDA devices, described as plain
// values (for `iwb devices`, the Memory panel and the backends' device reports).
#pragma once

#include "iwb/engine/status.h"

#include <cstdint>
#include <string>
#include <vector>

namespace iwb {

enum class ComputeDeviceKind { Cpu, Cuda };

struct ComputeDeviceInfo {
  ComputeDeviceKind kind = ComputeDeviceKind::Cpu;
  std::string id;                   // "cpu", "cuda:0", ...: stable within one run
  std::string name;                 // CPU model name or GPU product name
  uint64_t total_memory_bytes = 0;  // host RAM for the CPU, device memory for a GPU
  uint64_t free_memory_bytes = 0;   // available now (MemAvailable on Linux)

  // CPU only.
  int num_logical_cores = 0;
  std::vector<std::string> simd_features;  // detected at run time: "avx2", "fma", ...
  std::string amx_status;  // "used (int8, bf16)" or "not used (<reason>)": the prefill matmuls' AMX tiles
  // The largest cache core 0 reaches (its L3 as sysfs reports it: the share of one core complex,
  // not the socket's total); 0 when unknown. Data much larger than this streams from memory.
  uint64_t cache_bytes = 0;

  // CUDA only (zero for the CPU).
  int compute_capability_major = 0;
  int compute_capability_minor = 0;
  int num_multiprocessors = 0;
  int core_clock_khz = 0;           // peak SM clock
  int memory_clock_khz = 0;         // peak memory clock
  int memory_bus_width_bits = 0;
  uint64_t l2_cache_bytes = 0;
  int driver_version = 0;           // as cudaDriverGetVersion: 1000 * major + 10 * minor
  int runtime_version = 0;          // as cudaRuntimeGetVersion

  // Theoretical DRAM bandwidth from clock and bus width (double data rate), 0 if unknown.
  // The roofline uses measured roofs; this is the spec-sheet figure shown beside them.
  double peak_memory_bandwidth_bytes_per_s() const {
    return 2.0 * static_cast<double>(memory_clock_khz) * 1000.0 *
           static_cast<double>(memory_bus_width_bits) / 8.0;
  }
};

// The host CPU: model name from /proc/cpuinfo, logical cores, RAM, SIMD extensions the CPU
// reports (not merely the ones this binary was compiled for). Never fails: unknown fields
// stay empty or zero.
ComputeDeviceInfo describe_cpu_device();

// Every CUDA device the runtime sees. Errors (not an empty list) when the build has no CUDA
// (Unsupported), when there is no driver or no device (NotFound), or when a query fails
// (DeviceError); the message says which, e.g. "no CUDA device: <runtime's reason>".
Result<std::vector<ComputeDeviceInfo>> list_cuda_devices();

}  // namespace iwb
