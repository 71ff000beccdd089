// The engine's home: a QObject that lives on its own QThread, owns the iwb::Engine, and runs
// Engine::step() one queued invocation at a time, so stop requests that arrive between steps
// are seen within one step. Requests come in as queued slot calls (several at once are served
// together by the engine; each is routed by the caller's id); results leave as queued
// signals carrying plain values. Nothing outside this object touches the engine. While
// profiling is on, each step's kernel records are folded into snapshots sent at most ten times
// a second; token times, memory samples and KV-cache map snapshots are decimated the same way.
#pragma once

#include "iwb/engine/serve/serve_router.h"
#include "worker/expert_load_values.h"
#include "worker/generation_values.h"
#include "worker/kv_map_values.h"
#include "worker/measurement_values.h"
#include "worker/spec_values.h"
#include "worker/worker_measurements.h"
#include "worker/worker_requests.h"

#include <QHash>
#include <QObject>
#include <QString>

#include <memory>
#include <random>
#include <vector>

namespace iwb {
class Engine;
struct RequestFinished;
struct StepResult;
}

namespace iwb::ui {

class WorkerServeCore;

class EngineWorker : public QObject {
  Q_OBJECT

 public:
  explicit EngineWorker(QObject* parent = nullptr);
  ~EngineWorker() override;

 public slots:
  // Frees the current model (finishing its replies as aborted), then loads `path`.
  // Emits modelLoadProgress while it reads, then modelLoaded or modelLoadFailed.
  void loadModel(const QString& path, const iwb::ui::EngineLoadOptions& options);
  // Renders and tokenizes the conversation, queues it, and starts stepping. `requestId` is
  // the caller's name for this reply; every later signal about it carries it. Emits
  // generationStarted then tokensReady... and generationFinished, or generationFailed alone.
  void generate(quint64 requestId, const iwb::ui::GenerationInput& input);
  // Queues every prompt of `batch` as its own request (requestIds[i] names prompt i), all before
  // the next step, so the engine serves them together; each gets the signals generate() gives.
  void submitBatch(const QList<quint64>& requestIds, const iwb::ui::BatchInput& batch);
  // Ends the reply `requestId` at the next step (generationFinished with "aborted" follows);
  // 0 stops every reply. Unknown or finished ids are ignored.
  void stop(quint64 requestId);
  // Renders and tokenizes the conversation as generate() would, without queueing it, and emits
  // tokensCounted(tag, its prompt tokens, the context length); -1 tokens without a model.
  void countTokens(quint64 tag, const iwb::ui::GenerationInput& input);
  void unload();
  // Per-kernel profiling on the engine (now, and for every model loaded later).
  void setProfiling(bool isEnabled);
  // Forgets the running aggregate and the last steps of the profile snapshots; the snapshots
  // after it carry `epoch`, so the GUI can drop ones that were already on their way.
  void resetProfile(quint64 epoch);
  // Emits memorySampled now.
  void sampleMemory();
  // Speculative decoding for the loaded model and every later one (engine_worker_spec.cpp):
  // builds the drafter (seconds for a draft model or a self-draft), then speculationChanged.
  void setSpeculation(const iwb::ui::SpeculationSettings& settings);

 public:
  // Serving (engine_worker_serve.cpp): the local HTTP server's requests run in this engine
  // beside the chat. WorkerServeCore posts these to the worker's thread; call them only there.
  // `core` (null: no server) learns which model is open and sees every step for its metrics.
  void setServeCore(std::shared_ptr<WorkerServeCore> core);
  iwb::Result<iwb::serve::Submission> submitServed(std::vector<iwb::GenerationRequest> requests,
                                                  std::shared_ptr<iwb::serve::ResponseChannel> channel);
  void abortServed(const std::vector<iwb::RequestId>& requests);

 signals:
  void modelLoadProgress(double fraction, const QString& stage);
  void modelLoaded(const iwb::ui::LoadedModel& model);
  void modelLoadFailed(const QString& path, const QString& message);
  // Right before modelLoadFailed when the load was meant for a CUDA device (named, or the one
  // "auto" picked): `deviceId` is that device ("cuda:0"), so the GUI can offer the CPU.
  void deviceLoadFailed(const QString& path, const QString& deviceId, const QString& message);
  void modelUnloaded();
  void generationStarted(quint64 requestId, int numPromptTokens);
  void tokensReady(quint64 requestId, const QString& text);
  // When the request asked for numTopAlternatives: right before the tokensReady of the text it
  // belongs to (the last token of that text, when several tokens made one character).
  void tokenProbabilityReady(quint64 requestId, const iwb::ui::TokenProbability& probability);
  void generationFinished(quint64 requestId, const iwb::ui::GenerationStats& stats);
  void generationFailed(quint64 requestId, const QString& message);
  void tokensCounted(quint64 tag, int numPromptTokens, int contextLength, int numTurnsLeftOut);
  // Before generationStarted when the prompt left out the oldest turns (fitReserveTokens).
  void promptShortened(quint64 requestId, int numTurnsLeftOut);
  // At most ~10 a second while profiling, and once when the engine falls idle; `epoch` is
  // that of the last resetProfile().
  void profileSnapshotReady(const iwb::ProfileSnapshot& snapshot, quint64 epoch);
  // Session-clock times (seconds since the worker started) of tokens generated since the last
  // report of this request; emitted at most ~10 times a second, the rest before the reply ends.
  void tokenTimesReady(quint64 requestId, const QList<double>& sessionSeconds);
  // Before generationFinished of a reply that generated or failed normally.
  void requestMeasured(const iwb::ui::RequestMeasurement& measurement);
  // After a load or unload, every ~0.5 s while generating, and when a reply ends.
  void memorySampled(const iwb::ui::MemorySample& sample);
  // The paged KV cache for the block map: after a load, at most ~7 a second while generating
  // (the first step after idle at once), once when the engine falls idle, and empty on unload.
  void kvSnapshotReady(const iwb::ui::KvMapSnapshot& snapshot);
  // Tokens routed to each expert of each layer over the engine's last steps, sent with every
  // KV snapshot (num_experts 0 for a dense model or none loaded).
  void expertLoadReady(const iwb::ExpertLoadSnapshot& snapshot);
  // The settings now in use (`error` says why the requested ones were not taken).
  void speculationChanged(const iwb::ui::SpeculationSettings& settings, const QString& error);
  // Every step that verified drafts; and a report for each finished request while a drafter is set.
  void speculationStepped(const iwb::ui::SpeculationStep& step);
  void speculationMeasured(const iwb::ui::SpeculationReport& report);
  // While a drafter is set: each token's text and whether it was an accepted draft token,
  // emitted right before the tokensReady of the same token (the chat colours by it).
  void draftTokensReady(quint64 requestId, const QString& text, bool isDraft);

 private:
  // Builds the prompt of `input`, queues it in the engine and emits generationStarted (or
  // generationFailed); the caller schedules the step. False when it was refused.
  bool queueRequest(quint64 requestId, const iwb::ui::GenerationInput& input);
  // A token's probability and its alternatives as text (the tokenizer decodes each).
  TokenProbability tokenProbabilityOf(const iwb::TokenEvent& token) const;
  void scheduleStep();
  void runStep();
  // generationFinished for each ended request of ours, with its stats.
  void reportFinished(const std::vector<iwb::RequestFinished>& finished);
  // Ends every reply in flight as aborted (the model is going away) and frees the engine.
  void releaseEngine();
  // Speculation (engine_worker_spec.cpp): the settings applied to a new engine; the step's
  // and the finished requests' statistics as signals.
  void applySpeculation();
  // Tells the server's core which model is open (none without an engine).
  void publishServedModel();
  // A step's tokens and ends to the served requests' channels, and the step to the metrics.
  void dispatchServed(const iwb::StepResult& result);
  void reportSpeculation(const iwb::StepResult& result);
  void reportSpeculationFinished(const iwb::RequestFinished& finished, const WorkerRequests::Entry& entry);

  // Measurements (engine_worker_measurements.cpp): WorkerMeasurements' values emitted.
  void collectStepMeasurements(const iwb::StepResult& result);
  // When the engine falls idle, sends what is held back: pending token times, the last
  // profile snapshot, a memory sample.
  void flushMeasurements();
  void reportMeasurement(const iwb::RequestFinished& finished, const WorkerRequests::Entry& entry);
  void emitMemorySample();
  // kvSnapshotReady now (an empty one without an engine).
  void emitKvSnapshot(bool isIdle);

  std::unique_ptr<iwb::Engine> m_engine;
  WorkerRequests m_requests;             // the requests of ours in the engine
  bool m_isStepScheduled = false;
  std::mt19937_64 m_seedSource;          // seeds for replies whose settings ask for random
  bool m_isProfiling = false;
  WorkerMeasurements m_measurements;
  SpeculationSettings m_specSettings;    // applied to every engine loaded

  // Serving (engine_worker_serve.cpp).
  std::shared_ptr<WorkerServeCore> m_serveCore;  // the local server's core while it runs
  iwb::serve::ServeRouter m_serveRouter;         // served requests in the engine, and their channels
};

}  // namespace iwb::ui
