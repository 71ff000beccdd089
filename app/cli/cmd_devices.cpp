// `iwb devices`: lists the compute devices (the CPU, then each CUDA GPU) or says why there is
// no GPU; --json prints the same as one JSON object for scripts and the results store.
#include "commands.h"
#include "json_writer.h"
#include "options/option_groups.h"

#include "iwb/engine/backend/cuda_step_plan.h"
#include "iwb/engine/backend/device_info.h"

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace iwb::cli {
namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

// How the engine launches its kernels on this GPU (cuda_may_launch_programmatically).
bool launches_programmatically(const ComputeDeviceInfo& d) {
  return cuda_may_launch_programmatically(d.compute_capability_major, std::getenv("IWB_CUDA_PDL"));
}

std::string launch_text(const ComputeDeviceInfo& d) {
  if (launches_programmatically(d))
    return "programmatic (each kernel may start as the last ends; IWB_CUDA_PDL=0: serial)";
  if (d.compute_capability_major >= 9) return "serial (IWB_CUDA_PDL=0)";
  return "serial (programmatic launch needs compute capability 9.0)";
}

std::string version_text(int version) {  // CUDA's 1000 * major + 10 * minor
  if (version <= 0) return "unknown";
  return std::to_string(version / 1000) + "." + std::to_string((version % 1000) / 10);
}

void print_device_text(const ComputeDeviceInfo& d) {
  std::printf("%-8s %s\n", d.id.c_str(), d.name.c_str());
  if (d.kind == ComputeDeviceKind::Cpu) {
    std::printf("         %d logical cores, %.1f GiB RAM (%.1f GiB available)\n", d.num_logical_cores,
                d.total_memory_bytes / kGiB, d.free_memory_bytes / kGiB);
    std::string features;
    for (const std::string& f : d.simd_features) features += (features.empty() ? "" : " ") + f;
    std::printf("         SIMD: %s\n", features.empty() ? "none detected" : features.c_str());
    std::printf("         AMX: %s\n", d.amx_status.c_str());
    if (d.cache_bytes > 0) std::printf("         largest cache: %.0f MiB\n", d.cache_bytes / (1024.0 * 1024.0));
    return;
  }
  std::printf("         compute capability %d.%d, %d SMs, %d MHz, %.0f MiB L2\n", d.compute_capability_major,
              d.compute_capability_minor, d.num_multiprocessors, d.core_clock_khz / 1000,
              d.l2_cache_bytes / (1024.0 * 1024.0));
  std::printf("         %.1f GiB memory (%.1f GiB free), %d-bit bus at %d MHz, %.0f GB/s peak\n",
              d.total_memory_bytes / kGiB, d.free_memory_bytes / kGiB, d.memory_bus_width_bits,
              d.memory_clock_khz / 1000, d.peak_memory_bandwidth_bytes_per_s() / 1e9);
  std::printf("         driver %s, runtime %s\n", version_text(d.driver_version).c_str(),
              version_text(d.runtime_version).c_str());
  std::printf("         kernel launches: %s\n", launch_text(d).c_str());
}

void write_device_json(JsonWriter& json, const ComputeDeviceInfo& d) {
  const bool is_cpu = d.kind == ComputeDeviceKind::Cpu;
  json.begin_object()
      .field("id", d.id)
      .field("kind", is_cpu ? "cpu" : "cuda")
      .field("name", d.name)
      .field("total_memory_bytes", d.total_memory_bytes)
      .field("free_memory_bytes", d.free_memory_bytes);
  if (is_cpu) {
    json.field("num_logical_cores", d.num_logical_cores);
    json.key("simd_features").begin_array();
    for (const std::string& f : d.simd_features) json.value(f);
    json.end_array();
    json.field("amx", d.amx_status);
    json.field("cache_bytes", d.cache_bytes);
  } else {
    json.field("compute_capability",
               std::to_string(d.compute_capability_major) + "." + std::to_string(d.compute_capability_minor))
        .field("num_multiprocessors", d.num_multiprocessors)
        .field("core_clock_khz", d.core_clock_khz)
        .field("memory_clock_khz", d.memory_clock_khz)
        .field("memory_bus_width_bits", d.memory_bus_width_bits)
        .field("l2_cache_bytes", d.l2_cache_bytes)
        .field("peak_memory_bandwidth_bytes_per_s", d.peak_memory_bandwidth_bytes_per_s())
        .field("driver_version", version_text(d.driver_version))
        .field("runtime_version", version_text(d.runtime_version))
        .field("programmatic_launch", launches_programmatically(d));
  }
  json.end_object();
}

}  // namespace

int run_devices(int argc, char** argv) {
  bool is_json = false;
  OptionTable t("devices", "[--json]",
                "Lists the CPU and every CUDA device with memory and capabilities. When no GPU is\n"
                "usable the reason is printed instead; the exit status is 0 either way.");
  add_json_option(t, &is_json, "print one JSON object instead of text");
  if (const int status = parse_command_line(t, argc, argv); status >= 0) return status;

  std::vector<ComputeDeviceInfo> devices{describe_cpu_device()};
  const Result<std::vector<ComputeDeviceInfo>> cuda = list_cuda_devices();
  if (cuda.is_ok()) devices.insert(devices.end(), cuda->begin(), cuda->end());

  if (is_json) {
    JsonWriter json;
    json.begin_object().key("devices").begin_array();
    for (const ComputeDeviceInfo& d : devices) write_device_json(json, d);
    json.end_array();
    // "error" only when CUDA is unavailable: it is the reason, for scripts to show.
    json.key("cuda").begin_object().field("available", cuda.is_ok());
    if (!cuda.is_ok()) json.field("error", cuda.error_message());
    json.end_object().end_object();
    std::printf("%s\n", json.str().c_str());
    return 0;
  }
  for (const ComputeDeviceInfo& d : devices) print_device_text(d);
  if (!cuda.is_ok()) std::printf("%-8s not available: %s\n", "cuda", cuda.error_message().c_str());
  return 0;
}

}  // namespace iwb::cli
