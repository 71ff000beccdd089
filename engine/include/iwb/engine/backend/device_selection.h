// Which device the engine runs on: EngineOptions::device parsed ("auto", "cpu", "cuda",
// "cuda:N") and the decision against the CUDA devices found, as plain functions so the rules
// are tested on machines without a GPU.
#pragma once

#include "iwb/engine/backend/device_info.h"
#include "iwb/engine/status.h"

#include <string>
#include <string_view>
#include <vector>

namespace iwb {

enum class DeviceRequestKind { Auto, Cpu, Cuda };

struct DeviceRequest {
  DeviceRequestKind kind = DeviceRequestKind::Auto;
  int cuda_index = 0;  // for Cuda
};

// "auto", "cpu", "cuda" (= cuda:0) or "cuda:N" (N a whole number, no sign or spaces). Anything
// else is refused with a message listing the accepted forms.
Result<DeviceRequest> parse_device_request(std::string_view text);

struct DeviceChoice {
  ComputeDeviceKind kind = ComputeDeviceKind::Cpu;
  int cuda_index = 0;
  ComputeDeviceInfo cuda_device;  // the chosen device's description (Cuda)
  // "auto" chose it: a CUDA device that cannot take the model falls back to the CPU.
  bool is_automatic = false;
  // Why the CPU runs the model when "auto" asked (empty for an explicit "cpu" or a CUDA choice):
  // "no CUDA device: ...", "built without CUDA support ...".
  std::string cpu_reason;
  std::string id() const { return kind == ComputeDeviceKind::Cpu ? "cpu" : "cuda:" + std::to_string(cuda_index); }
};

// The decision for `request` given what list_cuda_devices() returned. "cpu": the CPU. "auto":
// the first CUDA device when there is one, else the CPU with the reason. "cuda:N": that device,
// or an error (NotFound / Unsupported / DeviceError) saying why it cannot be used and that
// --device cpu works.
Result<DeviceChoice> choose_device(const DeviceRequest& request,
                                   const Result<std::vector<ComputeDeviceInfo>>& cuda_devices);

// parse_device_request, list_cuda_devices (only when the request may use CUDA) and choose_device.
Result<DeviceChoice> choose_device(std::string_view text);

}  // namespace iwb
