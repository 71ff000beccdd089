// LocalServer: the worker learns of the server's core first (queued, so it runs between
// steps), then the HTTP server binds and listens on a thread of its own.
#include "serve/local_server.h"

#include "worker/engine_controller.h"
#include "worker/engine_worker.h"
#include "iwb/engine/serve/http_server.h"
#include "serve/worker_serve_core.h"

#include <QMetaObject>

namespace iwb::ui {

LocalServer::LocalServer(EngineController* engine, QObject* parent) : QObject(parent), m_engine(engine) {
  qRegisterMetaType<iwb::ui::RequestLogRow>();
}

LocalServer::~LocalServer() { stop(); }

bool LocalServer::isExposed(const QString& host) { return !iwb::serve::is_loopback_host(host.toStdString()); }

QString LocalServer::baseUrl() const {
  if (!isRunning()) return {};
  return QStringLiteral("http://%1:%2/v1").arg(m_settings.host).arg(m_port);
}

QString LocalServer::start(const ServerSettings& settings) {
  stop();
  EngineWorker* worker = m_engine->worker();
  auto core = std::make_shared<WorkerServeCore>(worker, settings.modelAlias.toStdString());
  QMetaObject::invokeMethod(worker, [worker, core] { worker->setServeCore(core); }, Qt::QueuedConnection);

  iwb::serve::ServeOptions options;
  options.host = settings.host.toStdString();
  options.port = settings.port;
  options.api_key = settings.apiKey.toStdString();
  auto http = std::make_unique<iwb::serve::HttpServer>(*core, core->metrics(), options);
  // From HTTP threads: a queued call into this object (dropped if it is gone by then).
  http->set_request_log([this](const iwb::serve::RequestLogEntry& e) {
    RequestLogRow row;
    row.time = QDateTime::currentDateTime();
    row.client = QString::fromStdString(e.remote_address);
    row.method = QString::fromStdString(e.method);
    row.path = QString::fromStdString(e.path);
    row.status = e.status;
    row.numPromptTokens = e.num_prompt_tokens;
    row.numGeneratedTokens = e.num_generated_tokens;
    row.seconds = e.seconds;
    row.outcome = QString::fromStdString(e.outcome);
    QMetaObject::invokeMethod(this, [this, row] { emit requestLogged(row); }, Qt::QueuedConnection);
  });
  iwb::Result<int> port = http->bind();
  if (!port) {
    QMetaObject::invokeMethod(worker, [worker] { worker->setServeCore(nullptr); }, Qt::QueuedConnection);
    return QString::fromStdString(port.error_message());
  }
  m_port = *port;
  m_settings = settings;
  m_core = std::move(core);
  m_http = std::move(http);
  iwb::serve::HttpServer* server = m_http.get();
  m_listenThread = std::thread([server] { (void)server->listen(); });
  emit runningChanged(true);
  return {};
}

void LocalServer::stop() {
  if (!m_http) return;
  m_http->stop();
  if (m_listenThread.joinable()) m_listenThread.join();
  m_http.reset();
  EngineWorker* worker = m_engine->worker();
  QMetaObject::invokeMethod(worker, [worker] { worker->setServeCore(nullptr); }, Qt::QueuedConnection);
  m_core.reset();
  m_port = 0;
  emit runningChanged(false);
}

iwb::serve::ServeMetricValues LocalServer::metricValues() const {
  return m_core ? m_core->metrics().values() : iwb::serve::ServeMetricValues{};
}

}  // namespace iwb::ui
