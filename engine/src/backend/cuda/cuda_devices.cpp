// list_cuda_devices through the CUDA runtime (compiled only when IWB_CUDA_ENABLED). A machine
// without a driver or a GPU gets an error value with the runtime's reason, never an abort.
#include "iwb/engine/backend/device_info.h"

#include <cuda_runtime.h>

#include <string>

namespace iwb {
namespace {

std::string describe(cudaError_t error) {
  return std::string(cudaGetErrorName(error)) + ": " + cudaGetErrorString(error);
}

Status query_error(const char* call, int device, cudaError_t error) {
  return make_error(ErrorCode::DeviceError, std::string(call) + " failed for cuda:" +
                                                std::to_string(device) + " (" + describe(error) + ")");
}

// Fills everything but the ids for one device. Makes `device` current (cudaMemGetInfo needs
// its context); the caller restores the previous device.
Status describe_device(int device, ComputeDeviceInfo& info) {
  cudaDeviceProp prop{};
  if (cudaError_t e = cudaGetDeviceProperties(&prop, device); e != cudaSuccess) {
    return query_error("cudaGetDeviceProperties", device, e);
  }
  info.name = prop.name;
  info.compute_capability_major = prop.major;
  info.compute_capability_minor = prop.minor;
  info.num_multiprocessors = prop.multiProcessorCount;
  info.memory_bus_width_bits = prop.memoryBusWidth;
  info.l2_cache_bytes = static_cast<uint64_t>(prop.l2CacheSize);
  info.total_memory_bytes = prop.totalGlobalMem;

  // The clock fields left cudaDeviceProp in CUDA 13; the attributes work on every version.
  if (cudaError_t e = cudaDeviceGetAttribute(&info.core_clock_khz, cudaDevAttrClockRate, device);
      e != cudaSuccess) {
    return query_error("cudaDeviceGetAttribute(ClockRate)", device, e);
  }
  if (cudaError_t e = cudaDeviceGetAttribute(&info.memory_clock_khz, cudaDevAttrMemoryClockRate, device);
      e != cudaSuccess) {
    return query_error("cudaDeviceGetAttribute(MemoryClockRate)", device, e);
  }

  if (cudaError_t e = cudaSetDevice(device); e != cudaSuccess) {
    return query_error("cudaSetDevice", device, e);
  }
  size_t free_bytes = 0, total_bytes = 0;
  if (cudaError_t e = cudaMemGetInfo(&free_bytes, &total_bytes); e != cudaSuccess) {
    return query_error("cudaMemGetInfo", device, e);
  }
  info.free_memory_bytes = free_bytes;
  info.total_memory_bytes = total_bytes;
  return Status::ok();
}

}  // namespace

Result<std::vector<ComputeDeviceInfo>> list_cuda_devices() {
  int num_devices = 0;
  if (cudaError_t e = cudaGetDeviceCount(&num_devices); e != cudaSuccess) {
    cudaGetLastError();  // clear it so later, unrelated CUDA calls do not report it again
    const bool is_absent = e == cudaErrorNoDevice || e == cudaErrorInsufficientDriver;
    return make_error(is_absent ? ErrorCode::NotFound : ErrorCode::DeviceError,
                      "no CUDA device: " + std::string(cudaGetErrorString(e)));
  }
  if (num_devices == 0) {
    return make_error(ErrorCode::NotFound, "no CUDA device: the CUDA runtime reports none");
  }

  int driver_version = 0, runtime_version = 0;
  cudaDriverGetVersion(&driver_version);    // informational; 0 stays "unknown"
  cudaRuntimeGetVersion(&runtime_version);
  int previous_device = 0;
  const bool has_previous = cudaGetDevice(&previous_device) == cudaSuccess;

  std::vector<ComputeDeviceInfo> devices;
  Status status;
  for (int device = 0; device < num_devices && status.is_ok(); ++device) {
    ComputeDeviceInfo info;
    info.kind = ComputeDeviceKind::Cuda;
    info.id = "cuda:" + std::to_string(device);
    info.driver_version = driver_version;
    info.runtime_version = runtime_version;
    status = describe_device(device, info);
    if (status.is_ok()) devices.push_back(std::move(info));
  }
  if (has_previous) cudaSetDevice(previous_device);  // best effort: the caller's choice, as before
  if (!status.is_ok()) return status;
  return devices;
}

}  // namespace iwb
