// EndpointProbe: the probe itself (models, then /metrics parsed and recognised) and the worker
// thread it runs on. The client's messages name the URL and the transport error; the
// classification only picks the title and the advice around them.
#include "remote/endpoint_probe.h"

#include "iwb/engine/remote/prometheus_text.h"

#include <QCoreApplication>
#include <QDeadlineTimer>
#include <QElapsedTimer>
#include <QRegularExpression>
#include <QThread>

namespace iwb::ui {
namespace {

constexpr int kShutdownWaitMs = 500;

QString tr(const char* text, const char* disambiguation = nullptr, int n = -1) {
  return QCoreApplication::translate("EndpointProbe", text, disambiguation, n);
}

// The HTTP status in a client message ("... answered HTTP 401: ..."), 0 when there is none.
int httpStatusIn(const QString& message) {
  static const QRegularExpression kStatus(QStringLiteral("\\bHTTP (\\d{3})\\b"));
  const QRegularExpressionMatch m = kStatus.match(message);
  return m.hasMatch() ? m.captured(1).toInt() : 0;
}

void describeProblem(ProbeResult& r, const QString& message) {
  using P = ProbeResult::Problem;
  switch (r.problem) {
    case P::Refused:
      r.title = tr("Could not connect");
      r.detail =
          tr("%1\nCheck the address and port, and that the server is running and reachable from here.").arg(message);
      break;
    case P::Timeout:
      r.title = tr("The server did not answer in time");
      r.detail = tr("%1\nThe server may be busy or a firewall may drop the connection.").arg(message);
      break;
    case P::BadApiKey:
      r.title = tr("The server refused the API key");
      r.detail =
          tr("%1\nEnter the key the server was started with (sent as \"Authorization: Bearer …\").").arg(message);
      break;
    case P::NotOpenAi:
      r.title = tr("Not an OpenAI-compatible server");
      r.detail = tr("%1\nThe address answers HTTP but has no OpenAI API at /v1/models. If the API lives under a "
                    "path, include it (for example http://host/api).")
                     .arg(message);
      break;
    case P::Garbage:
      r.title = tr("The server's answer is not an OpenAI model list");
      r.detail = message;
      break;
    case P::HttpError:
      r.title = tr("The server answered with an error");
      r.detail = message;
      break;
    case P::None: break;
  }
}

}  // namespace

ProbeResult::Problem classifyProbeError(const iwb::Status& status) {
  using P = ProbeResult::Problem;
  const QString message = QString::fromStdString(status.message());
  if (status.code() == iwb::ErrorCode::CorruptFile) return P::Garbage;
  const int http = httpStatusIn(message);
  if (http == 401 || http == 403) return P::BadApiKey;
  if (http == 404 || http == 405) return P::NotOpenAi;
  if (http != 0) return P::HttpError;
  if (message.contains(QLatin1String("timed out"), Qt::CaseInsensitive) ||
      message.contains(QLatin1String("timeout"), Qt::CaseInsensitive)) {
    return P::Timeout;
  }
  return P::Refused;  // cannot connect, unknown host, an unusable URL
}

ProbeResult probeEndpoint(const iwb::remote::Endpoint& endpoint) {
  QElapsedTimer timer;
  timer.start();
  ProbeResult r;
  r.baseUrl = QString::fromStdString(endpoint.base_url);
  const iwb::remote::OpenAiClient client(endpoint);
  auto models = client.list_models();
  if (!models) {
    r.problem = classifyProbeError(models.status());
    describeProblem(r, QString::fromStdString(models.error_message()));
    r.seconds = double(timer.nsecsElapsed()) * 1e-9;
    return r;
  }
  for (const std::string& id : *models) r.models << QString::fromStdString(id);

  // The models answered: whatever /metrics does, the server is usable for chat and load.
  r.kind = iwb::remote::ServerKind::OpenAiNoMetrics;
  auto text = client.fetch_metrics_text();
  if (!text) {
    r.metricsNote = text.status().code() == iwb::ErrorCode::NotFound
                        ? tr("no /metrics (HTTP 404)")
                        : tr("/metrics could not be read: %1").arg(QString::fromStdString(text.error_message()));
  } else if (auto families = iwb::remote::parse_prometheus_text(*text); !families) {
    r.metricsNote = tr("/metrics is not Prometheus text (%1)").arg(QString::fromStdString(families.error_message()));
  } else {
    r.kind = iwb::remote::detect_server_kind(*families);
    r.metricsNote =
        r.kind == iwb::remote::ServerKind::OpenAiNoMetrics
            ? tr("/metrics has %n metric families, none from a known engine", nullptr, int(families->size()))
            : tr("/metrics: %n metric families", nullptr, int(families->size()));
  }
  r.seconds = double(timer.nsecsElapsed()) * 1e-9;
  return r;
}

void EndpointProbeWorker::probe(quint64 tag, const QString& baseUrl, const QString& apiKey, double timeoutSeconds) {
  iwb::remote::Endpoint endpoint;
  endpoint.base_url = baseUrl.toStdString();
  endpoint.api_key = apiKey.toStdString();
  endpoint.connect_timeout_seconds = timeoutSeconds;
  endpoint.read_timeout_seconds = timeoutSeconds;
  emit probed(tag, probeEndpoint(endpoint));
}

EndpointProbe::EndpointProbe(QObject* parent)
    : QObject(parent), m_thread(new QThread(this)), m_worker(new EndpointProbeWorker) {
  qRegisterMetaType<iwb::ui::ProbeResult>();
  m_thread->setObjectName(QStringLiteral("iwb-endpoint-probe"));
  m_worker->moveToThread(m_thread);
  connect(m_thread, &QThread::finished, m_worker, &QObject::deleteLater);
  connect(m_worker, &EndpointProbeWorker::probed, this, &EndpointProbe::probed, Qt::QueuedConnection);
  m_thread->start();
}

EndpointProbe::~EndpointProbe() {
  m_thread->quit();
  if (m_thread->wait(QDeadlineTimer(kShutdownWaitMs))) return;  // the worker went with the thread's last events
  // A probe still waits on a silent server (up to its timeouts): closing the window must not
  // wait for it. The thread finishes on its own and then deletes itself; its answer, addressed
  // to this object, is dropped.
  m_thread->setParent(nullptr);
  connect(m_thread, &QThread::finished, m_thread, &QObject::deleteLater);
}

quint64 EndpointProbe::probe(const QString& baseUrl, const QString& apiKey, double timeoutSeconds) {
  const quint64 tag = m_nextTag++;
  QMetaObject::invokeMethod(
      m_worker,
      [worker = m_worker, tag, baseUrl, apiKey, timeoutSeconds] {
        worker->probe(tag, baseUrl, apiKey, timeoutSeconds);
      },
      Qt::QueuedConnection);
  return tag;
}

}  // namespace iwb::ui
