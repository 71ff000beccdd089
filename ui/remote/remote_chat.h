// A chat reply from a remote endpoint: OpenAiClient::stream on a worker object in its own
// QThread, every content delta delivered by a queued signal, Stop through an atomic flag the
// client polls, and the reply's statistics (TTFT, tokens/s) measured on this side. The
// signals have the shapes of EngineController's, so the chat panel handles both alike.
#pragma once

#include "worker/generation_values.h"

#include <QObject>
#include <QString>

#include <atomic>
#include <memory>

class QThread;

namespace iwb::ui {

struct RemoteEndpointInfo;

// Everything the worker needs for one reply: copies, never pointers into the GUI.
struct RemoteChatInput {
  QString baseUrl;
  QString apiKey;
  QString model;
  QList<ChatTurn> messages;  // optional system turn first, ends with a user turn
  SamplingSettings sampling;
  double connectTimeoutSeconds = 5;
  double readTimeoutSeconds = 120;  // longest silence between two chunks
};

class RemoteChatWorker : public QObject {
  Q_OBJECT
 public:
  // Blocks this (worker) thread until the stream ends, fails or `cancel` becomes true.
  void run(quint64 requestId, const iwb::ui::RemoteChatInput& input, std::shared_ptr<std::atomic<bool>> cancel);

 signals:
  void tokensReady(quint64 requestId, const QString& text);
  // The reply ended: finished, stopped, or broken after some text (stats say which and why).
  void generationFinished(quint64 requestId, const iwb::ui::GenerationStats& stats);
  // Nothing came back: refused, a bad key, an HTTP error before the first token.
  void generationFailed(quint64 requestId, const QString& message);
};

class RemoteChat : public QObject {
  Q_OBJECT

 public:
  explicit RemoteChat(QObject* parent = nullptr);
  ~RemoteChat() override;

  // Starts a reply of `model` at `endpoint` to `input`'s conversation and sampling; returns its
  // request id (distinct from the local engine's ids).
  quint64 generate(const RemoteEndpointInfo& endpoint, const QString& model, const GenerationInput& input);
  // Asks the reply in flight to stop; it ends with "aborted" and the text so far.
  void stop();
  bool isGenerating() const { return m_currentId != 0; }
  // The longest silence a reply may have (tests shorten it).
  void setReadTimeout(double seconds) { m_readTimeoutSeconds = seconds; }

 signals:
  void tokensReady(quint64 requestId, const QString& text);
  void generationFinished(quint64 requestId, const iwb::ui::GenerationStats& stats);
  void generationFailed(quint64 requestId, const QString& message);

 private:
  QThread* m_thread;
  RemoteChatWorker* m_worker;
  std::shared_ptr<std::atomic<bool>> m_cancel;
  quint64 m_nextId = 1;
  quint64 m_currentId = 0;
  double m_readTimeoutSeconds = 120;
};

}  // namespace iwb::ui
