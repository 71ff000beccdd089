// Device choices for the Engine Settings dialog and the engine options a load turns into.
#include "settings/device_choice.h"

#include <QCoreApplication>

namespace iwb::ui {
namespace {

QString tr(const char* text) { return QCoreApplication::translate("iwb::ui::DeviceEntry", text); }

QString gibText(uint64_t bytes) { return QString::number(double(bytes) / double(1ull << 30), 'f', 1); }

// "no CUDA device: driver not found" stays as it is (capitalised); any other reason gets the
// prefix, so the line under the box always starts by saying what is missing.
QString unavailableText(const std::string& message) {
  QString reason = QString::fromStdString(message).trimmed();
  if (!reason.startsWith(QLatin1String("no CUDA device"), Qt::CaseInsensitive)) {
    reason = tr("No CUDA device: %1").arg(reason);
  }
  if (!reason.isEmpty()) reason[0] = reason[0].toUpper();
  return reason;
}

}  // namespace

int DeviceList::indexOf(const QString& id) const {
  for (qsizetype i = 0; i < choices.size(); ++i) {
    if (choices.at(i).id == id) return static_cast<int>(i);
  }
  return -1;
}

bool isCudaDeviceId(const QString& id) { return id.startsWith(QLatin1String("cuda:")); }

QString deviceLabel(const iwb::ComputeDeviceInfo& device) {
  const QString name = QString::fromStdString(device.name);
  if (device.kind == iwb::ComputeDeviceKind::Cpu) {
    return name.isEmpty() ? tr("CPU") : tr("CPU — %1").arg(name);
  }
  QString label = QString::fromStdString(device.id);
  if (!name.isEmpty()) label += QStringLiteral(" — ") + name;
  if (device.total_memory_bytes > 0) label += tr(", %1 GiB").arg(gibText(device.total_memory_bytes));
  return label;
}

QString deviceShortName(const QString& id) {
  if (id.isEmpty() || id == QLatin1String("cpu")) return tr("CPU");
  return id;
}

DeviceList makeDeviceList(const iwb::ComputeDeviceInfo& cpu,
                                const iwb::Result<std::vector<iwb::ComputeDeviceInfo>>& cudaDevices) {
  DeviceList out;
  out.choices << DeviceEntry{QStringLiteral("auto"), tr("Automatic (CUDA if present)"), false};
  out.choices << DeviceEntry{QStringLiteral("cpu"), deviceLabel(cpu), false};
  if (!cudaDevices) {
    out.cudaUnavailableReason = unavailableText(cudaDevices.error_message());
    return out;
  }
  for (const iwb::ComputeDeviceInfo& gpu : *cudaDevices) {
    out.choices << DeviceEntry{QString::fromStdString(gpu.id), deviceLabel(gpu), true};
  }
  if (cudaDevices->empty()) out.cudaUnavailableReason = tr("No CUDA device: the CUDA runtime lists none.");
  return out;
}

DeviceList currentDeviceList() { return makeDeviceList(iwb::describe_cpu_device(), iwb::list_cuda_devices()); }

iwb::EngineOptions toEngineOptions(const EngineLoadOptions& o, bool isCudaPresent) {
  iwb::EngineOptions e;
  e.context_length = o.contextLength;
  e.num_threads = o.numThreads;
  if (o.kvCacheMiB > 0) e.kv_cache_bytes = static_cast<uint64_t>(o.kvCacheMiB) << 20;
  if (o.kvBlockSize > 0) e.kv_block_size = o.kvBlockSize;
  if (o.maxBatchTokens > 0) e.max_batch_tokens = o.maxBatchTokens;
  e.is_batch_invariant = o.isBatchInvariant;
  e.device = o.device.isEmpty() ? std::string("auto") : o.device.toStdString();
  e.load_mode = o.loadMode.isEmpty() ? std::string("auto") : o.loadMode.toStdString();
  const bool canLandOnCuda = isCudaDeviceId(o.device) || (e.device == "auto" && isCudaPresent);
  if (canLandOnCuda && o.kvCacheFraction > 0 && o.kvCacheFraction <= 1) e.kv_cache_fraction = o.kvCacheFraction;
  return e;
}

}  // namespace iwb::ui
