// The application's local server (Server tab) on the aidreams model: served requests run in the
// engine worker beside a chat reply, their log rows and the server's numbers arrive, the KV-map
// snapshots see them; /health says 503 without a model; stopping while a stream is in flight
// returns promptly, closes the port and leaves the engine idle.
#include "aidreams_fixture.h"
#include "worker/engine_controller.h"
#include "serve/local_server.h"
#include "serve/request_log_model.h"
#include "serve/server_panel.h"

#include <QFileInfo>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QTest>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <future>

using namespace iwb::ui;

namespace {

constexpr int kTimeoutMs = 60000;

int connectTo(int port) {
  const int sock = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(sock, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    ::close(sock);
    return -1;
  }
  timeval tv{30, 0};
  setsockopt(sock, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  return sock;
}

QByteArray requestBytes(const QByteArray& method, const QByteArray& path, const QByteArray& body) {
  return method + ' ' + path + " HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\nContent-Length: " +
         QByteArray::number(body.size()) + "\r\nConnection: close\r\n\r\n" + body;
}

struct Reply {
  int status = 0;
  QByteArray body;  // de-chunked
};

// One request on its own connection, read to the end (the server closes after each answer).
Reply httpRequest(int port, const QByteArray& method, const QByteArray& path, const QByteArray& body = {}) {
  Reply reply;
  const int sock = connectTo(port);
  if (sock < 0) return reply;
  const QByteArray out = requestBytes(method, path, body);
  (void)::send(sock, out.constData(), static_cast<size_t>(out.size()), MSG_NOSIGNAL);
  QByteArray in;
  char buffer[4096];
  for (;;) {
    const ssize_t n = ::recv(sock, buffer, sizeof buffer, 0);
    if (n <= 0) break;
    in.append(buffer, static_cast<qsizetype>(n));
  }
  ::close(sock);
  const qsizetype split = in.indexOf("\r\n\r\n");
  if (split < 0) return reply;
  const QByteArray head = in.left(split);
  reply.status = head.split(' ').value(1).toInt();
  QByteArray rest = in.mid(split + 4);
  if (!head.toLower().contains("transfer-encoding: chunked")) {
    reply.body = rest;
    return reply;
  }
  while (!rest.isEmpty()) {
    const qsizetype line = rest.indexOf("\r\n");
    bool ok = false;
    const qsizetype size = rest.left(line).toLongLong(&ok, 16);
    if (!ok || size == 0) break;
    reply.body += rest.mid(line + 2, size);
    rest = rest.mid(line + 2 + size + 2);
  }
  return reply;
}

// The same request from another thread (the GUI thread keeps its event loop running).
std::future<Reply> httpRequestAsync(int port, const QByteArray& method, const QByteArray& path, const QByteArray& body) {
  return std::async(std::launch::async, [=] { return httpRequest(port, method, path, body); });
}

QByteArray chatBody(const QString& content, int maxTokens, bool isStream = false) {
  const QJsonObject body{{"messages", QJsonArray{QJsonObject{{"role", "user"}, {"content", content}}}},
                         {"max_tokens", maxTokens},
                         {"temperature", 0},
                         {"stream", isStream}};
  return QJsonDocument(body).toJson(QJsonDocument::Compact);
}

}  // namespace

class TestLocalServer : public QObject {
  Q_OBJECT

 private slots:
  void initTestCase();
  void healthWaitsForAModel();
  void servesBesideTheChat();
  void stopEndsStreamsInFlight();

 private:
  QTemporaryDir m_dir;
  QString m_modelPath;
};

void TestLocalServer::initTestCase() {
  QVERIFY(m_dir.isValid());
  QString why;
  m_modelPath = iwb::test::convertAidreamsModel(m_dir.path(), &why);
  if (m_modelPath.isEmpty()) {
    if (!iwb::test::hasAidreamsModel()) QSKIP(qPrintable(why));
    QFAIL(qPrintable(why));
  }
}

void TestLocalServer::healthWaitsForAModel() {
  EngineController engine;
  ServerPanel panel(&engine);
  panel.setPort(0);
  QVERIFY(panel.setServing(true));
  const int port = panel.server()->port();
  QVERIFY(port > 0);
  QVERIFY2(panel.statusText().contains("no model is open"), qPrintable(panel.statusText()));
  QCOMPARE(httpRequest(port, "GET", "/health").status, 503);
  QCOMPARE(httpRequest(port, "POST", "/v1/chat/completions", chatBody("Hi", 4)).status, 503);
  QVERIFY(iwb::test::loadModelAndWait(engine, m_modelPath, kTimeoutMs));
  QTRY_COMPARE_WITH_TIMEOUT(httpRequest(port, "GET", "/health").status, 200, kTimeoutMs);
  const Reply models = httpRequest(port, "GET", "/v1/models");
  QCOMPARE(models.status, 200);
  QCOMPARE(QJsonDocument::fromJson(models.body)["data"][0]["id"].toString(), QFileInfo(m_modelPath).completeBaseName());
  // The model closed in the workbench: the server says so again.
  engine.unload();
  QTRY_COMPARE_WITH_TIMEOUT(httpRequest(port, "GET", "/health").status, 503, kTimeoutMs);
  QVERIFY(panel.setServing(false));
  QVERIFY(!panel.server()->isRunning());
}

void TestLocalServer::servesBesideTheChat() {
  EngineController engine;
  QSignalSpy snapshots(&engine, &EngineController::kvSnapshotReady);
  QVERIFY(iwb::test::loadModelAndWait(engine, m_modelPath, kTimeoutMs));
  ServerPanel panel(&engine);
  panel.setPort(0);
  panel.setApiKey(QString());
  QVERIFY(panel.setServing(true));
  const int port = panel.server()->port();
  QVERIFY2(panel.statusText().contains(QStringLiteral("http://127.0.0.1:%1/v1").arg(port)), qPrintable(panel.statusText()));

  // A chat reply and three served requests at once.
  QSignalSpy finished(&engine, &EngineController::generationFinished);
  QSignalSpy measured(&engine, &EngineController::requestMeasured);
  GenerationInput chat;
  chat.messages = {{"user", "Once upon a time"}};
  chat.sampling.temperature = 0;
  chat.sampling.maxTokens = 60;
  const quint64 chatId = engine.generate(chat);
  std::vector<std::future<Reply>> replies;
  for (const char* prompt : {"A cat", "A dog", "A bird"}) {
    replies.push_back(httpRequestAsync(port, "POST", "/v1/chat/completions", chatBody(prompt, 40)));
  }
  for (std::future<Reply>& f : replies) {
    while (f.wait_for(std::chrono::milliseconds(10)) != std::future_status::ready) QTest::qWait(10);
    const Reply r = f.get();
    QCOMPARE(r.status, 200);
    const QJsonObject body = QJsonDocument::fromJson(r.body).object();
    QVERIFY2(!body["choices"][0]["message"]["content"].toString().isEmpty(), r.body.constData());
    QVERIFY(body["usage"]["completion_tokens"].toInt() > 0);
    QVERIFY(body.contains("timings"));
  }
  QTRY_VERIFY_WITH_TIMEOUT(finished.count() >= 1, kTimeoutMs);
  QCOMPARE(finished.first().at(0).toULongLong(), chatId);  // the chat got its own reply only

  // The log has a row per served request, and the numbers moved.
  QTRY_VERIFY_WITH_TIMEOUT(panel.log()->rows().size() >= 3, kTimeoutMs);
  for (const RequestLogRow& row : panel.log()->rows()) {
    QCOMPARE(row.status, 200);
    QCOMPARE(row.path, QStringLiteral("/v1/chat/completions"));
    QVERIFY(row.numGeneratedTokens > 0);
  }
  const iwb::serve::ServeMetricValues v = panel.server()->metricValues();
  QVERIFY(v.generation_tokens >= 3);
  const uint64_t numFinished = v.requests_finished.at("stop") + v.requests_finished.at("length");
  QVERIFY2(numFinished >= 4, qPrintable(QString("%1 finished, %2 aborted").arg(numFinished).arg(v.requests_finished.at("abort"))));  // the chat counts too
  // The Metrics tab measured the served requests beside the chat's reply, under ids of their own.
  QTRY_VERIFY_WITH_TIMEOUT(measured.count() >= 4, kTimeoutMs);
  int numServedMeasured = 0;
  for (const QList<QVariant>& m : measured) {
    const RequestMeasurement r = m.at(0).value<RequestMeasurement>();
    if ((r.requestId & kServedRequestBit) == 0) continue;
    ++numServedMeasured;
    QVERIFY(r.numGeneratedTokens > 0);
    QVERIFY(r.timing.num_prompt_tokens > 0);
  }
  QCOMPARE(numServedMeasured, 3);
  // The block map saw sequences while they ran.
  bool sawSequences = false;
  for (const QList<QVariant>& s : snapshots) sawSequences |= !s.at(0).value<KvMapSnapshot>().sequences.empty();
  QVERIFY(sawSequences);
  // Errors are logged too.
  QCOMPARE(httpRequest(port, "POST", "/v1/chat/completions", "{bad").status, 400);
  QTRY_VERIFY_WITH_TIMEOUT(panel.log()->rows().last().status == 400, kTimeoutMs);
}

void TestLocalServer::stopEndsStreamsInFlight() {
  EngineController engine;
  QSignalSpy snapshots(&engine, &EngineController::kvSnapshotReady);
  EngineLoadOptions options;
  options.contextLength = 4096;  // a long stream, so it is still running when the server stops
  options.numThreads = 1;
  QSignalSpy loaded(&engine, &EngineController::modelLoaded);
  engine.loadModel(m_modelPath, options);
  QTRY_COMPARE_WITH_TIMEOUT(loaded.count(), 1, kTimeoutMs);
  ServerPanel panel(&engine);
  panel.setPort(0);
  QVERIFY(panel.setServing(true));
  const int port = panel.server()->port();

  const int sock = connectTo(port);
  QVERIFY(sock >= 0);
  // Eight choices of up to 4000 tokens each: seconds of work on one thread.
  const QByteArray body = R"({"prompt": "Once upon a time", "max_tokens": 4000, "n": 8, "stream": true,
                             "stop": ["zzqqzz"], "temperature": 1.0, "repeat_penalty": 1.0})";
  const QByteArray out = requestBytes("POST", "/v1/completions", body);
  QVERIFY(::send(sock, out.constData(), static_cast<size_t>(out.size()), MSG_NOSIGNAL) == out.size());
  char buffer[4096];
  QVERIFY(::recv(sock, buffer, sizeof buffer, 0) > 0);  // streaming

  const auto start = std::chrono::steady_clock::now();
  QVERIFY(panel.setServing(false));
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  QVERIFY2(seconds < 5, qPrintable(QString::number(seconds)));
  // The stream ends (the server closed it), the port is closed, the engine falls idle.
  QByteArray rest;
  ssize_t n;
  while ((n = ::recv(sock, buffer, sizeof buffer, 0)) > 0) rest.append(buffer, static_cast<qsizetype>(n));
  QCOMPARE(n, ssize_t{0});
  QVERIFY2(!rest.contains("data: [DONE]"), "the stream ran to its end before the stop: make it longer");
  ::close(sock);
  QCOMPARE(connectTo(port), -1);
  QTRY_VERIFY_WITH_TIMEOUT(!snapshots.isEmpty() && snapshots.last().at(0).value<KvMapSnapshot>().isIdle, kTimeoutMs);
  QCOMPARE(snapshots.last().at(0).value<KvMapSnapshot>().stats.num_used_blocks, qint64(0));
}

QTEST_MAIN(TestLocalServer)
#include "test_local_server.moc"
