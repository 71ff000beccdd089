// The GUI thread's handle on the engine: owns the worker thread and the EngineWorker on it,
// forwards requests as queued calls, re-emits the worker's signals, and keeps the little
// state the GUI asks about (loading? generating which reply? which model?). Destroying it
// stops the reply in flight and joins the thread.
#pragma once

#include "worker/expert_load_values.h"
#include "worker/generation_values.h"
#include "worker/kv_map_values.h"
#include "worker/measurement_values.h"
#include "worker/spec_values.h"

#include <QObject>
#include <QString>

class QThread;

namespace iwb::ui {

class EngineWorker;

class EngineController : public QObject {
  Q_OBJECT

 public:
  explicit EngineController(QObject* parent = nullptr);
  ~EngineController() override;

  bool isLoading() const { return m_isLoading; }
  bool hasModel() const { return !m_model.path.isEmpty(); }
  const LoadedModel& model() const { return m_model; }
  // The reply being generated, 0 when none.
  quint64 activeRequest() const { return m_activeRequest; }
  bool isGenerating() const { return m_activeRequest != 0; }
  QThread* workerThread() const { return m_thread; }
  // The worker lives on workerThread(): connect to its signals, never call its slots directly
  // from this thread (tests use it to hold the worker at a known point).
  EngineWorker* worker() const { return m_worker; }

  void loadModel(const QString& path, const EngineLoadOptions& options = {});
  // The options of the last loadModel() call.
  const EngineLoadOptions& lastLoadOptions() const { return m_lastLoadOptions; }
  // Loads `path` again with the last load's options on the CPU (the answer to deviceLoadFailed;
  // the saved settings are not changed).
  void loadOnCpu(const QString& path);
  // Queues a reply and returns its id (the first argument of the signals about it).
  quint64 generate(const GenerationInput& input);
  // Counts the prompt tokens `input` would take with the loaded model's tokenizer and chat
  // template (for the context meter); tokensCounted follows with the returned tag.
  quint64 countTokens(const GenerationInput& input);
  void stop();
  // Queues every prompt of `batch` as its own request, all before the engine's next step so
  // they are served together, and returns their ids in prompt order (the signals about them
  // carry these). The chat's reply (activeRequest) is left as it is; a chat reply started
  // meanwhile simply joins the batch.
  QList<quint64> submitBatch(const BatchInput& batch);
  // Ends these requests at the next step; unknown or finished ids are ignored.
  void stopRequests(const QList<quint64>& requestIds);
  void unload();
  // Per-kernel profiling (off at start): the engine reports each step's kernels, which arrive
  // as profileSnapshotReady. Applies to the loaded model and every later one.
  void setProfiling(bool isEnabled);
  bool isProfiling() const { return m_isProfiling; }
  // Starts a new running aggregate in the profile snapshots; snapshots already on their way
  // from before the reset are dropped, not shown.
  void resetProfile();
  // Asks for a memorySampled now.
  void sampleMemory();
  // Speculative decoding for the chat and every request (applied to later models too);
  // speculationChanged follows with what is in use. speculation() is the last confirmed.
  void setSpeculation(const SpeculationSettings& settings);
  const SpeculationSettings& speculation() const { return m_speculation; }

 signals:
  void modelLoadStarted(const QString& path);
  void modelLoadProgress(double fraction, const QString& stage);
  void modelLoaded(const iwb::ui::LoadedModel& model);
  void modelLoadFailed(const QString& path, const QString& message);
  // Before modelLoadFailed when the load was meant for a CUDA device (EngineWorker's).
  void deviceLoadFailed(const QString& path, const QString& deviceId, const QString& message);
  void modelUnloaded();
  void generationStarted(quint64 requestId, int numPromptTokens);
  void tokensReady(quint64 requestId, const QString& text);
  void tokenProbabilityReady(quint64 requestId, const iwb::ui::TokenProbability& probability);
  // The answer to countTokens: -1 tokens when no model is loaded or the prompt can't be built.
  void tokensCounted(quint64 tag, int numPromptTokens, int contextLength, int numTurnsLeftOut);
  void promptShortened(quint64 requestId, int numTurnsLeftOut);
  void generationFinished(quint64 requestId, const iwb::ui::GenerationStats& stats);
  void generationFailed(quint64 requestId, const QString& message);
  void profilingChanged(bool isEnabled);
  void profileSnapshotReady(const iwb::ProfileSnapshot& snapshot);
  void tokenTimesReady(quint64 requestId, const QList<double>& sessionSeconds);
  void requestMeasured(const iwb::ui::RequestMeasurement& measurement);
  void memorySampled(const iwb::ui::MemorySample& sample);
  void kvSnapshotReady(const iwb::ui::KvMapSnapshot& snapshot);
  void expertLoadReady(const iwb::ExpertLoadSnapshot& snapshot);
  void speculationChanged(const iwb::ui::SpeculationSettings& settings, const QString& error);
  void speculationStepped(const iwb::ui::SpeculationStep& step);
  void speculationMeasured(const iwb::ui::SpeculationReport& report);
  void draftTokensReady(quint64 requestId, const QString& text, bool isDraft);

  // Internal: queued calls into the worker thread.
  void loadRequested(const QString& path, const iwb::ui::EngineLoadOptions& options);
  void generateRequested(quint64 requestId, const iwb::ui::GenerationInput& input);
  void countTokensRequested(quint64 tag, const iwb::ui::GenerationInput& input);
  void batchRequested(const QList<quint64>& requestIds, const iwb::ui::BatchInput& batch);
  void stopRequested(quint64 requestId);
  void unloadRequested();
  void profilingRequested(bool isEnabled);
  void resetProfileRequested(quint64 epoch);
  void memorySampleRequested();
  void speculationRequested(const iwb::ui::SpeculationSettings& settings);

 private:
  void handleRequestEnded(quint64 requestId);

  QThread* m_thread;
  EngineWorker* m_worker;  // lives on m_thread; deleted there when the thread ends
  LoadedModel m_model;
  EngineLoadOptions m_lastLoadOptions;
  int m_numPendingLoads = 0;
  bool m_isLoading = false;
  quint64 m_nextRequest = 1;
  quint64 m_nextCountTag = 1;
  quint64 m_activeRequest = 0;
  bool m_isProfiling = false;
  quint64 m_profileEpoch = 0;  // counts resetProfile() calls
  SpeculationSettings m_speculation;
};

}  // namespace iwb::ui
