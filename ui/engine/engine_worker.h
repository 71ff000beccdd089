// The engine's home: a QObject that lives on its own QThread, owns the iwb::Engine, and runs
// Engine::step() one queued invocation at a time, so stop requests that arrive between steps
// are seen within one step. Requests come in as queued slot calls; results leave as queued
// signals carrying plain values. Nothing outside this object touches the engine.
#pragma once

#include "engine/generation_values.h"

#include <QHash>
#include <QObject>
#include <QString>

#include <memory>
#include <random>
#include <vector>

namespace iwb {
class Engine;
struct RequestFinished;
}

namespace iwb::ui {

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
  // Ends the reply `requestId` at the next step (generationFinished with "aborted" follows);
  // 0 stops every reply. Unknown or finished ids are ignored.
  void stop(quint64 requestId);
  void unload();

 signals:
  void modelLoadProgress(double fraction, const QString& stage);
  void modelLoaded(const iwb::ui::LoadedModel& model);
  void modelLoadFailed(const QString& path, const QString& message);
  void modelUnloaded();
  void generationStarted(quint64 requestId, int numPromptTokens);
  void tokensReady(quint64 requestId, const QString& text);
  void generationFinished(quint64 requestId, const iwb::ui::GenerationStats& stats);
  void generationFailed(quint64 requestId, const QString& message);

 private:
  void scheduleStep();
  void runStep();
  // generationFinished for each ended request of ours, with its stats.
  void reportFinished(const std::vector<iwb::RequestFinished>& finished);
  // Ends every reply in flight as aborted (the model is going away) and frees the engine.
  void releaseEngine();

  std::unique_ptr<iwb::Engine> m_engine;
  QHash<quint64, quint64> m_requestIds;  // engine RequestId -> caller's requestId
  QHash<quint64, quint64> m_seeds;       // engine RequestId -> seed the sampler got
  bool m_isStepScheduled = false;
  std::mt19937_64 m_seedSource;          // seeds for replies whose settings ask for random
};

}  // namespace iwb::ui
