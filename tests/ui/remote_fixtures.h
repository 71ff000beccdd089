// Servers for the remote-endpoint tests: a real `iwb serve` (the built iwb, aidreams GGUF, a
// free loopback port read from its "listening on" line) and a tiny scripted HTTP server on a
// QTcpServer for the failures a real server will not produce on demand (garbage, silence, a
// stream cut mid-way). Both live in the test's thread; the client runs on worker threads.
#pragma once

#include <QByteArray>
#include <QList>
#include <QObject>
#include <QProcess>
#include <QString>
#include <QTcpServer>

#include <functional>

class QTcpSocket;

namespace iwb::test {

class IwbServe {
 public:
  IwbServe() = default;
  ~IwbServe();
  // Starts `iwb serve -m gguf --port 0` (plus `extraArgs`) and waits until it has its port and
  // has loaded the model. False with `*why` set (its stderr) when it is not ready within `timeoutMs`.
  bool start(const QString& gguf, const QStringList& extraArgs, QString* why, int timeoutMs = 60000);
  void stop();
  int port() const { return m_port; }
  QString baseUrl() const { return QStringLiteral("http://127.0.0.1:%1").arg(m_port); }
  QString log() const { return QString::fromUtf8(m_stderr); }

 private:
  QProcess m_process;
  QByteArray m_stderr;
  int m_port = 0;
};

struct FakeRequest {
  QByteArray method;
  QByteArray path;
  QList<QPair<QByteArray, QByteArray>> headers;
  QByteArray body;
};

// Answers each request with the handler; the handler owns the socket's fate (write, close,
// keep silent). The helpers below write the usual answers.
class FakeHttpServer : public QObject {
  Q_OBJECT
 public:
  using Handler = std::function<void(const FakeRequest& request, QTcpSocket* socket)>;
  explicit FakeHttpServer(Handler handler, QObject* parent = nullptr);
  int port() const { return m_server.serverPort(); }
  QString baseUrl() const { return QStringLiteral("http://127.0.0.1:%1").arg(port()); }
  int numRequests() const { return m_numRequests; }

  // A whole answer with Content-Length, then the connection closes.
  static void respond(QTcpSocket* socket, int status, const QByteArray& contentType, const QByteArray& body);
  // A 200 text/event-stream head (chunked), for streams written with writeEvent.
  static void beginEventStream(QTcpSocket* socket);
  // One SSE event carrying a chat-completion chunk with `content` (in one HTTP chunk).
  static void writeContentEvent(QTcpSocket* socket, const QString& content);
  static void writeRawEvent(QTcpSocket* socket, const QByteArray& data);
  // A model list answer for GET /v1/models.
  static QByteArray modelListJson(const QStringList& ids);

 private:
  void readFrom(QTcpSocket* socket);

  QTcpServer m_server;
  Handler m_handler;
  int m_numRequests = 0;
};

// A loopback port with nothing listening (bound once, then released).
int closedPort();

}  // namespace iwb::test
