// Issue 16, chatting with a connected server: the chat panel's "Runs on" choice, a reply
// streamed from a real `iwb serve` (no local model loaded) with TTFT and tokens/s measured here,
// stored in the conversation history marked with where it ran, the chat's sampling settings
// passed through; then a dead endpoint, an HTTP error, a stream cut mid-way, a server gone
// silent and Stop — each ends with a visible message, keeps the partial text, and the panel
// carries on.
#include "aidreams_fixture.h"
#include "chat/chat_input.h"
#include "chat/chat_panel.h"
#include "chat/chat_settings_panel.h"
#include "chat/message_list_model.h"
#include "remote/remote_chat.h"
#include "remote/remote_endpoints.h"
#include "remote_fixtures.h"
#include "store/conversation_store.h"
#include "widgets/message_bar.h"
#include "worker/engine_controller.h"

#include <QComboBox>
#include <QDoubleSpinBox>
#include <QElapsedTimer>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QSettings>
#include <QSignalSpy>
#include <QSpinBox>
#include <QStandardPaths>
#include <QTcpSocket>
#include <QTemporaryDir>
#include <QTest>
#include <QTimer>

#include <memory>

using namespace iwb::ui;
using iwb::test::FakeHttpServer;
using iwb::test::FakeRequest;

namespace {

constexpr int kTimeoutMs = 30000;

RemoteEndpointInfo endpointAt(const QString& baseUrl, const QStringList& models) {
  RemoteEndpointInfo info;
  info.baseUrl = baseUrl;
  info.displayName = RemoteEndpoints::hostLabel(baseUrl);
  info.models = models;
  info.defaultModel = models.value(0);
  info.kind = iwb::remote::ServerKind::OpenAiNoMetrics;
  return info;
}

// A chat panel over a fresh store, a local engine with no model, and a registry of endpoints.
struct Chat {
  explicit Chat(const QString& dbPath) {
    auto opened = ConversationStore::open(dbPath);
    if (opened) store = std::move(*opened);
    panel = std::make_unique<ChatPanel>(&engine, store.get());
    panel->setRemoteEndpoints(&endpoints);
  }
  ~Chat() { panel.reset(); }  // before the engine and registry it points to

  // Types `text`, sends it and waits for the reply to end (finished or failed).
  bool say(const QString& text) {
    QSignalSpy finished(panel.get(), &ChatPanel::replyFinished);
    QSignalSpy failed(panel.get(), &ChatPanel::replyFailed);
    panel->input()->setPlainText(text);
    QTest::mouseClick(panel->sendButton(), Qt::LeftButton);
    return QTest::qWaitFor([&] { return finished.count() + failed.count() > 0; }, kTimeoutMs);
  }
  const StoredMessage& last() const {
    return panel->messageModel()->item(panel->messageModel()->rowCount() - 1).message;
  }
  QList<StoredMessage> stored() const { return *store->messages(panel->currentConversation()); }

  EngineController engine;
  std::unique_ptr<ConversationStore> store;
  RemoteEndpoints endpoints{ApiKeyStore::Mode::SessionOnly};
  std::unique_ptr<ChatPanel> panel;
};

// Answers /v1/chat/completions with the role chunk and `contents`, one every `intervalMs`,
// then does `ending`: "done" (finish_reason and [DONE]), "drop" (closes mid-stream) or
// "silent" (keeps the connection open and says nothing more).
FakeHttpServer::Handler scriptedStream(const QStringList& contents, int intervalMs, const QString& ending) {
  return [=](const FakeRequest&, QTcpSocket* socket) {
    FakeHttpServer::beginEventStream(socket);
    for (int i = 0; i <= contents.size(); ++i) {
      QTimer::singleShot(intervalMs * (i + 1), socket, [=] {
        if (i < contents.size()) {
          FakeHttpServer::writeContentEvent(socket, contents.at(i));
        } else if (ending == QLatin1String("done")) {
          FakeHttpServer::writeRawEvent(socket,
                                        R"({"id":"c1","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]})");
          FakeHttpServer::writeRawEvent(socket, "[DONE]");
          socket->write("0\r\n\r\n");
          socket->disconnectFromHost();
        } else if (ending == QLatin1String("drop")) {
          socket->disconnectFromHost();  // mid-stream: no finish_reason, no [DONE], no last chunk
        }
      });
    }
  };
}

}  // namespace

class TestRemoteChat : public QObject {
  Q_OBJECT

 private slots:
  void initTestCase();
  void runsOnListsConnectedModels();
  void repliesFromIwbServe();
  void samplingSettingsPassThrough();
  void deadEndpointIsAMessage();
  void serverErrorIsAMessage();
  void refusedKeyIsAMessage();
  void droppedStreamKeepsPartialText();
  void silentServerTimesOut();
  void stopEndsARemoteReply();

 private:
  QString dbPath(const char* name) const { return m_dir.filePath(QLatin1String(name) + QStringLiteral(".sqlite")); }

  QTemporaryDir m_dir;
  QString m_gguf;
  iwb::test::IwbServe m_serve;
  QString m_servedModel;
};

void TestRemoteChat::initTestCase() {
  QVERIFY(m_dir.isValid());
  QSettings::setDefaultFormat(QSettings::IniFormat);
  QSettings::setPath(QSettings::IniFormat, QSettings::UserScope, m_dir.filePath(QStringLiteral("settings")));
  QCoreApplication::setOrganizationName(QStringLiteral("Inference Workbench Tests"));
  QCoreApplication::setApplicationName(QStringLiteral("test_remote_chat"));
  QStandardPaths::setTestModeEnabled(true);
  QString why;
  m_gguf = iwb::test::convertAidreamsModel(m_dir.path(), &why);
  if (m_gguf.isEmpty()) QSKIP(qPrintable(why));
  QVERIFY2(m_serve.start(m_gguf, {}, &why), qPrintable(why));
  // The served model's id, as a client learns it.
  iwb::remote::Endpoint endpoint;
  endpoint.base_url = m_serve.baseUrl().toStdString();
  auto models = iwb::remote::OpenAiClient(endpoint).list_models();
  QVERIFY2(models && !models->empty(), models ? "no models" : models.error_message().c_str());
  m_servedModel = QString::fromStdString(models->front());
}

void TestRemoteChat::runsOnListsConnectedModels() {
  Chat chat(dbPath("runs-on"));
  QVERIFY(chat.panel->runsOnBox()->isHidden());  // nothing connected: only the local engine
  QVERIFY(!chat.panel->sendButton()->isEnabled() || chat.panel->input()->toPlainText().isEmpty());
  RemoteEndpointInfo info =
      endpointAt(QStringLiteral("http://gpu-box:8000"), {QStringLiteral("a"), QStringLiteral("b")});
  info.defaultModel = QStringLiteral("b");
  chat.endpoints.addOrUpdate(info);
  QComboBox* box = chat.panel->runsOnBox();
  QVERIFY(!box->isHidden());
  QCOMPARE(box->count(), 3);
  QCOMPARE(box->itemText(0), QStringLiteral("Local engine"));
  QCOMPARE(box->itemText(1), QStringLiteral("gpu-box:8000 · b"));  // the default model first
  QCOMPARE(box->itemText(2), QStringLiteral("gpu-box:8000 · a"));
  QVERIFY(chat.panel->setRunsOn(QStringLiteral("http://gpu-box:8000"), QStringLiteral("a")));
  QCOMPARE(chat.panel->runsOnModel(), QStringLiteral("a"));
  QVERIFY2(chat.panel->modelLabel()->text().contains(QLatin1String("a")), qPrintable(chat.panel->modelLabel()->text()));
  // No local model, but a server: the user can send.
  chat.panel->input()->setPlainText(QStringLiteral("hello"));
  QVERIFY(chat.panel->sendButton()->isEnabled());
  // The endpoint goes: back to the local engine, which has no model.
  chat.endpoints.remove(QStringLiteral("http://gpu-box:8000"));
  QCOMPARE(chat.panel->runsOnBaseUrl(), QString());
  QVERIFY(!chat.panel->sendButton()->isEnabled());
  QVERIFY(!chat.panel->setRunsOn(QStringLiteral("http://gpu-box:8000")));
}

void TestRemoteChat::repliesFromIwbServe() {
  const QString ranOn = QStringLiteral("127.0.0.1:%1 · %2").arg(m_serve.port()).arg(m_servedModel);
  qint64 conversation = 0;
  QString reply;
  {
    Chat chat(dbPath("iwb-serve"));
    QVERIFY(!chat.engine.hasModel());
    chat.endpoints.addOrUpdate(endpointAt(m_serve.baseUrl(), {m_servedModel}));
    QVERIFY(chat.panel->setRunsOn(m_serve.baseUrl(), m_servedModel));
    QSignalSpy tokens(chat.panel->remoteChat(), &RemoteChat::tokensReady);
    QSignalSpy finished(chat.panel.get(), &ChatPanel::replyFinished);
    QElapsedTimer sayTimer;
    sayTimer.start();
    QVERIFY(chat.say(QStringLiteral("Tell me a dream")));
    const double saySeconds = static_cast<double>(sayTimer.nsecsElapsed()) * 1e-9;
    QCOMPARE(finished.count(), 1);
    QVERIFY(tokens.count() >= 2);  // streamed: one queued signal per delta
    const auto stats = finished.at(0).at(1).value<GenerationStats>();
    QCOMPARE(stats.ranOn, ranOn);
    QVERIFY(!stats.isError());
    QVERIFY(stats.timeToFirstTokenSeconds > 0);
    QVERIFY(stats.numGeneratedTokens >= 2);
    QVERIFY(stats.numPromptTokens > 0);  // the server's usage
    // The rate is timed between the reads the tokens arrived in: a busy machine can deliver the
    // tiny model's whole reply in one read, and then there is no rate to show (0), not a made-up one.
    QVERIFY2(stats.generationSeconds >= 0 && stats.generationSeconds <= saySeconds,
             qPrintable(QString::number(stats.generationSeconds)));
    if (stats.generationSeconds > 0) {
      QVERIFY(qAbs(stats.tokensPerSecond() - (stats.numGeneratedTokens - 1) / stats.generationSeconds) < 1e-9);
    } else {
      QCOMPARE(stats.tokensPerSecond(), 0.0);
    }
    reply = chat.last().content;
    QVERIFY(!reply.trimmed().isEmpty());
    QCOMPARE(chat.last().role, QStringLiteral("assistant"));
    const QString line = chat.panel->messageModel()
                             ->index(chat.panel->messageModel()->rowCount() - 1)
                             .data(MessageListModel::StatsLineRole)
                             .toString();
    QVERIFY2(line.startsWith(ranOn) && line.contains(QLatin1String("TTFT")), qPrintable(line));
    QVERIFY(chat.panel->sendButton()->isEnabled() || chat.panel->input()->toPlainText().isEmpty());
    conversation = chat.panel->currentConversation();
  }
  // In the history as streamed, marked with where it ran.
  auto store = ConversationStore::open(dbPath("iwb-serve"));
  QVERIFY(store);
  const QList<StoredMessage> messages = *(*store)->messages(conversation);
  QCOMPARE(messages.size(), 2);
  QCOMPARE(messages.at(0).content, QStringLiteral("Tell me a dream"));
  QCOMPARE(messages.at(1).content, reply);
  QVERIFY(messages.at(1).isComplete);
  QCOMPARE(messages.at(1).stats.ranOn, ranOn);
  QVERIFY(messages.at(1).stats.timeToFirstTokenSeconds > 0);
}

void TestRemoteChat::samplingSettingsPassThrough() {
  Chat chat(dbPath("sampling"));
  chat.endpoints.addOrUpdate(endpointAt(m_serve.baseUrl(), {m_servedModel}));
  QVERIFY(chat.panel->setRunsOn(m_serve.baseUrl()));
  ChatSettingsPanel* settings = chat.panel->settingsPanel();
  settings->temperatureBox()->setValue(1.5);
  settings->seedBox()->setValue(1234);
  settings->maxTokensBox()->setValue(6);
  // max_tokens: the reply stops at 6 tokens.
  QVERIFY(chat.say(QStringLiteral("Once upon a time")));
  const GenerationStats first = chat.last().stats;
  QVERIFY2(first.numGeneratedTokens <= 6 && first.numGeneratedTokens > 0, qPrintable(first.summaryLine()));
  QCOMPARE(first.seed, quint64(1234));
  // seed: at a high temperature the same seed gives the same reply, as only a seeded sampler would.
  const QString firstText = chat.last().content;
  settings->maxTokensBox()->setValue(24);
  QVERIFY(chat.say(QStringLiteral("Tell me about the sea")));
  const QString a = chat.last().content;
  chat.panel->regenerate();
  QSignalSpy finished(chat.panel.get(), &ChatPanel::replyFinished);
  QVERIFY(finished.wait(kTimeoutMs));
  QCOMPARE(chat.last().content, a);
  QVERIFY(!firstText.isEmpty());
  // The reply format goes as OpenAI's response_format, and the server (iwb serve here) holds
  // the reply to it.
  settings->replyFormatBox()->setCurrentIndex(settings->replyFormatBox()->findData(QStringLiteral("json_schema")));
  settings->jsonSchemaEdit()->setPlainText(QStringLiteral(R"({"enum": ["yes", "no"]})"));
  QVERIFY(chat.say(QStringLiteral("Is the sea blue?")));
  QVERIFY2(chat.last().content == QStringLiteral("\"yes\"") || chat.last().content == QStringLiteral("\"no\""),
           qPrintable(chat.last().content));
  // A schema that is not JSON is refused before anything is sent.
  settings->jsonSchemaEdit()->setPlainText(QStringLiteral("{type: object"));
  QSignalSpy failed(chat.panel.get(), &ChatPanel::replyFailed);
  chat.panel->input()->setPlainText(QStringLiteral("Again?"));
  chat.panel->send();
  QVERIFY(failed.wait(kTimeoutMs));
  QVERIFY2(failed.first().first().toString().contains(QStringLiteral("not a JSON object")),
           qPrintable(failed.first().first().toString()));
  // A regex goes as vLLM's guided_regex, which iwb serve holds the reply to.
  settings->replyFormatBox()->setCurrentIndex(settings->replyFormatBox()->findData(QStringLiteral("regex")));
  settings->regexEdit()->setText(QStringLiteral("(yes|no)!"));
  QVERIFY(chat.say(QStringLiteral("Is the sea blue?")));
  QVERIFY2(chat.last().content == QStringLiteral("yes!") || chat.last().content == QStringLiteral("no!"),
           qPrintable(chat.last().content));
  settings->replyFormatBox()->setCurrentIndex(0);  // new chats take the last settings: text again
}

void TestRemoteChat::deadEndpointIsAMessage() {
  Chat chat(dbPath("dead"));
  const QString dead = QStringLiteral("http://127.0.0.1:%1").arg(iwb::test::closedPort());
  chat.endpoints.addOrUpdate(endpointAt(dead, {QStringLiteral("gone")}));
  QVERIFY(chat.panel->setRunsOn(dead));
  QSignalSpy failed(chat.panel.get(), &ChatPanel::replyFailed);
  QVERIFY(chat.say(QStringLiteral("anyone there?")));
  QCOMPARE(failed.count(), 1);
  QVERIFY2(failed.at(0).at(0).toString().contains(QLatin1String("127.0.0.1")),
           qPrintable(failed.at(0).at(0).toString()));
  QCOMPARE(chat.panel->messageBar()->kind(), MessageBar::Kind::Error);
  QCOMPARE(chat.panel->messageBar()->title(), QStringLiteral("The server could not answer"));
  // The user's message stays; the empty reply went, in the view and in the store.
  QCOMPARE(chat.panel->messageModel()->rowCount(), 1);
  QCOMPARE(chat.stored().size(), 1);
  QVERIFY(!chat.panel->isGenerating());
  // Still usable: the live server answers in the same conversation.
  chat.endpoints.addOrUpdate(endpointAt(m_serve.baseUrl(), {m_servedModel}));
  QVERIFY(chat.panel->setRunsOn(m_serve.baseUrl()));
  QSignalSpy finished(chat.panel.get(), &ChatPanel::replyFinished);
  QVERIFY(chat.say(QStringLiteral("and now?")));
  QCOMPARE(finished.count(), 1);
  QCOMPARE(chat.stored().size(), 3);
}

void TestRemoteChat::serverErrorIsAMessage() {
  FakeHttpServer broken([](const FakeRequest&, QTcpSocket* socket) {
    FakeHttpServer::respond(socket, 500, "application/json",
                            R"({"error":{"message":"CUDA out of memory","type":"server_error"}})");
  });
  Chat chat(dbPath("http-500"));
  chat.endpoints.addOrUpdate(endpointAt(broken.baseUrl(), {QStringLiteral("m")}));
  QVERIFY(chat.panel->setRunsOn(broken.baseUrl()));
  QSignalSpy failed(chat.panel.get(), &ChatPanel::replyFailed);
  QVERIFY(chat.say(QStringLiteral("hello")));
  QCOMPARE(failed.count(), 1);
  const QString message = failed.at(0).at(0).toString();
  QVERIFY2(message.contains(QLatin1String("500")) && message.contains(QLatin1String("CUDA out of memory")),
           qPrintable(message));
  QVERIFY(chat.panel->messageBar()->detail().contains(QLatin1String("CUDA out of memory")));
}

void TestRemoteChat::refusedKeyIsAMessage() {
  iwb::test::IwbServe keyed;
  QString why;
  QVERIFY2(keyed.start(m_gguf, {QStringLiteral("--api-key"), QStringLiteral("sk-right")}, &why), qPrintable(why));
  Chat chat(dbPath("bad-key"));
  RemoteEndpointInfo info = endpointAt(keyed.baseUrl(), {m_servedModel});
  info.hasApiKey = true;
  info.endpoint.api_key = "sk-wrong";  // what a stale keyring entry would give
  chat.endpoints.addOrUpdate(info);
  QVERIFY(chat.panel->setRunsOn(keyed.baseUrl()));
  QSignalSpy failed(chat.panel.get(), &ChatPanel::replyFailed);
  QVERIFY(chat.say(QStringLiteral("hello")));
  QCOMPARE(failed.count(), 1);
  QVERIFY2(failed.at(0).at(0).toString().contains(QLatin1String("refused the API key")),
           qPrintable(failed.at(0).at(0).toString()));
  // With the right key the same conversation goes on.
  chat.endpoints.setApiKey(keyed.baseUrl(), QStringLiteral("sk-right"));
  QSignalSpy finished(chat.panel.get(), &ChatPanel::replyFinished);
  QVERIFY(chat.say(QStringLiteral("hello again")));
  QCOMPARE(finished.count(), 1);
}

void TestRemoteChat::droppedStreamKeepsPartialText() {
  FakeHttpServer dropping(scriptedStream({QStringLiteral("The "), QStringLiteral("sea "), QStringLiteral("was")}, 30,
                                         QStringLiteral("drop")));
  Chat chat(dbPath("dropped"));
  chat.endpoints.addOrUpdate(endpointAt(dropping.baseUrl(), {QStringLiteral("m")}));
  QVERIFY(chat.panel->setRunsOn(dropping.baseUrl()));
  QSignalSpy finished(chat.panel.get(), &ChatPanel::replyFinished);
  QVERIFY(chat.say(QStringLiteral("tell me")));
  QCOMPARE(finished.count(), 1);
  const auto stats = finished.at(0).at(1).value<GenerationStats>();
  QVERIFY(stats.isError());
  QVERIFY2(stats.errorMessage.contains(QLatin1String("broke")), qPrintable(stats.errorMessage));
  QCOMPARE(chat.last().content, QStringLiteral("The sea was"));
  QCOMPARE(chat.stored().last().content, QStringLiteral("The sea was"));
  QVERIFY(chat.stored().last().stats.isError());
  QCOMPARE(chat.panel->messageBar()->title(), QStringLiteral("The server failed while writing the reply"));
  QVERIFY(chat.panel->messageModel()
              ->index(1)
              .data(MessageListModel::StatsLineRole)
              .toString()
              .contains(QLatin1String("cut off")));
  QVERIFY(!chat.panel->isGenerating());
  chat.panel->input()->setPlainText(QStringLiteral("again"));
  QVERIFY(chat.panel->sendButton()->isEnabled());
}

void TestRemoteChat::silentServerTimesOut() {
  FakeHttpServer silent(scriptedStream({QStringLiteral("Hello")}, 20, QStringLiteral("silent")));
  Chat chat(dbPath("silent"));
  chat.panel->remoteChat()->setReadTimeout(1.0);
  chat.endpoints.addOrUpdate(endpointAt(silent.baseUrl(), {QStringLiteral("m")}));
  QVERIFY(chat.panel->setRunsOn(silent.baseUrl()));
  QSignalSpy finished(chat.panel.get(), &ChatPanel::replyFinished);
  QVERIFY(chat.say(QStringLiteral("hi")));
  QCOMPARE(finished.count(), 1);
  const auto stats = finished.at(0).at(1).value<GenerationStats>();
  QVERIFY(stats.isError());
  QVERIFY2(stats.errorMessage.contains(QLatin1String("silent")), qPrintable(stats.errorMessage));
  QCOMPARE(chat.last().content, QStringLiteral("Hello"));
}

void TestRemoteChat::stopEndsARemoteReply() {
  QStringList many;
  for (int i = 0; i < 200; ++i) many << QStringLiteral("word%1 ").arg(i);
  FakeHttpServer slow(scriptedStream(many, 50, QStringLiteral("done")));
  Chat chat(dbPath("stop"));
  chat.endpoints.addOrUpdate(endpointAt(slow.baseUrl(), {QStringLiteral("m")}));
  QVERIFY(chat.panel->setRunsOn(slow.baseUrl()));
  QSignalSpy tokens(chat.panel->remoteChat(), &RemoteChat::tokensReady);
  QSignalSpy finished(chat.panel.get(), &ChatPanel::replyFinished);
  chat.panel->input()->setPlainText(QStringLiteral("go on"));
  chat.panel->send();
  QVERIFY(QTest::qWaitFor([&] { return tokens.count() >= 3; }, kTimeoutMs));
  QVERIFY(chat.panel->isGenerating());
  QVERIFY(chat.panel->stopButton()->isEnabled());
  QElapsedTimer timer;
  timer.start();
  QTest::mouseClick(chat.panel->stopButton(), Qt::LeftButton);
  QVERIFY(finished.wait(kTimeoutMs));
  QVERIFY2(timer.elapsed() < 2000, qPrintable(QString::number(timer.elapsed())));  // not the read timeout
  const auto stats = finished.at(0).at(1).value<GenerationStats>();
  QVERIFY(stats.isAborted());
  const QString text = chat.last().content;
  QVERIFY(text.startsWith(QLatin1String("word0 word1 word2")));
  QVERIFY(text.size() < many.join(QString()).size());
  QCOMPARE(chat.stored().last().content, text);
  QVERIFY(!chat.panel->isGenerating());
}

QTEST_MAIN(TestRemoteChat)

#include "test_remote_chat.moc"
