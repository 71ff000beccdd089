// What the engine worker measures, apart from the worker: profile snapshots through the
// decimator, token times on one session clock, per-request timings with the cost model's
// predicted work, memory samples and KV-cache map snapshots, each decimated to what the GUI can
// draw. It returns values; the worker emits them. Lives on the worker's thread.
#pragma once

#include "worker/kv_map_values.h"
#include "worker/measurement_values.h"
#include "worker/worker_requests.h"
#include "iwb/engine/profile/cost_model.h"
#include "iwb/engine/profile/profile_aggregate.h"

#include <QHash>
#include <QList>

#include <chrono>
#include <optional>

namespace iwb {
class Engine;
struct RequestFinished;
struct StepResult;
}  // namespace iwb

namespace iwb::ui {

class WorkerMeasurements {
 public:
  using TokenTimes = QHash<quint64, QList<double>>;  // caller's request id -> session seconds

  WorkerMeasurements() : m_sessionStart(std::chrono::steady_clock::now()) {}

  double sessionSeconds() const;

  void resetProfile(quint64 epoch);
  quint64 profileEpoch() const { return m_profileEpoch; }

  // Around a model load: the memory baseline before it; the cost model's shape of the file
  // and the block-text decoder after it. release(): the model is gone.
  void prepareForLoad();
  void finishLoad(const iwb::Engine& engine);
  void release();

  // What one step makes due: a profile snapshot, token times (at most ~10 a second), and
  // whether a memory sample and a KV snapshot are due.
  struct StepOutput {
    std::optional<iwb::ProfileSnapshot> profile;
    TokenTimes tokenTimes;
    bool isMemoryDue = false;
    bool isKvDue = false;
  };
  StepOutput collectStep(const iwb::StepResult& result, WorkerRequests& requests);
  // The engine fell idle: everything held back.
  struct Flush {
    std::optional<iwb::ProfileSnapshot> profile;
    TokenTimes tokenTimes;
  };
  Flush flush();
  // A reply ended: its held-back token times, if any.
  std::optional<QList<double>> takeTokenTimes(quint64 callerId);
  void dropTokenTimes(quint64 callerId) { m_pendingTokenTimes.remove(callerId); }

  RequestMeasurement measure(const iwb::RequestFinished& finished, const WorkerRequests::Entry& entry,
                             const iwb::Engine* engine) const;
  MemorySample memorySample(const iwb::Engine* engine);
  KvMapSnapshot kvSnapshot(const iwb::Engine* engine, bool isIdle, const WorkerRequests& requests);

 private:
  std::chrono::steady_clock::time_point m_sessionStart;
  iwb::ProfileDecimator m_profileDecimator;
  quint64 m_profileEpoch = 0;
  TokenTimes m_pendingTokenTimes;
  double m_lastTokenTimesEmit = -1;
  double m_lastMemoryEmit = -1;
  MemorySample m_memoryBaseline;            // just before the model was loaded
  qint64 m_kvPositions = 0;
  std::optional<iwb::ModelShape> m_shape;   // the loaded model's, for predicted work
  BlockTextCache m_blockTexts;              // decoded block contents, per block
  double m_lastKvEmit = -1;
  bool m_wasKvIdle = true;                  // the last KV snapshot sent was an idle one
};

}  // namespace iwb::ui
