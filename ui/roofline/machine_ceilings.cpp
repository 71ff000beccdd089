// MachineCeilings: reading probes from the results store and measuring one off the GUI thread.
#include "roofline/machine_ceilings.h"

#include "iwb/engine/backend/device_info.h"

#include "store/results_store_access.h"

namespace iwb::ui {
namespace {

// The probe of `deviceId`: the CPU's, or the GPU's among those probe_cuda_devices measures.
iwb::Result<iwb::ProbeResult> probeDevice(const std::string& deviceId, const iwb::ProbeOptions& options) {
  if (deviceId == "cpu") return iwb::probe_cpu(options);
  auto gpus = iwb::probe_cuda_devices();
  if (!gpus) return gpus.status();
  for (const iwb::ProbeResult& gpu : *gpus) {
    if (gpu.device_id == deviceId) return gpu;
  }
  return iwb::make_error(iwb::ErrorCode::NotFound, deviceId + " was not among the CUDA devices probed");
}

}  // namespace

QString profiledDeviceId(const iwb::ProfileSnapshot& snapshot) {
  // Decode runs after prefill, so its batch is the newer when both are there.
  for (const auto* batch : {&snapshot.last_decode, &snapshot.last_prefill}) {
    if (*batch && !(*batch)->kernels.empty()) return QString::fromStdString((*batch)->kernels.front().device.id());
  }
  return {};
}

MachineCeilings::MachineCeilings(const QString& storePath, QObject* parent)
    : QObject(parent),
      m_storePath(ResultsStoreAccess(storePath).path()) {}

MachineCeilings::~MachineCeilings() {
  if (m_thread) {
    // The probe runs for seconds at most and cannot be interrupted; its result is dropped
    // (the QPointer in the thread's callback sees this object gone).
    m_thread->wait();
  }
}

void MachineCeilings::setDeviceId(const QString& deviceId) {
  if (deviceId.isEmpty() || deviceId == m_deviceId) return;
  m_deviceId = deviceId;
  reload();
}

iwb::Ceilings MachineCeilings::ceilings() const {
  return m_probe ? iwb::ceilings_from_probe(*m_probe) : iwb::Ceilings{};
}

std::optional<double> MachineCeilings::bandwidthAboveRoof(double bytesPerStep, double stepsPerS) const {
  if (m_deviceId != QLatin1String("cpu")) return std::nullopt;
  static const uint64_t cacheBytes = iwb::describe_cpu_device().cache_bytes;  // read once a process
  return iwb::bandwidth_above_roof(bytesPerStep, stepsPerS, ceilings().bandwidth_bytes_per_s, cacheBytes);
}

void MachineCeilings::reload() {
  // A short read on the GUI thread; the connection lives and dies here.
  auto probe = ResultsStoreAccess(m_storePath).latestProbe(m_deviceId);
  if (!probe) {
    m_errorMessage = QString::fromStdString(probe.error_message());
    m_probe.reset();
  } else {
    m_errorMessage.clear();
    m_probe = *probe;
  }
  emit probeChanged();
}

void MachineCeilings::measure(const iwb::ProbeOptions& options) {
  if (m_isMeasuring) return;
  m_isMeasuring = true;
  const ResultsStoreAccess store(m_storePath);
  const std::string deviceId = m_deviceId.toStdString();
  QPointer<MachineCeilings> self(this);
  auto isCancelled = std::make_shared<std::atomic<bool>>(false);
  m_isCancelled = isCancelled;
  // The thread measures and stores (its own SQLite connection, opened and closed there), then
  // hands the values back to this object's thread.
  m_thread = QThread::create([self, options, store, deviceId, isCancelled] {
    std::optional<iwb::ProbeResult> probe;
    QString error;
    auto measured = probeDevice(deviceId, options);
    if (*isCancelled) return;
    if (!measured) {
      error = QString::fromStdString(measured.error_message());
    } else {
      probe = *measured;
      if (iwb::Status s = store.addProbe(*probe); !s) error = QString::fromStdString(s.message());
    }
    if (self) {
      QMetaObject::invokeMethod(self, [self, probe, error, isCancelled] {
        if (self && !*isCancelled) self->finishMeasure(probe, error);
      }, Qt::QueuedConnection);
    }
  });
  m_thread->setObjectName(QStringLiteral("ProbeThread"));
  connect(m_thread, &QThread::finished, m_thread, &QObject::deleteLater);
  m_thread->start(QThread::HighPriority);
  emit measuringChanged(true);
}

void MachineCeilings::cancelMeasure() {
  if (!m_isMeasuring) return;
  if (m_isCancelled) *m_isCancelled = true;
  m_isMeasuring = false;
  emit measuringChanged(false);
}

void MachineCeilings::finishMeasure(const std::optional<iwb::ProbeResult>& probe, const QString& error) {
  m_isMeasuring = false;
  emit measuringChanged(false);
  if (probe) {
    // Shown even when storing failed: the measurement itself is good for this session.
    m_probe = probe;
    emit probeChanged();
  }
  m_errorMessage = error;
  if (!error.isEmpty()) emit measureFailed(error);
}

}  // namespace iwb::ui
