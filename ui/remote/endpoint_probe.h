// Probing a server before it is added: GET /v1/models and GET /metrics on a worker thread, the
// answer (models, kind of server) or what went wrong, classified for a person (refused,
// timeout, bad key, not an OpenAI server, garbage), delivered as a value by a queued signal.
#pragma once

#include "iwb/engine/remote/openai_client.h"
#include "iwb/engine/remote/server_metrics.h"
#include "iwb/engine/status.h"

#include <QMetaType>
#include <QObject>
#include <QString>
#include <QStringList>

class QThread;

namespace iwb::ui {

struct ProbeResult {
  enum class Problem {
    None,
    Refused,    // nothing listening, host unknown
    Timeout,    // no answer in time
    BadApiKey,  // 401 / 403
    NotOpenAi,  // answers HTTP, but /v1/models is missing or not the OpenAI shape
    Garbage,    // /v1/models answered with something that is not JSON
    HttpError,  // another non-2xx status
  };

  QString baseUrl;
  Problem problem = Problem::None;
  QString title;   // one line for the dialog ("Connection refused")
  QString detail;  // what the client said, and what to try
  QStringList models;
  iwb::remote::ServerKind kind = iwb::remote::ServerKind::Unknown;
  QString metricsNote;  // "/metrics: 38 metric families", "no /metrics (404)", "garbage /metrics: ..."
  double seconds = 0;   // how long the probe took

  bool isOk() const { return problem == Problem::None; }
};

// What a failed list_models() means for a person; exposed for tests.
ProbeResult::Problem classifyProbeError(const iwb::Status& status);
// The whole probe, blocking (call it on a worker thread).
ProbeResult probeEndpoint(const iwb::remote::Endpoint& endpoint);

class EndpointProbeWorker : public QObject {
  Q_OBJECT
 public slots:
  void probe(quint64 tag, const QString& baseUrl, const QString& apiKey, double timeoutSeconds);
 signals:
  void probed(quint64 tag, const iwb::ui::ProbeResult& result);
};

// GUI-thread side: owns the worker thread. Outlives the dialog that asked (the main window's
// RemoteEndpoints holds it), so closing the dialog mid-probe neither blocks nor crashes.
class EndpointProbe : public QObject {
  Q_OBJECT

 public:
  explicit EndpointProbe(QObject* parent = nullptr);
  ~EndpointProbe() override;

  // Starts a probe and returns its tag; `probed` carries the same tag.
  quint64 probe(const QString& baseUrl, const QString& apiKey, double timeoutSeconds = 10);

 signals:
  void probed(quint64 tag, const iwb::ui::ProbeResult& result);

 private:
  QThread* m_thread;
  EndpointProbeWorker* m_worker;
  quint64 m_nextTag = 1;
};

}  // namespace iwb::ui

Q_DECLARE_METATYPE(iwb::ui::ProbeResult)
