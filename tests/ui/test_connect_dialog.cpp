// Issue 16, File › Connect to Server…: the dialog probing a real `iwb serve` (models listed, the
// kind recognised from its /metrics, an API key refused and then accepted and kept out of the
// settings file), and every failure a person meets — refused, silent, not an OpenAI server,
// garbage, no or unreadable /metrics, a bad address — shown in the dialog, which stays usable
// and never blocks the event loop while it waits.
#include "aidreams_fixture.h"
#include "main_window/main_window.h"
#include "remote/connect_dialog.h"
#include "remote/remote_endpoints.h"
#include "remote_fixtures.h"

#include <QApplication>
#include <QComboBox>
#include <QElapsedTimer>
#include <QFile>
#include <QLabel>
#include <QLineEdit>
#include <QListWidget>
#include <QMenuBar>
#include <QPushButton>
#include <QSettings>
#include <QSignalSpy>
#include <QStandardPaths>
#include <QTcpSocket>
#include <QTemporaryDir>
#include <QTest>
#include <QTimer>

using namespace iwb::ui;
using iwb::test::FakeHttpServer;
using iwb::test::FakeRequest;

namespace {

constexpr int kTimeoutMs = 30000;
const QString kServerKey = QStringLiteral("sk-connect-test-71a3");

// Types the address (and key) and presses Connect; waits for the dialog to show the answer.
ProbeResult connectTo(ConnectDialog& dialog, const QString& url, const QString& key = {}) {
  QSignalSpy finished(&dialog, &ConnectDialog::probeFinished);
  dialog.urlEdit()->clear();
  QTest::keyClicks(dialog.urlEdit(), url);
  dialog.apiKeyEdit()->clear();
  if (!key.isEmpty()) QTest::keyClicks(dialog.apiKeyEdit(), key);
  QTest::mouseClick(dialog.connectButton(), Qt::LeftButton);
  if (!finished.wait(kTimeoutMs)) return {};
  return finished.at(0).at(0).value<ProbeResult>();
}

// A server that answers every path with the same thing.
FakeHttpServer::Handler always(int status, const QByteArray& contentType, const QByteArray& body) {
  return [=](const FakeRequest&, QTcpSocket* socket) { FakeHttpServer::respond(socket, status, contentType, body); };
}

// A server with a model list and the given /metrics answer.
FakeHttpServer::Handler modelsWithMetrics(int metricsStatus, const QByteArray& metricsBody) {
  return [=](const FakeRequest& request, QTcpSocket* socket) {
    if (request.path.endsWith("/v1/models")) {
      FakeHttpServer::respond(socket, 200, "application/json",
                              FakeHttpServer::modelListJson({QStringLiteral("fake-7b")}));
    } else if (request.path == "/metrics") {
      FakeHttpServer::respond(socket, metricsStatus, "text/plain; version=0.0.4", metricsBody);
    } else {
      FakeHttpServer::respond(socket, 404, "text/plain", "not here");
    }
  };
}

QByteArray settingsFileText() {
  QSettings().sync();
  QFile file(QSettings().fileName());
  return file.open(QIODevice::ReadOnly) ? file.readAll() : QByteArray();
}

}  // namespace

class TestConnectDialog : public QObject {
  Q_OBJECT

 private slots:
  void initTestCase();
  void init();
  void connectsToIwbServe();
  void refusedKeyThenAcceptedKey();
  void refusedConnection();
  void silentServerTimesOutWithoutBlocking();
  void closingDoesNotWaitForASilentServer();
  void notAnOpenAiServer();
  void garbageModelList();
  void serverWithoutUsableMetrics_data();
  void serverWithoutUsableMetrics();
  void badAddress();
  void editingDropsAStaleAnswer();
  void mainWindowOffersTheDialog();

 private:
  QTemporaryDir m_dir;
  QString m_gguf;
  iwb::test::IwbServe m_serve;
  iwb::test::IwbServe m_keyedServe;
};

void TestConnectDialog::initTestCase() {
  QVERIFY(m_dir.isValid());
  QSettings::setDefaultFormat(QSettings::IniFormat);
  QSettings::setPath(QSettings::IniFormat, QSettings::UserScope, m_dir.filePath(QStringLiteral("settings")));
  QCoreApplication::setOrganizationName(QStringLiteral("Inference Workbench Tests"));
  QCoreApplication::setApplicationName(QStringLiteral("test_connect_dialog"));
  QStandardPaths::setTestModeEnabled(true);
  QString why;
  m_gguf = iwb::test::convertAidreamsModel(m_dir.path(), &why);
  if (m_gguf.isEmpty()) QSKIP(qPrintable(why));
  QVERIFY2(m_serve.start(m_gguf, {}, &why), qPrintable(why));
  QVERIFY2(m_keyedServe.start(m_gguf, {QStringLiteral("--api-key"), kServerKey}, &why), qPrintable(why));
}

void TestConnectDialog::init() { QSettings().clear(); }

void TestConnectDialog::connectsToIwbServe() {
  RemoteEndpoints endpoints(ApiKeyStore::Mode::SessionOnly);
  ConnectDialog dialog(&endpoints);
  dialog.show();
  QVERIFY(!dialog.addButton()->isEnabled());
  const ProbeResult result = connectTo(dialog, m_serve.baseUrl());
  QVERIFY2(result.isOk(), qPrintable(result.title + QLatin1Char('\n') + result.detail));
  QCOMPARE(result.kind, iwb::remote::ServerKind::Iwb);
  QCOMPARE(dialog.kindLabel()->text(), QString::fromUtf8(iwb::remote::server_kind_name(iwb::remote::ServerKind::Iwb)));
  QVERIFY(!result.models.isEmpty());
  QCOMPARE(dialog.modelList()->count(), result.models.size());
  QVERIFY(dialog.modelList()->currentItem());
  QVERIFY2(dialog.statusLabel()->text().contains(QLatin1String("Connected")), qPrintable(dialog.statusLabel()->text()));
  QVERIFY2(result.metricsNote.contains(QLatin1String("metric families")), qPrintable(result.metricsNote));
  QVERIFY(dialog.addButton()->isEnabled());

  QTest::mouseClick(dialog.addButton(), Qt::LeftButton);
  QCOMPARE(dialog.result(), int(QDialog::Accepted));
  QCOMPARE(endpoints.endpoints().size(), 1);
  const RemoteEndpointInfo& info = endpoints.endpoints().at(0);
  QCOMPARE(info.baseUrl, m_serve.baseUrl());
  QCOMPARE(info.kind, iwb::remote::ServerKind::Iwb);
  QCOMPARE(info.models, result.models);
  QCOMPARE(info.defaultModel, result.models.at(0));
  QVERIFY(!info.hasApiKey);
  QVERIFY2(info.displayName.contains(QLatin1String("iwb serve")), qPrintable(info.displayName));

  // The next time: the server is offered, fills the form, and can be forgotten.
  ConnectDialog again(&endpoints);
  again.show();
  QVERIFY(again.knownServersBox()->isVisible());
  QCOMPARE(again.knownServersBox()->count(), 1);
  QVERIFY(again.urlEdit()->text().isEmpty());
  emit again.knownServersBox()->activated(0);
  QCOMPARE(again.urlEdit()->text(), m_serve.baseUrl());
  QVERIFY(settingsFileText().contains(m_serve.baseUrl().toUtf8()));
  QTest::mouseClick(again.forgetButton(), Qt::LeftButton);
  QVERIFY(endpoints.endpoints().isEmpty());
  QVERIFY(!again.knownServersBox()->isVisible());
  QVERIFY(!settingsFileText().contains(m_serve.baseUrl().toUtf8()));
}

void TestConnectDialog::refusedKeyThenAcceptedKey() {
  RemoteEndpoints endpoints(ApiKeyStore::Mode::SessionOnly);
  ConnectDialog dialog(&endpoints);
  dialog.show();
  ProbeResult result = connectTo(dialog, m_keyedServe.baseUrl());
  QCOMPARE(result.problem, ProbeResult::Problem::BadApiKey);
  QCOMPARE(dialog.statusLabel()->text(), result.title);
  QVERIFY(dialog.detailLabel()->isVisible());
  QVERIFY2(dialog.detailLabel()->text().contains(QLatin1String("401")), qPrintable(dialog.detailLabel()->text()));
  QVERIFY(!dialog.addButton()->isEnabled());
  QVERIFY(dialog.connectButton()->isEnabled());

  result = connectTo(dialog, m_keyedServe.baseUrl(), QStringLiteral("sk-wrong"));
  QCOMPARE(result.problem, ProbeResult::Problem::BadApiKey);

  result = connectTo(dialog, m_keyedServe.baseUrl(), kServerKey);
  QVERIFY2(result.isOk(), qPrintable(result.title + QLatin1Char('\n') + result.detail));
  QCOMPARE(result.kind, iwb::remote::ServerKind::Iwb);
  // The dialog says where the key went: here, a session-only store.
  QVERIFY(QTest::qWaitFor([&] { return dialog.keyNoteLabel()->isVisible(); }, kTimeoutMs));
  QVERIFY2(dialog.keyNoteLabel()->text().contains(QLatin1String("session")), qPrintable(dialog.keyNoteLabel()->text()));
  QTest::mouseClick(dialog.addButton(), Qt::LeftButton);
  const RemoteEndpointInfo* info = endpoints.find(m_keyedServe.baseUrl());
  QVERIFY(info);
  QVERIFY(info->hasApiKey);
  QCOMPARE(QString::fromStdString(info->endpoint.api_key), kServerKey);
  QVERIFY(!settingsFileText().contains(kServerKey.toUtf8()));
}

void TestConnectDialog::refusedConnection() {
  RemoteEndpoints endpoints(ApiKeyStore::Mode::SessionOnly);
  ConnectDialog dialog(&endpoints);
  dialog.show();
  const ProbeResult result = connectTo(dialog, QStringLiteral("http://127.0.0.1:%1").arg(iwb::test::closedPort()));
  QCOMPARE(result.problem, ProbeResult::Problem::Refused);
  QCOMPARE(dialog.statusLabel()->text(), QStringLiteral("Could not connect"));
  QVERIFY(dialog.detailLabel()->text().contains(QLatin1String("127.0.0.1")));
  QVERIFY(!dialog.addButton()->isEnabled());
  // Still usable: the next address works.
  QVERIFY(connectTo(dialog, m_serve.baseUrl()).isOk());
  QVERIFY(dialog.addButton()->isEnabled());
}

void TestConnectDialog::silentServerTimesOutWithoutBlocking() {
  FakeHttpServer silent([](const FakeRequest&, QTcpSocket*) {});  // reads the request, never answers
  RemoteEndpoints endpoints(ApiKeyStore::Mode::SessionOnly);
  ConnectDialog dialog(&endpoints);
  dialog.setProbeTimeout(1.0);
  dialog.show();
  // The GUI thread keeps running while the probe waits: a timer here keeps ticking.
  int numTicks = 0;
  QTimer ticker;
  connect(&ticker, &QTimer::timeout, [&] { ++numTicks; });
  ticker.start(20);
  const ProbeResult result = connectTo(dialog, silent.baseUrl());
  QCOMPARE(result.problem, ProbeResult::Problem::Timeout);
  QCOMPARE(silent.numRequests(), 1);
  QVERIFY2(numTicks >= 20, qPrintable(QString::number(numTicks)));
  QVERIFY(dialog.statusLabel()->text().contains(QLatin1String("did not answer")));
  QVERIFY(dialog.connectButton()->isEnabled());
}

void TestConnectDialog::closingDoesNotWaitForASilentServer() {
  FakeHttpServer silent([](const FakeRequest&, QTcpSocket*) {});
  QElapsedTimer timer;
  {
    RemoteEndpoints endpoints(ApiKeyStore::Mode::SessionOnly);
    ConnectDialog dialog(&endpoints);
    dialog.setProbeTimeout(20);
    dialog.show();
    QTest::keyClicks(dialog.urlEdit(), silent.baseUrl());
    QTest::mouseClick(dialog.connectButton(), Qt::LeftButton);
    QTRY_COMPARE_WITH_TIMEOUT(silent.numRequests(), 1, kTimeoutMs);
    QVERIFY(dialog.isProbing());
    timer.start();
  }  // the window (and its registry) closes with the probe in flight
  QVERIFY2(timer.elapsed() < 2000, qPrintable(QString::number(timer.elapsed())));
}

void TestConnectDialog::notAnOpenAiServer() {
  FakeHttpServer web(always(404, "text/html", "<html><body>It works!</body></html>"));
  RemoteEndpoints endpoints(ApiKeyStore::Mode::SessionOnly);
  ConnectDialog dialog(&endpoints);
  dialog.show();
  const ProbeResult result = connectTo(dialog, web.baseUrl());
  QCOMPARE(result.problem, ProbeResult::Problem::NotOpenAi);
  QCOMPARE(dialog.statusLabel()->text(), QStringLiteral("Not an OpenAI-compatible server"));
  QVERIFY(!dialog.addButton()->isEnabled());
}

void TestConnectDialog::garbageModelList() {
  FakeHttpServer garbage(always(200, "application/json", "{\"data\": [1, 2, oops"));
  RemoteEndpoints endpoints(ApiKeyStore::Mode::SessionOnly);
  ConnectDialog dialog(&endpoints);
  dialog.show();
  const ProbeResult result = connectTo(dialog, garbage.baseUrl());
  QCOMPARE(result.problem, ProbeResult::Problem::Garbage);
  QVERIFY(dialog.detailLabel()->text().contains(QLatin1String("oops")));
  QVERIFY(!dialog.addButton()->isEnabled());
}

void TestConnectDialog::serverWithoutUsableMetrics_data() {
  QTest::addColumn<int>("status");
  QTest::addColumn<QByteArray>("body");
  QTest::addColumn<QString>("note");
  QTest::newRow("no /metrics") << 404 << QByteArray("404 page not found") << QStringLiteral("no /metrics");
  QTest::newRow("garbage /metrics") << 200 << QByteArray("<html>\n{{ not prometheus\n")
                                    << QStringLiteral("not Prometheus text");
  QTest::newRow("unknown engine") << 200
                                  << QByteArray(
                                         "# TYPE process_cpu_seconds_total counter\nprocess_cpu_seconds_total 1.5\n")
                                  << QStringLiteral("none from a known engine");
}

void TestConnectDialog::serverWithoutUsableMetrics() {
  QFETCH(int, status);
  QFETCH(QByteArray, body);
  QFETCH(QString, note);
  FakeHttpServer server(modelsWithMetrics(status, body));
  RemoteEndpoints endpoints(ApiKeyStore::Mode::SessionOnly);
  ConnectDialog dialog(&endpoints);
  dialog.show();
  const ProbeResult result = connectTo(dialog, server.baseUrl());
  QVERIFY2(result.isOk(), qPrintable(result.title + QLatin1Char('\n') + result.detail));  // chat works without metrics
  QCOMPARE(result.kind, iwb::remote::ServerKind::OpenAiNoMetrics);
  QCOMPARE(dialog.kindLabel()->text(), QStringLiteral("OpenAI-compatible, no metrics"));
  QVERIFY2(result.metricsNote.contains(note), qPrintable(result.metricsNote));
  QCOMPARE(result.models, QStringList{QStringLiteral("fake-7b")});
  QVERIFY(dialog.addButton()->isEnabled());
}

void TestConnectDialog::badAddress() {
  RemoteEndpoints endpoints(ApiKeyStore::Mode::SessionOnly);
  ConnectDialog dialog(&endpoints);
  dialog.show();
  QTest::keyClicks(dialog.urlEdit(), QStringLiteral("ftp://files.example.com"));
  QTest::mouseClick(dialog.connectButton(), Qt::LeftButton);
  QVERIFY(!dialog.isProbing());
  QCOMPARE(dialog.statusLabel()->text(), QStringLiteral("That address cannot be used"));
  QVERIFY(dialog.detailLabel()->text().contains(QLatin1String("http")));
}

void TestConnectDialog::editingDropsAStaleAnswer() {
  FakeHttpServer slow([](const FakeRequest& request, QTcpSocket* socket) {
    QTimer::singleShot(500, socket, [socket, path = request.path] {
      FakeHttpServer::respond(socket, 200, "application/json", FakeHttpServer::modelListJson({QStringLiteral("late")}));
      Q_UNUSED(path);
    });
  });
  RemoteEndpoints endpoints(ApiKeyStore::Mode::SessionOnly);
  ConnectDialog dialog(&endpoints);
  dialog.show();
  QSignalSpy finished(&dialog, &ConnectDialog::probeFinished);
  QTest::keyClicks(dialog.urlEdit(), slow.baseUrl());
  QTest::mouseClick(dialog.connectButton(), Qt::LeftButton);
  QVERIFY(dialog.isProbing());
  QTest::keyClicks(dialog.urlEdit(), QStringLiteral("/other"));  // the answer no longer fits
  QVERIFY(!dialog.isProbing());
  QTest::qWait(1500);
  QCOMPARE(finished.count(), 0);
  QVERIFY(!dialog.probeResult().has_value());
  QCOMPARE(dialog.modelList()->count(), 0);
  QVERIFY(!dialog.addButton()->isEnabled());
}

void TestConnectDialog::mainWindowOffersTheDialog() {
  MainWindow window(nullptr, m_dir.filePath(QStringLiteral("conversations.sqlite")),
                    m_dir.filePath(QStringLiteral("results.sqlite")));
  QVERIFY(window.remoteEndpoints());
  QAction* action = window.menuBar()->findChild<QAction*>(QStringLiteral("connectToServerAction"));
  QVERIFY(action);
  QVERIFY(action->text().contains(QLatin1String("Connect to Server")));
  ConnectDialog* dialog = window.showConnectDialog();
  QVERIFY(dialog && dialog->isVisible());
  const ProbeResult result = connectTo(*dialog, m_serve.baseUrl());
  QVERIFY(result.isOk());
  QTest::mouseClick(dialog->addButton(), Qt::LeftButton);
  QVERIFY(window.remoteEndpoints()->find(m_serve.baseUrl()));
}

int main(int argc, char** argv) {
  // No session bus: the key store falls back to this session (a developer's keyring untouched).
  qputenv("DBUS_SESSION_BUS_ADDRESS", "unix:path=/nonexistent/iwb-test-bus");
  QApplication app(argc, argv);
  TestConnectDialog test;
  return QTest::qExec(&test, argc, argv);
}

#include "test_connect_dialog.moc"
