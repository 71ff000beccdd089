// RemoteEndpoints: the list of connected servers, remembered in QSettings with everything but
// the API key (that goes to ApiKeyStore), and the labels the chat and the Serving tab show.
#include "remote/remote_endpoints.h"

#include "remote/endpoint_probe.h"

#include <QSettings>
#include <QUrl>

namespace iwb::ui {
namespace {

using iwb::remote::ServerKind;

// Stable words for the settings file (the enum's numbers could move).
const struct {
  ServerKind kind;
  const char* token;
} kKindTokens[] = {
    {ServerKind::Unknown, "unknown"}, {ServerKind::Iwb, "iwb"},           {ServerKind::Vllm, "vllm"},
    {ServerKind::Sglang, "sglang"},   {ServerKind::LlamaCpp, "llamacpp"}, {ServerKind::OpenAiNoMetrics, "openai"},
};

QString kindToken(ServerKind kind) {
  for (const auto& k : kKindTokens)
    if (k.kind == kind) return QLatin1String(k.token);
  return QStringLiteral("unknown");
}

ServerKind kindFromToken(const QString& token) {
  for (const auto& k : kKindTokens)
    if (token == QLatin1String(k.token)) return k.kind;
  return ServerKind::Unknown;
}

}  // namespace

RemoteEndpoints::RemoteEndpoints(QObject* parent) : RemoteEndpoints(ApiKeyStore::Mode::Keyring, parent) {}

RemoteEndpoints::RemoteEndpoints(ApiKeyStore::Mode keyMode, QObject* parent)
    : QObject(parent), m_keys(new ApiKeyStore(keyMode, this)) {
  connect(m_keys, &ApiKeyStore::loaded, this, &RemoteEndpoints::setApiKey);
  load();
}

EndpointProbe* RemoteEndpoints::endpointProbe() {
  if (!m_probe) m_probe = new EndpointProbe(this);
  return m_probe;
}

QString RemoteEndpoints::settingsKey() { return QStringLiteral("remote/endpoints"); }

QString RemoteEndpoints::normalizedBaseUrl(const QString& typed, QString* why) {
  QString text = typed.trimmed();
  if (text.isEmpty()) {
    if (why) *why = tr("Type the server's address, for example http://gpu-box:8000");
    return {};
  }
  if (!text.contains(QLatin1String("://"))) text.prepend(QLatin1String("http://"));
  while (text.endsWith(QLatin1Char('/'))) text.chop(1);
  const QUrl url(text, QUrl::StrictMode);
  const QString scheme = url.scheme().toLower();
  if (!url.isValid() || url.host().isEmpty() || (scheme != QLatin1String("http") && scheme != QLatin1String("https"))) {
    if (why) *why = tr("\"%1\" is not an http:// or https:// address with a host name").arg(typed.trimmed());
    return {};
  }
  if (!url.query().isEmpty() || !url.fragment().isEmpty()) {
    if (why) *why = tr("The address should end at the server (or its /v1), without ? or #");
    return {};
  }
  return text;
}

QString RemoteEndpoints::hostLabel(const QString& baseUrl) {
  const QUrl url(baseUrl);
  if (url.host().isEmpty()) return baseUrl;
  return url.port() > 0 ? QStringLiteral("%1:%2").arg(url.host()).arg(url.port()) : url.host();
}

QString RemoteEndpoints::ranOnLabel(const QString& baseUrl, const QString& model) {
  return model.isEmpty() ? hostLabel(baseUrl) : QStringLiteral("%1 · %2").arg(hostLabel(baseUrl), model);
}

const RemoteEndpointInfo* RemoteEndpoints::find(const QString& baseUrl) const {
  for (const RemoteEndpointInfo& info : m_endpoints)
    if (info.baseUrl == baseUrl) return &info;
  return nullptr;
}

void RemoteEndpoints::addOrUpdate(const RemoteEndpointInfo& info) {
  RemoteEndpointInfo copy = info;
  copy.endpoint.base_url = copy.baseUrl.toStdString();
  bool isReplaced = false;
  for (RemoteEndpointInfo& existing : m_endpoints) {
    if (existing.baseUrl == copy.baseUrl) {
      existing = copy;
      isReplaced = true;
    }
  }
  if (!isReplaced) m_endpoints.append(copy);
  save();
  emit endpointsChanged();
}

void RemoteEndpoints::remove(const QString& baseUrl) {
  const auto removed = m_endpoints.removeIf([&](const RemoteEndpointInfo& i) { return i.baseUrl == baseUrl; });
  if (removed == 0) return;
  m_keys->remove(baseUrl);
  save();
  emit endpointsChanged();
}

void RemoteEndpoints::setApiKey(const QString& baseUrl, const QString& key) {
  for (RemoteEndpointInfo& info : m_endpoints) {
    if (info.baseUrl != baseUrl) continue;
    info.endpoint.api_key = key.toStdString();
    emit endpointsChanged();
  }
}

void RemoteEndpoints::restoreApiKeys() {
  for (const RemoteEndpointInfo& info : std::as_const(m_endpoints))
    if (info.hasApiKey && info.endpoint.api_key.empty()) m_keys->load(info.baseUrl);
}

void RemoteEndpoints::load() {
  QSettings settings;
  const int count = settings.beginReadArray(settingsKey());
  for (int i = 0; i < count; ++i) {
    settings.setArrayIndex(i);
    RemoteEndpointInfo info;
    info.baseUrl = normalizedBaseUrl(settings.value(QStringLiteral("baseUrl")).toString());
    if (info.baseUrl.isEmpty() || find(info.baseUrl)) continue;  // a hand-edited or duplicated entry
    info.displayName = settings.value(QStringLiteral("displayName")).toString();
    info.models = settings.value(QStringLiteral("models")).toStringList();
    info.defaultModel = settings.value(QStringLiteral("defaultModel")).toString();
    info.kind = kindFromToken(settings.value(QStringLiteral("kind")).toString());
    info.hasApiKey = settings.value(QStringLiteral("hasApiKey"), false).toBool();
    info.endpoint.base_url = info.baseUrl.toStdString();
    if (info.displayName.isEmpty()) info.displayName = hostLabel(info.baseUrl);
    m_endpoints.append(info);
  }
  settings.endArray();
}

void RemoteEndpoints::save() const {
  QSettings settings;
  settings.remove(settingsKey());  // a shorter list leaves no stale entries behind
  settings.beginWriteArray(settingsKey(), static_cast<int>(m_endpoints.size()));
  for (int i = 0; i < m_endpoints.size(); ++i) {
    const RemoteEndpointInfo& info = m_endpoints.at(i);
    settings.setArrayIndex(i);
    settings.setValue(QStringLiteral("baseUrl"), info.baseUrl);
    settings.setValue(QStringLiteral("displayName"), info.displayName);
    settings.setValue(QStringLiteral("models"), info.models);
    settings.setValue(QStringLiteral("defaultModel"), info.defaultModel);
    settings.setValue(QStringLiteral("kind"), kindToken(info.kind));
    // Whether to ask the keyring at the next start; the key itself never goes here.
    settings.setValue(QStringLiteral("hasApiKey"), info.hasApiKey);
  }
  settings.endArray();
}

}  // namespace iwb::ui
