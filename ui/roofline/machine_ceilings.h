// The measured ceilings of the device the model runs on, as the GUI knows them: the newest probe
// of that device ("cpu", or "cuda:0" when the engine runs there) in the results store (what
// `iwb probe` writes), and "measure now", which runs the probe on a thread of its own (it
// takes seconds) and stores the result there. The roofline and metrics panels share it.
#pragma once

#include "iwb/engine/profile/machine_probe.h"
#include "iwb/engine/profile/metrics.h"
#include "iwb/engine/profile/profile_aggregate.h"

#include <QObject>
#include <QPointer>
#include <QString>
#include <QThread>

#include <atomic>
#include <memory>
#include <optional>

namespace iwb::ui {

// The device the snapshot's kernels ran on ("cpu", "cuda:0"): that of its newest records;
// empty when it holds none.
QString profiledDeviceId(const iwb::ProfileSnapshot& snapshot);

class MachineCeilings : public QObject {
  Q_OBJECT

 public:
  // `storePath`: the results store; empty means ResultsStore::default_path().
  explicit MachineCeilings(const QString& storePath = {}, QObject* parent = nullptr);
  ~MachineCeilings() override;  // waits for a measurement in progress

  const QString& storePath() const { return m_storePath; }
  // The device whose probe is used: "cpu" (the start) or "cuda:N". Changing it reloads.
  const QString& deviceId() const { return m_deviceId; }
  void setDeviceId(const QString& deviceId);
  const std::optional<iwb::ProbeResult>& probe() const { return m_probe; }
  // Zero ceilings when the machine was never probed.
  iwb::Ceilings ceilings() const;
  // The bandwidth a run read at (bytes per step x steps/s) when it beat this probe's memory roof
  // from beyond the CPU's caches (iwb::bandwidth_above_roof): the probe was taken at a slower
  // moment of a shared host. Only for the CPU, whose probe is taken where that happens; nullopt
  // otherwise. The Roofline and Metrics tabs say so.
  std::optional<double> bandwidthAboveRoof(double bytesPerStep, double stepsPerS) const;
  bool isMeasuring() const { return m_isMeasuring; }
  // Why the last reload or measurement failed; empty when it did not.
  const QString& errorMessage() const { return m_errorMessage; }

  // Probes the device on a worker thread (the CPU, or the GPUs when the device is one of them),
  // stores the result, then probeChanged (or measureFailed). Tests pass small options; the
  // default measures properly (~5 s).
  void measure(const iwb::ProbeOptions& options = {});
  // Gives up the measurement in progress: measuringChanged(false) now, and its result is neither
  // stored nor shown (the probe's few seconds still run out on their thread).
  void cancelMeasure();

 public slots:
  // Reads the newest probe of the device from the store; probeChanged follows.
  void reload();

 signals:
  void probeChanged();
  void measuringChanged(bool isMeasuring);
  void measureFailed(const QString& message);

 private:
  void finishMeasure(const std::optional<iwb::ProbeResult>& probe, const QString& error);

  QString m_storePath;
  QString m_deviceId = QStringLiteral("cpu");
  std::optional<iwb::ProbeResult> m_probe;
  QString m_errorMessage;
  bool m_isMeasuring = false;
  QPointer<QThread> m_thread;  // deletes itself once finished
  std::shared_ptr<std::atomic<bool>> m_isCancelled;  // of the measurement in progress
};

}  // namespace iwb::ui
