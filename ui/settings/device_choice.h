// The devices a model can be loaded on, as the Engine Settings dialog lists them ("Automatic",
// the CPU, each CUDA device), why no CUDA device is offered, and the engine options a load
// choice turns into. Plain functions over iwb::ComputeDeviceInfo, testable with made-up GPUs.
#pragma once

#include "worker/generation_values.h"
#include "iwb/engine/backend/device_info.h"
#include "iwb/engine/runtime/engine.h"

#include <QList>
#include <QString>

#include <vector>

namespace iwb::ui {

struct DeviceEntry {
  QString id;     // EngineOptions::device: "auto", "cpu", "cuda:0", ...
  QString label;  // "cuda:0 — NVIDIA H100 80GB HBM3, 79.6 GiB"
  bool isCuda = false;
};

struct DeviceList {
  QList<DeviceEntry> choices;  // "auto" first, then the CPU, then every CUDA device
  // Why no CUDA device is listed ("No CUDA device: built without CUDA support ..."); empty
  // when at least one is.
  QString cudaUnavailableReason;

  // Index of the choice with `id`, -1 when there is none.
  int indexOf(const QString& id) const;
};

// Builds the list from the CPU's description and list_cuda_devices()'s answer.
DeviceList makeDeviceList(const iwb::ComputeDeviceInfo& cpu,
                                const iwb::Result<std::vector<iwb::ComputeDeviceInfo>>& cudaDevices);
// The same, asking the machine now (list_cuda_devices initialises the CUDA runtime: tens of
// milliseconds the first time).
DeviceList currentDeviceList();

// "cuda:0" → true; "cpu", "auto", "" → false.
bool isCudaDeviceId(const QString& id);
// "CPU — AMD Ryzen 9 9950X" / "cuda:0 — NVIDIA H100 80GB HBM3, 79.6 GiB".
QString deviceLabel(const iwb::ComputeDeviceInfo& device);
// A short name for the status bar: "CPU", "cuda:0".
QString deviceShortName(const QString& id);

// The engine options of a load with `o`. The KV share of free device memory is passed only when
// the load can land on a CUDA device (`o.device` names one, or is "auto" and `isCudaPresent`):
// on the CPU the engine's own budget stays in charge.
iwb::EngineOptions toEngineOptions(const EngineLoadOptions& o, bool isCudaPresent);

}  // namespace iwb::ui
