// Issue 16, the registry of connected servers and their API keys: addresses normalised, the
// list remembered in QSettings and read back by a new registry without the key ever reaching
// the settings file, the key store's session fallback (forced, and when no keyring answers),
// and how probe failures are classified for the Connect dialog.
#include "remote/api_key_store.h"
#include "remote/endpoint_probe.h"
#include "remote/remote_endpoints.h"

#include <QFile>
#include <QSettings>
#include <QSignalSpy>
#include <QStandardPaths>
#include <QTemporaryDir>
#include <QTest>

using namespace iwb::ui;
using iwb::remote::ServerKind;

namespace {

constexpr int kTimeoutMs = 30000;
const QString kSecret = QStringLiteral("sk-test-4b1d9e0c-never-on-disk");

RemoteEndpointInfo sampleEndpoint(const QString& baseUrl, bool hasKey) {
  RemoteEndpointInfo info;
  info.baseUrl = baseUrl;
  info.displayName = QStringLiteral("vLLM at %1").arg(RemoteEndpoints::hostLabel(baseUrl));
  info.models = {QStringLiteral("Qwen3-8B"), QStringLiteral("Qwen3-0.6B")};
  info.defaultModel = QStringLiteral("Qwen3-0.6B");
  info.kind = ServerKind::Vllm;
  info.hasApiKey = hasKey;
  info.endpoint.api_key = hasKey ? kSecret.toStdString() : std::string();
  return info;
}

QByteArray settingsFileText() {
  QSettings().sync();
  QFile file(QSettings().fileName());
  return file.open(QIODevice::ReadOnly) ? file.readAll() : QByteArray();
}

}  // namespace

class TestRemoteEndpoints : public QObject {
  Q_OBJECT

 private slots:
  void initTestCase();
  void init();
  void normalisesAddresses();
  void labels();
  void remembersEndpointsWithoutTheKey();
  void replacesAndRemoves();
  void sessionOnlyKeyStore();
  void keyringAbsentFallsBackToSession();
  void restoresKeysIntoEndpoints();
  void classifiesProbeErrors();

 private:
  QTemporaryDir m_dir;
};

void TestRemoteEndpoints::initTestCase() {
  QVERIFY(m_dir.isValid());
  QSettings::setDefaultFormat(QSettings::IniFormat);
  QSettings::setPath(QSettings::IniFormat, QSettings::UserScope, m_dir.filePath(QStringLiteral("settings")));
  QCoreApplication::setOrganizationName(QStringLiteral("Inference Workbench Tests"));
  QCoreApplication::setApplicationName(QStringLiteral("test_remote_endpoints"));
  QStandardPaths::setTestModeEnabled(true);
}

void TestRemoteEndpoints::init() { QSettings().clear(); }

void TestRemoteEndpoints::normalisesAddresses() {
  QString why;
  QCOMPARE(RemoteEndpoints::normalizedBaseUrl(QStringLiteral("  gpu-box:8000/ ")),
           QStringLiteral("http://gpu-box:8000"));
  QCOMPARE(RemoteEndpoints::normalizedBaseUrl(QStringLiteral("https://api.example.com/v1/")),
           QStringLiteral("https://api.example.com/v1"));
  QCOMPARE(RemoteEndpoints::normalizedBaseUrl(QStringLiteral("http://127.0.0.1:30000")),
           QStringLiteral("http://127.0.0.1:30000"));
  QVERIFY(RemoteEndpoints::normalizedBaseUrl(QString(), &why).isEmpty());
  QVERIFY(!why.isEmpty());
  why.clear();
  QVERIFY(RemoteEndpoints::normalizedBaseUrl(QStringLiteral("ftp://host/models"), &why).isEmpty());
  QVERIFY2(why.contains(QLatin1String("http")), qPrintable(why));
  QVERIFY(RemoteEndpoints::normalizedBaseUrl(QStringLiteral("http://host:8000/?q=1"), &why).isEmpty());
  QVERIFY(RemoteEndpoints::normalizedBaseUrl(QStringLiteral("http://"), &why).isEmpty());
}

void TestRemoteEndpoints::labels() {
  QCOMPARE(RemoteEndpoints::hostLabel(QStringLiteral("http://gpu-box:8000")), QStringLiteral("gpu-box:8000"));
  QCOMPARE(RemoteEndpoints::hostLabel(QStringLiteral("https://api.example.com/v1")), QStringLiteral("api.example.com"));
  QCOMPARE(RemoteEndpoints::ranOnLabel(QStringLiteral("http://gpu-box:8000"), QStringLiteral("Qwen3-8B")),
           QStringLiteral("gpu-box:8000 · Qwen3-8B"));
}

void TestRemoteEndpoints::remembersEndpointsWithoutTheKey() {
  {
    RemoteEndpoints endpoints(ApiKeyStore::Mode::SessionOnly);
    QSignalSpy changed(&endpoints, &RemoteEndpoints::endpointsChanged);
    endpoints.addOrUpdate(sampleEndpoint(QStringLiteral("http://gpu-box:8000"), true));
    endpoints.addOrUpdate(sampleEndpoint(QStringLiteral("http://other:30000"), false));
    QCOMPARE(changed.count(), 2);
    QCOMPARE(endpoints.endpoints().size(), 2);
    const RemoteEndpointInfo* found = endpoints.find(QStringLiteral("http://gpu-box:8000"));
    QVERIFY(found);
    QCOMPARE(QString::fromStdString(found->endpoint.api_key), kSecret);
    QCOMPARE(QString::fromStdString(found->endpoint.base_url), QStringLiteral("http://gpu-box:8000"));
    QVERIFY(!endpoints.find(QStringLiteral("http://nowhere:1")));
  }
  const QByteArray onDisk = settingsFileText();
  QVERIFY2(onDisk.contains("gpu-box:8000"), onDisk.constData());
  QVERIFY2(!onDisk.contains(kSecret.toUtf8()), "the API key reached the settings file");

  RemoteEndpoints again(ApiKeyStore::Mode::SessionOnly);
  QCOMPARE(again.endpoints().size(), 2);
  const RemoteEndpointInfo& first = again.endpoints().at(0);
  QCOMPARE(first.baseUrl, QStringLiteral("http://gpu-box:8000"));
  QCOMPARE(first.displayName, QStringLiteral("vLLM at gpu-box:8000"));
  QCOMPARE(first.models, (QStringList{QStringLiteral("Qwen3-8B"), QStringLiteral("Qwen3-0.6B")}));
  QCOMPARE(first.defaultModel, QStringLiteral("Qwen3-0.6B"));
  QCOMPARE(first.kind, ServerKind::Vllm);
  QVERIFY(first.hasApiKey);                 // remembered that there is one...
  QVERIFY(first.endpoint.api_key.empty());  // ...but not what it is
  QCOMPARE(QString::fromStdString(first.endpoint.base_url), first.baseUrl);
  QVERIFY(!again.endpoints().at(1).hasApiKey);
}

void TestRemoteEndpoints::replacesAndRemoves() {
  RemoteEndpoints endpoints(ApiKeyStore::Mode::SessionOnly);
  endpoints.addOrUpdate(sampleEndpoint(QStringLiteral("http://a:1"), false));
  endpoints.addOrUpdate(sampleEndpoint(QStringLiteral("http://b:2"), false));
  RemoteEndpointInfo changed = sampleEndpoint(QStringLiteral("http://a:1"), false);
  changed.models = {QStringLiteral("only-one")};
  changed.kind = ServerKind::Sglang;
  endpoints.addOrUpdate(changed);
  QCOMPARE(endpoints.endpoints().size(), 2);  // replaced, not added
  QCOMPARE(endpoints.find(QStringLiteral("http://a:1"))->kind, ServerKind::Sglang);
  endpoints.remove(QStringLiteral("http://a:1"));
  QCOMPARE(endpoints.endpoints().size(), 1);
  RemoteEndpoints reread(ApiKeyStore::Mode::SessionOnly);
  QCOMPARE(reread.endpoints().size(), 1);  // the shorter list left nothing stale behind
  QCOMPARE(reread.endpoints().at(0).baseUrl, QStringLiteral("http://b:2"));
}

void TestRemoteEndpoints::sessionOnlyKeyStore() {
  ApiKeyStore keys(ApiKeyStore::Mode::SessionOnly);
  QVERIFY(!keys.isKeyringUsable());
  QSignalSpy stored(&keys, &ApiKeyStore::stored);
  QSignalSpy loaded(&keys, &ApiKeyStore::loaded);
  keys.store(QStringLiteral("http://a:1"), kSecret);
  QCOMPARE(stored.count(), 1);
  QCOMPARE(stored.at(0).at(1).toBool(), false);
  QVERIFY2(stored.at(0).at(2).toString().contains(QLatin1String("session")), qPrintable(stored.at(0).at(2).toString()));
  keys.load(QStringLiteral("http://a:1"));
  QVERIFY(loaded.wait(kTimeoutMs));
  QCOMPARE(loaded.at(0).at(1).toString(), kSecret);
  keys.remove(QStringLiteral("http://a:1"));
  keys.load(QStringLiteral("http://a:1"));
  QVERIFY(loaded.wait(kTimeoutMs));
  QCOMPARE(loaded.at(1).at(1).toString(), QString());
  QVERIFY(!settingsFileText().contains(kSecret.toUtf8()));
}

void TestRemoteEndpoints::keyringAbsentFallsBackToSession() {
  // main() pointed D-Bus nowhere: QtKeychain has no keyring to talk to, the way it is on a
  // machine without a secret service. The key must still work this session, and not be written.
  ApiKeyStore keys(ApiKeyStore::Mode::Keyring);
  QVERIFY(keys.isKeyringUsable());  // not known to fail until it is tried
  QSignalSpy stored(&keys, &ApiKeyStore::stored);
  keys.store(QStringLiteral("http://gpu-box:8000"), kSecret);
  QVERIFY(stored.count() == 1 || stored.wait(kTimeoutMs));
  QCOMPARE(stored.at(0).at(1).toBool(), false);
  const QString note = stored.at(0).at(2).toString();
  QVERIFY2(note.contains(QLatin1String("No desktop keyring")) && note.contains(QLatin1String("session")),
           qPrintable(note));
  QVERIFY(!keys.isKeyringUsable());
  QCOMPARE(keys.sessionKey(QStringLiteral("http://gpu-box:8000")), kSecret);
  QSignalSpy loaded(&keys, &ApiKeyStore::loaded);
  keys.load(QStringLiteral("http://gpu-box:8000"));
  QVERIFY(loaded.wait(kTimeoutMs));
  QCOMPARE(loaded.at(0).at(1).toString(), kSecret);
  QVERIFY(!settingsFileText().contains(kSecret.toUtf8()));
}

void TestRemoteEndpoints::restoresKeysIntoEndpoints() {
  {
    RemoteEndpoints first(ApiKeyStore::Mode::SessionOnly);
    first.addOrUpdate(sampleEndpoint(QStringLiteral("http://gpu-box:8000"), true));
  }
  RemoteEndpoints endpoints(ApiKeyStore::Mode::SessionOnly);
  QVERIFY(endpoints.endpoints().at(0).endpoint.api_key.empty());
  // What the keyring holds in a real session; here the store's memory.
  endpoints.apiKeys()->store(QStringLiteral("http://gpu-box:8000"), kSecret);
  QSignalSpy changed(&endpoints, &RemoteEndpoints::endpointsChanged);
  endpoints.restoreApiKeys();
  QVERIFY(changed.wait(kTimeoutMs));
  QCOMPARE(QString::fromStdString(endpoints.endpoints().at(0).endpoint.api_key), kSecret);
}

void TestRemoteEndpoints::classifiesProbeErrors() {
  using P = ProbeResult::Problem;
  using iwb::ErrorCode;
  QCOMPARE(classifyProbeError(
               {ErrorCode::IoError, "cannot connect to http://h:1/v1/models (Could not establish connection)"}),
           P::Refused);
  QCOMPARE(
      classifyProbeError({ErrorCode::IoError, "timed out connecting to http://h:1/v1/models (Connection timed out)"}),
      P::Timeout);
  QCOMPARE(classifyProbeError({ErrorCode::IoError, "http://h:1/v1/models answered HTTP 401: invalid api key"}),
           P::BadApiKey);
  QCOMPARE(classifyProbeError({ErrorCode::IoError, "http://h:1/v1/models answered HTTP 404: Not Found"}), P::NotOpenAi);
  QCOMPARE(classifyProbeError({ErrorCode::IoError, "http://h:1/v1/models answered HTTP 502: bad gateway"}),
           P::HttpError);
  QCOMPARE(classifyProbeError({ErrorCode::CorruptFile, "the /v1/models answer is not an OpenAI model list: <html>"}),
           P::Garbage);
}

int main(int argc, char** argv) {
  // No session bus: QtKeychain finds no keyring (and a developer's real keyring is never touched).
  qputenv("DBUS_SESSION_BUS_ADDRESS", "unix:path=/nonexistent/iwb-test-bus");
  QCoreApplication app(argc, argv);
  TestRemoteEndpoints test;
  return QTest::qExec(&test, argc, argv);
}

#include "test_remote_endpoints.moc"
