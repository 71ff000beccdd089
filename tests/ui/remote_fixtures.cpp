// The remote-endpoint test servers: `iwb serve` as a child process and the scripted fake.
#include "remote_fixtures.h"

#include <QDeadlineTimer>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcessEnvironment>
#include <QRegularExpression>
#include <QTcpSocket>
#include <QTest>
#include "test_paths.h"

namespace iwb::test {

IwbServe::~IwbServe() { stop(); }

bool IwbServe::start(const QString& gguf, const QStringList& extraArgs, QString* why, int timeoutMs) {
  m_port = 0;
  QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
  env.insert(QStringLiteral("CUDA_VISIBLE_DEVICES"), QString());  // the tiny model runs on the CPU
  m_process.setProcessEnvironment(env);
  m_process.setProcessChannelMode(QProcess::SeparateChannels);
  m_process.setStandardOutputFile(QProcess::nullDevice());
  QObject::connect(&m_process, &QProcess::readyReadStandardError,
                   [this] { m_stderr += m_process.readAllStandardError(); });
  m_process.start(QString::fromStdString(iwb::test::iwb_cli_path()),
                  QStringList{QStringLiteral("serve"), QStringLiteral("-m"), gguf, QStringLiteral("--port"),
                              QStringLiteral("0"), QStringLiteral("-t"), QStringLiteral("2")} +
                      extraArgs);
  // The port is open before the model has loaded (requests get 503 "the model is loading", as
  // llama-server's do), so the server counts as started only at its "ready" line: a test that
  // asks at once would otherwise race the load.
  static const QRegularExpression kListening(QStringLiteral("listening on http://[^:]+:(\\d+)"));
  bool isReady = false;
  const bool isUp = QTest::qWaitFor(
      [&] {
        const QString log = QString::fromUtf8(m_stderr);
        const QRegularExpressionMatch m = kListening.match(log);
        if (m.hasMatch()) m_port = m.captured(1).toInt();
        isReady = m_port > 0 && log.contains(QLatin1String("iwb serve: ready"));
        return isReady || m_process.state() == QProcess::NotRunning;
      },
      timeoutMs);
  if (!isUp || !isReady) {
    *why = QStringLiteral("iwb serve did not start (%1):\n%2")
               .arg(QString::fromStdString(iwb::test::iwb_cli_path()), log());
    stop();
    return false;
  }
  return true;
}

void IwbServe::stop() {
  if (m_process.state() == QProcess::NotRunning) return;
  m_process.terminate();  // SIGTERM: the server drains and exits
  if (!m_process.waitForFinished(10000)) {
    m_process.kill();
    m_process.waitForFinished(5000);
  }
}

FakeHttpServer::FakeHttpServer(Handler handler, QObject* parent) : QObject(parent), m_handler(std::move(handler)) {
  m_server.listen(QHostAddress::LocalHost, 0);
  connect(&m_server, &QTcpServer::newConnection, this, [this] {
    while (QTcpSocket* socket = m_server.nextPendingConnection()) {
      socket->setParent(this);
      connect(socket, &QTcpSocket::readyRead, this, [this, socket] { readFrom(socket); });
      connect(socket, &QTcpSocket::disconnected, socket, &QObject::deleteLater);
    }
  });
}

void FakeHttpServer::readFrom(QTcpSocket* socket) {
  // Buffers until the head and a Content-Length body are complete; one request per connection.
  QByteArray buffer = socket->property("buffer").toByteArray() + socket->readAll();
  socket->setProperty("buffer", buffer);
  const qsizetype headEnd = buffer.indexOf("\r\n\r\n");
  if (headEnd < 0 || socket->property("answered").toBool()) return;
  FakeRequest request;
  const QList<QByteArray> lines = buffer.left(headEnd).split('\n');
  const QList<QByteArray> first = lines.value(0).trimmed().split(' ');
  request.method = first.value(0);
  request.path = first.value(1);
  qsizetype length = 0;
  for (qsizetype i = 1; i < lines.size(); ++i) {
    const qsizetype colon = lines[i].indexOf(':');
    if (colon < 0) continue;
    const QByteArray name = lines[i].left(colon).trimmed().toLower();
    const QByteArray value = lines[i].mid(colon + 1).trimmed();
    request.headers.append({name, value});
    if (name == "content-length") length = value.toLongLong();
  }
  if (buffer.size() < headEnd + 4 + length) return;
  request.body = buffer.mid(headEnd + 4, length);
  socket->setProperty("answered", true);
  ++m_numRequests;
  m_handler(request, socket);
}

void FakeHttpServer::respond(QTcpSocket* socket, int status, const QByteArray& contentType, const QByteArray& body) {
  QByteArray head = "HTTP/1.1 " + QByteArray::number(status) + " Fake\r\nContent-Type: " + contentType +
                    "\r\nContent-Length: " + QByteArray::number(body.size()) + "\r\nConnection: close\r\n\r\n";
  socket->write(head + body);
  socket->disconnectFromHost();
}

void FakeHttpServer::beginEventStream(QTcpSocket* socket) {
  socket->write(
      "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n"
      "Connection: close\r\n\r\n");
  writeRawEvent(socket,
                R"({"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant"}}]})");
}

void FakeHttpServer::writeRawEvent(QTcpSocket* socket, const QByteArray& data) {
  const QByteArray event = "data: " + data + "\n\n";
  socket->write(QByteArray::number(event.size(), 16) + "\r\n" + event + "\r\n");
  socket->flush();
}

void FakeHttpServer::writeContentEvent(QTcpSocket* socket, const QString& content) {
  const QJsonObject chunk{
      {QStringLiteral("id"), QStringLiteral("c1")},
      {QStringLiteral("object"), QStringLiteral("chat.completion.chunk")},
      {QStringLiteral("choices"),
       QJsonArray{QJsonObject{{QStringLiteral("index"), 0},
                              {QStringLiteral("delta"), QJsonObject{{QStringLiteral("content"), content}}}}}}};
  writeRawEvent(socket, QJsonDocument(chunk).toJson(QJsonDocument::Compact));
}

QByteArray FakeHttpServer::modelListJson(const QStringList& ids) {
  QJsonArray data;
  for (const QString& id : ids)
    data.append(QJsonObject{{QStringLiteral("id"), id}, {QStringLiteral("object"), QStringLiteral("model")}});
  return QJsonDocument(QJsonObject{{QStringLiteral("object"), QStringLiteral("list")}, {QStringLiteral("data"), data}})
      .toJson(QJsonDocument::Compact);
}

int closedPort() {
  QTcpServer server;
  server.listen(QHostAddress::LocalHost, 0);
  const int port = server.serverPort();
  server.close();
  return port;
}

}  // namespace iwb::test
