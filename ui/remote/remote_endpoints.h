// The remote endpoints the user connected to (File › Connect to Server…): base URL, served
// models and the kind of server recognised from its /metrics. Owned by the main window and
// shared by the chat panel (where a conversation runs) and the Serving tab (what to load).
// Lives in the GUI thread; the probing itself runs on a worker (see EndpointProbe).
#pragma once

#include "iwb/engine/remote/openai_client.h"
#include "iwb/engine/remote/server_metrics.h"

#include <QList>
#include <QObject>
#include <QString>
#include <QStringList>

namespace iwb::ui {

struct RemoteEndpointInfo {
  QString baseUrl;          // as the user typed it, normalised (no trailing slash)
  QString displayName;      // "vLLM at gpu-box:8000"
  QStringList models;       // from /v1/models
  iwb::remote::ServerKind kind = iwb::remote::ServerKind::Unknown;
  bool hasApiKey = false;   // the key itself is in the keyring (or memory), never in this struct's copies on disk

  // The engine-side endpoint with its API key filled in (from the keyring or this session).
  iwb::remote::Endpoint endpoint;
};

class RemoteEndpoints : public QObject {
  Q_OBJECT

 public:
  explicit RemoteEndpoints(QObject* parent = nullptr);

  const QList<RemoteEndpointInfo>& endpoints() const { return m_endpoints; }
  // The endpoint with this base URL; nullptr when not connected.
  const RemoteEndpointInfo* find(const QString& baseUrl) const;
  // Adds or replaces (same base URL) and remembers it (without the key) in QSettings.
  void addOrUpdate(const RemoteEndpointInfo& info);
  void remove(const QString& baseUrl);

 signals:
  void endpointsChanged();

 private:
  QList<RemoteEndpointInfo> m_endpoints;
};

}  // namespace iwb::ui
