// The application's local server: the OpenAI-compatible API (engine/serve's HttpServer) over
// the model open in the workbench, served by the same engine worker as the chat. Lives on the
// GUI thread; HTTP threads report each answered request as requestLogged (queued). Stopping
// ends the streams in flight (their requests are aborted) and joins the server's threads.
#pragma once

#include "iwb/engine/serve/serve_metrics.h"

#include <QDateTime>
#include <QMetaType>
#include <QObject>
#include <QString>

#include <memory>
#include <thread>

namespace iwb::serve {
class HttpServer;
}

namespace iwb::ui {

class EngineController;
class WorkerServeCore;

struct ServerSettings {
  QString host = QStringLiteral("127.0.0.1");
  int port = 8080;  // 0: any free port (port() says which)
  QString apiKey;
  QString modelAlias;  // the model id clients see; empty: the file name
};

// One answered HTTP request.
struct RequestLogRow {
  QDateTime time;
  QString client;
  QString method;
  QString path;
  int status = 0;
  int numPromptTokens = 0;
  int numGeneratedTokens = 0;
  double seconds = 0;
  QString outcome;  // "done", "disconnected", or the error message
};

class LocalServer : public QObject {
  Q_OBJECT

 public:
  explicit LocalServer(EngineController* engine, QObject* parent = nullptr);
  ~LocalServer() override;  // stop()

  // Binds and starts serving; an empty string, or why it could not (address in use...).
  QString start(const ServerSettings& settings);
  void stop();
  bool isRunning() const { return m_http != nullptr; }
  int port() const { return m_port; }
  // "http://127.0.0.1:8080/v1" while running.
  QString baseUrl() const;
  // The metrics of this run (zeros when stopped).
  iwb::serve::ServeMetricValues metricValues() const;
  // True for an address other machines can reach (the panel warns when it has no API key).
  static bool isExposed(const QString& host);

 signals:
  void requestLogged(const iwb::ui::RequestLogRow& row);
  void runningChanged(bool isRunning);

 private:
  EngineController* m_engine;
  std::shared_ptr<WorkerServeCore> m_core;
  std::unique_ptr<iwb::serve::HttpServer> m_http;
  std::thread m_listenThread;
  ServerSettings m_settings;
  int m_port = 0;
};

}  // namespace iwb::ui

Q_DECLARE_METATYPE(iwb::ui::RequestLogRow)
