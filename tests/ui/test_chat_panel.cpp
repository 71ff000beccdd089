// Tests of chatting with a real model (the aidreams 260K llama2.c model, converted to GGUF for
// the test): the engine controller and its worker thread (load, stream, failures), and the
// chat panel over a SQLite store — send, stream, stop midway, regenerate, edit, a prompt too
// long for the context — then everything found again after the panel and store are gone.
#include "aidreams_fixture.h"
#include "chat/chat_input.h"
#include "chat/chat_panel.h"
#include "chat/chat_settings_panel.h"
#include "chat/context_meter.h"
#include "chat/conversation_list.h"
#include "chat/message_list_model.h"
#include "chat/message_view.h"
#include "main_window/main_window.h"
#include "store/conversation_store.h"
#include "widgets/message_bar.h"
#include "worker/engine_controller.h"
#include "worker/engine_worker.h"

#include <QComboBox>
#include <QDoubleSpinBox>
#include <QLabel>
#include <QMessageBox>
#include <QPushButton>
#include <QSemaphore>
#include <QSettings>
#include <QSignalSpy>
#include <QSpinBox>
#include <QStandardPaths>
#include <QTabWidget>
#include <QTemporaryDir>
#include <QTest>
#include <QThread>

#include <atomic>
#include <memory>

using namespace iwb::ui;

namespace {

constexpr int kTimeoutMs = 20000;

GenerationInput greedyInput(const QString& message, int maxTokens) {
  GenerationInput input;
  input.messages = {{QStringLiteral("user"), message}};
  input.sampling.temperature = 0;  // greedy: the same reply every time
  input.sampling.maxTokens = maxTokens;
  return input;
}

// A message longer than aidreams' 128-token context.
QString tooLongMessage() {
  QStringList words;
  for (int i = 0; i < 200; ++i) words << QStringLiteral("dream");
  return words.join(QLatin1Char(' '));
}

// Holds the engine worker inside its `atToken`-th tokensReady signal until release(), so a
// test can act (stop, fail) at a known point of a reply however fast the model is. The state
// is shared with the worker-thread slot, so it outlives a test that ends early; the destructor
// lets the worker go before the engine waits for its thread.
class WorkerGate {
 public:
  WorkerGate(EngineWorker* worker, int atToken) : m_state(std::make_shared<State>()) {
    m_connection = QObject::connect(
        worker, &EngineWorker::tokensReady, worker,
        [state = m_state, atToken] {
          if (++state->numTokens == atToken) {
            state->isHeld = true;
            state->gate.acquire();
          }
        },
        Qt::DirectConnection);
  }
  ~WorkerGate() {
    QObject::disconnect(m_connection);
    release();
  }
  bool isHeld() const { return m_state->isHeld; }
  // A permit given before the worker reaches the gate lets it pass straight through.
  void release() {
    if (!m_isReleased) {
      m_isReleased = true;
      m_state->gate.release();
    }
  }

 private:
  struct State {
    QSemaphore gate;
    std::atomic<int> numTokens{0};
    std::atomic<bool> isHeld{false};
  };
  std::shared_ptr<State> m_state;
  QMetaObject::Connection m_connection;
  bool m_isReleased = false;
};

QString withoutLeadingBlanks(QString text) {
  while (!text.isEmpty() && text.front().isSpace()) text.remove(0, 1);
  return text;
}

}  // namespace

class TestChatPanel : public QObject {
  Q_OBJECT

 private slots:
  void initTestCase();
  void controllerLoadsAndStreams();
  void loadFailuresAreMessages();
  void promptLongerThanContextIsRefused();
  void panelStreamsStopsAndKeepsHistory();
  void panelRegeneratesAndEdits();
  void panelReportsTooLongPrompt();
  void panelKeepsPartialReplyOnEngineError();
  void templateChoiceIsRememberedPerModel();
  void mainWindowLoadsOpenedModelForChat();

 private:
  QTemporaryDir m_dir;
  QString m_modelPath;
};

void TestChatPanel::initTestCase() {
  QVERIFY(m_dir.isValid());
  QSettings::setDefaultFormat(QSettings::IniFormat);
  QSettings::setPath(QSettings::IniFormat, QSettings::UserScope, m_dir.filePath(QStringLiteral("settings")));
  QCoreApplication::setOrganizationName(QStringLiteral("Inference Workbench Tests"));
  QCoreApplication::setApplicationName(QStringLiteral("test_chat_panel"));
  QStandardPaths::setTestModeEnabled(true);

  QString why;
  m_modelPath = iwb::test::convertAidreamsModel(m_dir.path(), &why);
  if (m_modelPath.isEmpty()) {
    if (!iwb::test::hasAidreamsModel()) QSKIP(qPrintable(why));
    QFAIL(qPrintable(why));
  }
}

void TestChatPanel::controllerLoadsAndStreams() {
  EngineController engine;
  QVERIFY(engine.workerThread()->isRunning());
  QVERIFY(engine.workerThread() != QThread::currentThread());
  QSignalSpy progress(&engine, &EngineController::modelLoadProgress);
  QSignalSpy loaded(&engine, &EngineController::modelLoaded);
  engine.loadModel(m_modelPath);
  QVERIFY(engine.isLoading());  // asynchronous: nothing happened yet on this thread
  QVERIFY(loaded.wait(kTimeoutMs));
  QVERIFY(!engine.isLoading());
  QVERIFY(progress.count() >= 2);
  QCOMPARE(progress.last().at(0).toDouble(), 1.0);
  for (qsizetype i = 1; i < progress.count(); ++i) {  // the stages' shares never go backwards
    QVERIFY(progress.at(i).at(0).toDouble() >= progress.at(i - 1).at(0).toDouble());
  }
  const auto model = loaded.first().at(0).value<LoadedModel>();
  QVERIFY(model.loadSeconds > 0);  // the status bar's "loaded in"
  QCOMPARE(model.path, m_modelPath);
  QCOMPARE(model.name, QStringLiteral("aidreams260K"));
  QCOMPARE(model.architecture, QStringLiteral("llama"));
  QCOMPARE(model.contextLength, 128);
  QCOMPARE(model.detectedTemplate, QStringLiteral("plain"));  // no template in the file
  QVERIFY(!model.hasChatTemplate);

  // Tokens stream one signal at a time from the worker thread; the reply ends at 12 tokens.
  QSignalSpy started(&engine, &EngineController::generationStarted);
  QSignalSpy tokens(&engine, &EngineController::tokensReady);
  QSignalSpy finished(&engine, &EngineController::generationFinished);
  std::atomic<bool> isOnWorkerThread{false};
  connect(
      engine.worker(), &EngineWorker::tokensReady, engine.worker(),
      [&] { isOnWorkerThread = QThread::currentThread() != QCoreApplication::instance()->thread(); },
      Qt::DirectConnection);
  const quint64 id = engine.generate(greedyInput(QStringLiteral("Tell me a dream"), 12));
  QVERIFY(engine.isGenerating());
  QCOMPARE(engine.activeRequest(), id);
  QVERIFY(finished.wait(kTimeoutMs));
  QVERIFY(!engine.isGenerating());
  QVERIFY(isOnWorkerThread);
  QCOMPARE(started.count(), 1);
  QVERIFY(started.first().at(1).toInt() > 3);  // prompt tokens
  QVERIFY(tokens.count() >= 1);
  QString text;
  for (const auto& args : tokens) {
    QCOMPARE(args.at(0).toULongLong(), id);
    text += args.at(1).toString();
  }
  QVERIFY(!text.trimmed().isEmpty());
  const auto stats = finished.first().at(1).value<GenerationStats>();
  QCOMPARE(finished.first().at(0).toULongLong(), id);
  QVERIFY2(
      stats.finishReason == QLatin1String("max tokens") || stats.finishReason == QLatin1String("end of generation"),
      qPrintable(stats.finishReason));
  QVERIFY(stats.numGeneratedTokens >= tokens.count());
  QVERIFY(stats.numGeneratedTokens <= 12);
  QCOMPARE(stats.numPromptTokens, started.first().at(1).toInt());
  QVERIFY(stats.timeToFirstTokenSeconds > 0);

  // Greedy decoding is deterministic: the same input gives the same text.
  tokens.clear();
  finished.clear();
  engine.generate(greedyInput(QStringLiteral("Tell me a dream"), 12));
  QVERIFY(finished.wait(kTimeoutMs));
  QString again;
  for (const auto& args : tokens) again += args.at(1).toString();
  QCOMPARE(again, text);
}

void TestChatPanel::loadFailuresAreMessages() {
  EngineController engine;
  QSignalSpy failed(&engine, &EngineController::modelLoadFailed);
  engine.loadModel(m_dir.filePath(QStringLiteral("missing.gguf")));
  QVERIFY(failed.wait(kTimeoutMs));
  QVERIFY(failed.last().at(1).toString().contains(QStringLiteral("does not exist")));
  QVERIFY(!engine.hasModel());

  // A file that is not a model at all.
  const QString junk = m_dir.filePath(QStringLiteral("junk.gguf"));
  QFile file(junk);
  QVERIFY(file.open(QIODevice::WriteOnly));
  file.write("GGUF but then nothing sensible");
  file.close();
  engine.loadModel(junk);
  QVERIFY(failed.wait(kTimeoutMs));
  QVERIFY(!failed.last().at(1).toString().isEmpty());

  // Generating without a model answers with a message, not a crash.
  QSignalSpy genFailed(&engine, &EngineController::generationFailed);
  engine.generate(greedyInput(QStringLiteral("hello"), 4));
  QVERIFY(genFailed.wait(kTimeoutMs));
  QVERIFY(!engine.isGenerating());

  // A good model after failures loads normally.
  QVERIFY(iwb::test::loadModelAndWait(engine, m_modelPath, kTimeoutMs));
  // A load failure frees the previous model: the engine never runs a model the user replaced.
  engine.loadModel(junk);
  QVERIFY(failed.wait(kTimeoutMs));
  QVERIFY(!engine.hasModel());
}

void TestChatPanel::promptLongerThanContextIsRefused() {
  EngineController engine;
  QVERIFY(iwb::test::loadModelAndWait(engine, m_modelPath, kTimeoutMs));
  QSignalSpy failed(&engine, &EngineController::generationFailed);
  QSignalSpy finished(&engine, &EngineController::generationFinished);
  engine.generate(greedyInput(tooLongMessage(), 8));
  QVERIFY(failed.wait(kTimeoutMs));
  const QString message = failed.first().at(1).toString();
  QVERIFY2(message.contains(QStringLiteral("context holds 128 tokens")), qPrintable(message));
  QCOMPARE(finished.count(), 0);
  QVERIFY(!engine.isGenerating());
  // The engine is still usable.
  engine.generate(greedyInput(QStringLiteral("hi"), 3));
  QVERIFY(finished.wait(kTimeoutMs));
}

void TestChatPanel::panelStreamsStopsAndKeepsHistory() {
  const QString dbPath = m_dir.filePath(QStringLiteral("stop/conversations.sqlite"));
  qint64 conversationId = 0;
  QString streamedText;
  {
    EngineController engine;
    auto store = ConversationStore::open(dbPath);
    QVERIFY2(store, store.error_message().c_str());
    ChatPanel panel(&engine, store->get());
    panel.show();
    QVERIFY(!panel.sendButton()->isEnabled());  // no model yet
    QVERIFY(iwb::test::loadModelAndWait(engine, m_modelPath, kTimeoutMs));
    QCOMPARE(panel.settingsPanel()->templateOverride(), QStringLiteral("auto"));
    QVERIFY(panel.settingsPanel()->templateBox()->isEnabled());

    // No limit on the reply; greedy. The reply would run to the end of the context.
    panel.settingsPanel()->temperatureBox()->setValue(0);
    panel.settingsPanel()->maxTokensBox()->setValue(0);

    // Hold the worker at its third token until the GUI has asked to stop, so the stop lands
    // midway however fast the model is.
    WorkerGate gate(engine.worker(), 3);

    QSignalSpy tokens(&engine, &EngineController::tokensReady);
    QSignalSpy replyFinished(&panel, &ChatPanel::replyFinished);
    QTest::keyClicks(panel.input(), QStringLiteral("Tell me a dream"));
    QVERIFY(panel.sendButton()->isEnabled());
    QTest::keyClick(panel.input(), Qt::Key_Return);  // Enter sends
    QVERIFY(panel.isGenerating());
    QVERIFY(panel.input()->toPlainText().isEmpty());
    QVERIFY(panel.stopButton()->isEnabled());
    QVERIFY(!panel.sendButton()->isEnabled());
    QVERIFY(!panel.conversationList()->isEnabled());
    conversationId = panel.currentConversation();
    QVERIFY(conversationId != 0);
    QCOMPARE(panel.messageModel()->rowCount(), 2);
    QVERIFY(panel.messageModel()->item(1).isStreaming);

    QTRY_VERIFY_WITH_TIMEOUT(tokens.count() == 3, kTimeoutMs);  // three tokens reached the GUI thread
    QTRY_VERIFY(gate.isHeld());  // and the worker is (or is about to be) held after the third
    QString soFar;
    for (const auto& args : tokens) soFar += args.at(1).toString();
    QCOMPARE(panel.messageModel()->item(1).message.content, withoutLeadingBlanks(soFar));  // streamed live
    QTest::mouseClick(panel.stopButton(), Qt::LeftButton);
    gate.release();
    QVERIFY(replyFinished.wait(kTimeoutMs));

    const auto stats = replyFinished.first().at(1).value<GenerationStats>();
    QCOMPARE(stats.finishReason, QStringLiteral("aborted"));
    QVERIFY(stats.numGeneratedTokens >= 3);
    QVERIFY(stats.numGeneratedTokens < 100);  // it did not run to the end of the context
    for (const auto& args : tokens) streamedText += args.at(1).toString();
    // The panel drops the blanks a reply would start with (the space after "Assistant:").
    streamedText = withoutLeadingBlanks(streamedText);
    QVERIFY(!streamedText.isEmpty());
    const MessageListModel::Item& reply = panel.messageModel()->item(1);
    QCOMPARE(reply.message.content, streamedText);
    QVERIFY(!reply.isStreaming);
    QVERIFY(panel.messageModel()
                ->index(1)
                .data(MessageListModel::StatsLineRole)
                .toString()
                .contains(QStringLiteral("stopped")));
    QVERIFY(!panel.isGenerating());
    QVERIFY(panel.sendButton()->isEnabled() == false);  // empty input
    QVERIFY(panel.regenerateButton()->isEnabled());
    QCOMPARE(panel.conversationList()->titleAt(0), QStringLiteral("Tell me a dream"));

    // Shift+Enter is a new line, not a send.
    QTest::keyClicks(panel.input(), QStringLiteral("line one"));
    QTest::keyClick(panel.input(), Qt::Key_Return, Qt::ShiftModifier);
    QVERIFY(!panel.isGenerating());
    QCOMPARE(panel.input()->toPlainText(), QStringLiteral("line one\n"));
  }  // panel, store and engine are gone: as after quitting the program

  auto store = ConversationStore::open(dbPath);
  QVERIFY(store);
  auto conversations = (*store)->listConversations();
  QCOMPARE(conversations->size(), 1);
  QCOMPARE(conversations->first().id, conversationId);
  QCOMPARE(conversations->first().modelPath, m_modelPath);
  QCOMPARE(conversations->first().sampling.temperature, 0.0);
  auto messages = (*store)->messages(conversationId);
  QCOMPARE(messages->size(), 2);
  QCOMPARE(messages->at(0).role, QStringLiteral("user"));
  QCOMPARE(messages->at(0).content, QStringLiteral("Tell me a dream"));
  QCOMPARE(messages->at(1).role, QStringLiteral("assistant"));
  QCOMPARE(messages->at(1).content, streamedText);  // the partial reply, as streamed
  QVERIFY(messages->at(1).isComplete);
  QCOMPARE(messages->at(1).stats.finishReason, QStringLiteral("aborted"));

  // A new panel (the next start of the program) reopens the last conversation.
  EngineController engine;
  ChatPanel panel(&engine, store->get());
  QCOMPARE(panel.currentConversation(), conversationId);
  QCOMPARE(panel.messageModel()->rowCount(), 2);
  QCOMPARE(panel.messageModel()->item(1).message.content, streamedText);
  QCOMPARE(panel.settingsPanel()->sampling().temperature, 0.0);
}

void TestChatPanel::panelRegeneratesAndEdits() {
  EngineController engine;
  auto store = ConversationStore::open(m_dir.filePath(QStringLiteral("edit/conversations.sqlite")));
  QVERIFY(store);
  ChatPanel panel(&engine, store->get());
  panel.show();
  QVERIFY(iwb::test::loadModelAndWait(engine, m_modelPath, kTimeoutMs));
  panel.newConversation();
  const qint64 id = panel.currentConversation();
  QVERIFY(id != 0);
  QCOMPARE(panel.conversationList()->count(), 1);
  panel.newConversation();  // the current one is still empty: no second empty conversation
  QCOMPARE(panel.conversationList()->count(), 1);

  panel.settingsPanel()->maxTokensBox()->setValue(6);
  panel.settingsPanel()->seedBox()->setValue(7);
  QSignalSpy finished(&panel, &ChatPanel::replyFinished);
  panel.input()->setPlainText(QStringLiteral("Once upon a time"));
  panel.send();
  QVERIFY(finished.wait(kTimeoutMs));
  panel.input()->setPlainText(QStringLiteral("And then?"));
  panel.send();
  QVERIFY(finished.wait(kTimeoutMs));
  QCOMPARE(panel.messageModel()->rowCount(), 4);
  const qint64 lastReplyId = panel.messageModel()->item(3).message.id;

  // Regenerate replaces the last reply; the seed is fixed, so the text comes out the same.
  const QString lastReply = panel.messageModel()->item(3).message.content;
  QTest::mouseClick(panel.regenerateButton(), Qt::LeftButton);
  QVERIFY(panel.isGenerating());
  QVERIFY(finished.wait(kTimeoutMs));
  QCOMPARE(panel.messageModel()->rowCount(), 4);
  QVERIFY(panel.messageModel()->item(3).message.id != lastReplyId);
  QCOMPARE(panel.messageModel()->item(3).message.content, lastReply);
  QCOMPARE((*store)->messages(id)->size(), 4);

  // Edit the first message: the conversation continues from there.
  panel.beginEdit(1);  // an assistant row cannot be edited
  QCOMPARE(panel.editingRow(), -1);
  panel.beginEdit(0);
  QCOMPARE(panel.editingRow(), 0);
  QCOMPARE(panel.input()->toPlainText(), QStringLiteral("Once upon a time"));
  QVERIFY(!panel.regenerateButton()->isEnabled());
  panel.input()->setPlainText(QStringLiteral("A robot dreamed"));
  panel.send();
  QCOMPARE(panel.editingRow(), -1);
  QVERIFY(finished.wait(kTimeoutMs));
  QCOMPARE(panel.messageModel()->rowCount(), 2);
  auto messages = (*store)->messages(id);
  QCOMPARE(messages->size(), 2);
  QCOMPARE(messages->at(0).content, QStringLiteral("A robot dreamed"));
  QCOMPARE(messages->at(1).position, 1);
  QVERIFY(messages->at(1).stats.isValid());

  // Escape cancels an edit and leaves the conversation alone.
  panel.beginEdit(0);
  QTest::keyClick(panel.input(), Qt::Key_Escape);
  QCOMPARE(panel.editingRow(), -1);
  QVERIFY(panel.input()->toPlainText().isEmpty());
  QCOMPARE(panel.messageModel()->rowCount(), 2);

  // Rename, then a second conversation, switch back, delete.
  panel.renameConversation(id, QStringLiteral("  Robot   story "));
  QCOMPARE((*store)->conversation(id)->title, QStringLiteral("Robot story"));
  QCOMPARE(panel.conversationList()->titleAt(0), QStringLiteral("Robot story"));
  panel.renameConversation(id, QStringLiteral("   "));  // refused
  QCOMPARE((*store)->conversation(id)->title, QStringLiteral("Robot story"));
  panel.newConversation();
  const qint64 second = panel.currentConversation();
  QVERIFY(second != id);
  QCOMPARE(panel.messageModel()->rowCount(), 0);
  QVERIFY(panel.selectConversation(id));
  QCOMPARE(panel.messageModel()->rowCount(), 2);
  panel.deleteConversation(id);
  QVERIFY(!(*store)->conversation(id));
  QCOMPARE(panel.currentConversation(), second);
  QCOMPARE(panel.conversationList()->count(), 1);
}

void TestChatPanel::panelReportsTooLongPrompt() {
  EngineController engine;
  auto store = ConversationStore::open(m_dir.filePath(QStringLiteral("long/conversations.sqlite")));
  QVERIFY(store);
  ChatPanel panel(&engine, store->get());
  QVERIFY(iwb::test::loadModelAndWait(engine, m_modelPath, kTimeoutMs));
  QSignalSpy failed(&panel, &ChatPanel::replyFailed);
  panel.input()->setPlainText(tooLongMessage());
  panel.send();
  // Asked first (the meter counted it too long); leaving out older turns can't help a single
  // message, so the worker's message follows.
  QTRY_VERIFY_WITH_TIMEOUT(panel.overflowQuestion() != nullptr, kTimeoutMs);
  QCOMPARE(panel.contextMeter()->state(), ContextMeter::State::Overflows);
  panel.overflowQuestion()->findChild<QPushButton*>(QStringLiteral("shortenButton"))->click();
  QVERIFY(failed.wait(kTimeoutMs));
  QVERIFY(!panel.isGenerating());
  QVERIFY(!panel.messageBar()->isHidden());
  QCOMPARE(panel.messageBar()->kind(), MessageBar::Kind::Error);
  QVERIFY2(panel.messageBar()->detail().contains(QStringLiteral("context holds 128 tokens")),
           qPrintable(panel.messageBar()->detail()));
  // The user's message is kept (it is theirs); the empty reply row is gone.
  QCOMPARE(panel.messageModel()->rowCount(), 1);
  QCOMPARE((*store)->messages(panel.currentConversation())->size(), 1);
  // Editing it down to something that fits gets an answer.
  QSignalSpy finished(&panel, &ChatPanel::replyFinished);
  panel.settingsPanel()->maxTokensBox()->setValue(4);
  panel.beginEdit(0);
  panel.input()->setPlainText(QStringLiteral("A short dream"));
  panel.send();
  QVERIFY(finished.wait(kTimeoutMs));
  QCOMPARE((*store)->messages(panel.currentConversation())->size(), 2);
  QVERIFY(panel.messageBar()->isHidden());
}

void TestChatPanel::panelKeepsPartialReplyOnEngineError() {
  EngineController engine;
  auto store = ConversationStore::open(m_dir.filePath(QStringLiteral("error/conversations.sqlite")));
  QVERIFY(store);
  ChatPanel panel(&engine, store->get());
  QVERIFY(iwb::test::loadModelAndWait(engine, m_modelPath, kTimeoutMs));
  panel.settingsPanel()->maxTokensBox()->setValue(0);

  WorkerGate gate(engine.worker(), 3);
  QSignalSpy tokens(&engine, &EngineController::tokensReady);
  QSignalSpy finished(&panel, &ChatPanel::replyFinished);
  panel.input()->setPlainText(QStringLiteral("Tell me a dream"));
  panel.send();
  QTRY_VERIFY_WITH_TIMEOUT(tokens.count() == 3, kTimeoutMs);
  QTRY_VERIFY(gate.isHeld());
  const QString partial = panel.messageModel()->item(1).message.content;
  QVERIFY(!partial.isEmpty());

  // The engine reports a failure for this reply (as EngineWorker does when a step fails).
  GenerationStats failure;
  failure.finishReason = QStringLiteral("error");
  failure.errorMessage = QStringLiteral("simulated kernel failure");
  failure.numGeneratedTokens = 1;
  emit engine.generationFinished(engine.activeRequest(), failure);
  QCOMPARE(finished.count(), 1);
  QVERIFY(!panel.isGenerating());
  QCOMPARE(panel.messageBar()->kind(), MessageBar::Kind::Error);
  QVERIFY(panel.messageBar()->detail().contains(QStringLiteral("simulated kernel failure")));
  QVERIFY(panel.messageBar()->detail().contains(QStringLiteral("kept")));
  const QModelIndex reply = panel.messageModel()->index(1);
  QVERIFY(reply.data(MessageListModel::IsErrorRole).toBool());
  QVERIFY(reply.data(MessageListModel::StatsLineRole).toString().contains(QStringLiteral("cut off")));
  auto messages = (*store)->messages(panel.currentConversation());
  QCOMPARE(messages->size(), 2);
  QCOMPARE(messages->at(1).content, partial);  // the partial reply is kept, and marked
  QVERIFY(messages->at(1).stats.isError());

  // The worker's own (later) end of that reply is ignored: it was already closed.
  engine.stop();
  gate.release();
  QTRY_VERIFY_WITH_TIMEOUT(!engine.isGenerating(), kTimeoutMs);
  QCOMPARE(finished.count(), 1);
  QCOMPARE((*store)->messages(panel.currentConversation())->at(1).content, partial);
}

void TestChatPanel::templateChoiceIsRememberedPerModel() {
  EngineController engine;
  ChatPanel panel(&engine, nullptr);  // no history: chatting still works, unsaved
  QVERIFY(!panel.messageBar()->isHidden());
  QComboBox* box = panel.settingsPanel()->templateBox();
  QVERIFY(!box->isEnabled());  // nothing to choose for before a model is loaded
  QVERIFY(iwb::test::loadModelAndWait(engine, m_modelPath, kTimeoutMs));
  QVERIFY(box->isEnabled());
  QCOMPARE(box->currentText(), QStringLiteral("Auto (Plain)"));
  const int chatml = box->findData(QStringLiteral("chatml"));
  QVERIFY(chatml > 0);
  box->setCurrentIndex(chatml);
  emit box->activated(chatml);  // as a user's pick would
  QCOMPARE(QSettings().value(ChatPanel::templateSettingsKey(m_modelPath)).toString(), QStringLiteral("chatml"));

  // The reply is written with the chosen template; an unsaved conversation still answers.
  QSignalSpy finished(&panel, &ChatPanel::replyFinished);
  panel.settingsPanel()->maxTokensBox()->setValue(3);
  panel.settingsPanel()->temperatureBox()->setValue(0);
  panel.input()->setPlainText(QStringLiteral("hello"));
  panel.send();
  QVERIFY(finished.wait(kTimeoutMs));
  QCOMPARE(panel.messageModel()->rowCount(), 2);
  QCOMPARE(panel.currentConversation(), 0);
  QCOMPARE(panel.messageModel()->item(0).message.content, QStringLiteral("hello"));  // the reply went to its own row
  QVERIFY(!panel.messageModel()->item(1).message.content.isEmpty());

  // Loading the model again (another start of the program) brings the choice back.
  QVERIFY(iwb::test::loadModelAndWait(engine, m_modelPath, kTimeoutMs));
  QCOMPARE(panel.settingsPanel()->templateOverride(), QStringLiteral("chatml"));
  QSettings().remove(ChatPanel::templateSettingsKey(m_modelPath));
}

void TestChatPanel::mainWindowLoadsOpenedModelForChat() {
  MainWindow window(nullptr, m_dir.filePath(QStringLiteral("window/conversations.sqlite")));
  QCOMPARE(window.tabs()->widget(0), window.chatPanel());        // Chat comes first, before the panels
  QCOMPARE(window.tabs()->currentWidget(), window.modelPage());  // the welcome page first
  QSignalSpy loaded(window.engine(), &EngineController::modelLoaded);
  window.openModel(m_modelPath);
  QVERIFY(loaded.wait(kTimeoutMs));
  QCOMPARE(window.engine()->model().path, m_modelPath);
  QCOMPARE(window.tabs()->currentWidget(), window.chatPanel());
  QVERIFY(window.chatPanel()->modelLabel()->text().contains(QStringLiteral("aidreams260K")));

  // The model is generating when the window goes away: it must not hang or crash.
  window.chatPanel()->settingsPanel()->maxTokensBox()->setValue(0);
  window.chatPanel()->input()->setPlainText(QStringLiteral("Dream on"));
  window.chatPanel()->send();
  QVERIFY(window.chatPanel()->isGenerating());
}

QTEST_MAIN(TestChatPanel)
#include "test_chat_panel.moc"
