// parse_device_request and choose_device: the rules of EngineOptions::device.
#include "iwb/engine/backend/device_selection.h"

#include <charconv>

namespace iwb {
namespace {

Status bad_device(std::string_view text) {
  return make_error(ErrorCode::InvalidArgument, "unknown device '" + std::string(text) +
                                                    "': use auto, cpu, cuda or cuda:N (N = 0, 1, ...)");
}

}  // namespace

Result<DeviceRequest> parse_device_request(std::string_view text) {
  if (text == "auto" || text.empty()) return DeviceRequest{DeviceRequestKind::Auto, 0};
  if (text == "cpu") return DeviceRequest{DeviceRequestKind::Cpu, 0};
  if (text == "cuda") return DeviceRequest{DeviceRequestKind::Cuda, 0};
  constexpr std::string_view kPrefix = "cuda:";
  if (text.substr(0, kPrefix.size()) != kPrefix) return bad_device(text);
  const std::string_view number = text.substr(kPrefix.size());
  if (number.empty() || number.size() > 4 || number.front() < '0' || number.front() > '9') return bad_device(text);
  int index = 0;
  const auto [end, ec] = std::from_chars(number.data(), number.data() + number.size(), index);
  if (ec != std::errc() || end != number.data() + number.size()) return bad_device(text);
  return DeviceRequest{DeviceRequestKind::Cuda, index};
}

Result<DeviceChoice> choose_device(const DeviceRequest& request,
                                   const Result<std::vector<ComputeDeviceInfo>>& cuda_devices) {
  DeviceChoice choice;
  switch (request.kind) {
    case DeviceRequestKind::Cpu: return choice;
    case DeviceRequestKind::Auto:
      choice.is_automatic = true;
      if (!cuda_devices) {
        choice.cpu_reason = cuda_devices.error_message();
        return choice;
      }
      if (cuda_devices->empty()) {
        choice.cpu_reason = "no CUDA device found";
        return choice;
      }
      choice.kind = ComputeDeviceKind::Cuda;
      choice.cuda_index = 0;
      choice.cuda_device = cuda_devices->front();
      return choice;
    case DeviceRequestKind::Cuda: {
      const std::string id = "cuda:" + std::to_string(request.cuda_index);
      if (!cuda_devices) {
        return make_error(cuda_devices.status().code(),
                          id + " cannot be used: " + cuda_devices.error_message() + " (--device cpu runs on the CPU)");
      }
      for (const ComputeDeviceInfo& d : *cuda_devices) {
        if (d.id != id) continue;
        choice.kind = ComputeDeviceKind::Cuda;
        choice.cuda_index = request.cuda_index;
        choice.cuda_device = d;
        return choice;
      }
      return make_error(ErrorCode::NotFound, id + " does not exist: " + std::to_string(cuda_devices->size()) +
                                                 " CUDA device(s) found (--device cpu runs on the CPU)");
    }
  }
  return choice;
}

Result<DeviceChoice> choose_device(std::string_view text) {
  Result<DeviceRequest> request = parse_device_request(text);
  if (!request) return request.status();
  if (request->kind == DeviceRequestKind::Cpu) return choose_device(*request, std::vector<ComputeDeviceInfo>{});
  return choose_device(*request, list_cuda_devices());
}

}  // namespace iwb
