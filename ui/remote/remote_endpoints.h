// The remote endpoints the user connected to (File › Connect to Server…): base URL, served
// models and the kind of server recognised from its /metrics. Owned by the main window and
// shared by the chat panel (where a conversation runs) and the Serving tab (what to load).
// Lives in the GUI thread; the probing itself runs on a worker (see EndpointProbe).
#pragma once

#include "iwb/engine/remote/openai_client.h"
#include "iwb/engine/remote/server_metrics.h"
#include "remote/api_key_store.h"

#include <QList>
#include <QObject>
#include <QString>
#include <QStringList>

namespace iwb::ui {

class EndpointProbe;

struct RemoteEndpointInfo {
  QString baseUrl;       // as the user typed it, normalised (no trailing slash)
  QString displayName;   // "vLLM at gpu-box:8000"
  QStringList models;    // from /v1/models
  QString defaultModel;  // the one picked in the dialog (first in the chat's "Runs on" list)
  iwb::remote::ServerKind kind = iwb::remote::ServerKind::Unknown;
  bool hasApiKey = false;  // the key itself is in the keyring (or memory), never in this struct's copies on disk

  // The engine-side endpoint with its API key filled in (from the keyring or this session).
  iwb::remote::Endpoint endpoint;
};

class RemoteEndpoints : public QObject {
  Q_OBJECT

 public:
  // Reads the endpoints remembered in QSettings (without keys). Keys come from `keyMode`'s
  // store: call restoreApiKeys() to fill them in from the keyring.
  explicit RemoteEndpoints(QObject* parent = nullptr);
  explicit RemoteEndpoints(ApiKeyStore::Mode keyMode, QObject* parent = nullptr);

  ApiKeyStore* apiKeys() const { return m_keys; }
  // Probes servers on its own thread (created on first use, lives as long as this registry).
  EndpointProbe* endpointProbe();
  // Asks the key store for the key of every remembered endpoint that had one; each arrives
  // asynchronously (endpointsChanged when it does).
  void restoreApiKeys();
  // Sets the key of a connected endpoint for this session (the key store keeps it elsewhere).
  void setApiKey(const QString& baseUrl, const QString& key);

  // "http://gpu-box:8000" from what a user types ("gpu-box:8000/", "https://h/v1"); empty with
  // `*why` set when it is not an http(s) URL with a host.
  static QString normalizedBaseUrl(const QString& typed, QString* why = nullptr);
  // "gpu-box:8000": host and port, for labels.
  static QString hostLabel(const QString& baseUrl);
  // Where a reply ran, as stored with it: "gpu-box:8000 · Qwen3-8B".
  static QString ranOnLabel(const QString& baseUrl, const QString& model);
  // QSettings array holding the endpoints.
  static QString settingsKey();

  const QList<RemoteEndpointInfo>& endpoints() const { return m_endpoints; }
  // The endpoint with this base URL; nullptr when not connected.
  const RemoteEndpointInfo* find(const QString& baseUrl) const;
  // Adds or replaces (same base URL) and remembers it (without the key) in QSettings.
  void addOrUpdate(const RemoteEndpointInfo& info);
  void remove(const QString& baseUrl);

 signals:
  void endpointsChanged();

 private:
  void load();
  void save() const;

  ApiKeyStore* m_keys;
  EndpointProbe* m_probe = nullptr;
  QList<RemoteEndpointInfo> m_endpoints;
};

}  // namespace iwb::ui
