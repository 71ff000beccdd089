// Tests of the chat panel's context use with a real model (the aidreams 260K llama2.c model,
// converted to GGUF for the test): the context meter counts what is sent, a message that
// would overflow the 128-token context asks first (leave out the oldest turns, or start a new
// chat), the token probabilities shown are the engine's own top-k, and the reply format holds
// replies to JSON or a schema (the settings panel says whether the schema compiles).
#include "aidreams_fixture.h"
#include "chat/chat_input.h"
#include "chat/chat_panel.h"
#include "chat/chat_settings_panel.h"
#include "chat/context_meter.h"
#include "chat/message_list_model.h"
#include "chat/message_view.h"
#include "iwb/engine/chat/chat_prompt.h"
#include "iwb/engine/runtime/engine.h"
#include "iwb/engine/tokenizer/tokenizer.h"
#include "store/conversation_store.h"
#include "worker/engine_controller.h"

#include <QComboBox>
#include <QLabel>
#include <QLineEdit>
#include <QMessageBox>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QRegularExpression>
#include <QSettings>
#include <QSignalSpy>
#include <QSpinBox>
#include <QStandardPaths>
#include <QTemporaryDir>
#include <QTest>

#include <memory>
#include <utility>

using namespace iwb::ui;

namespace {
constexpr int kTimeoutMs = 20000;
}  // namespace

class TestChatContext : public QObject {
  Q_OBJECT

 private slots:
  void initTestCase();
  void contextMeterCountsWhatIsSent();
  void overflowLeavesOutOldestTurns();
  void overflowStartsNewChat();
  void tokenProbabilitiesAreTheEnginesTopK();
  void replyFormatHoldsRepliesToTheSchema();
  void thinkingControlsReachThePrompt();
  void replyOfAPromptThatOpenedThinkingIsReasoning();

 private:
  QTemporaryDir m_dir;
  QString m_modelPath;
};

void TestChatContext::initTestCase() {
  QVERIFY(m_dir.isValid());
  QSettings::setDefaultFormat(QSettings::IniFormat);
  QSettings::setPath(QSettings::IniFormat, QSettings::UserScope, m_dir.filePath(QStringLiteral("settings")));
  QCoreApplication::setOrganizationName(QStringLiteral("Inference Workbench Tests"));
  QCoreApplication::setApplicationName(QStringLiteral("test_chat_context"));
  QStandardPaths::setTestModeEnabled(true);

  QString why;
  m_modelPath = iwb::test::convertAidreamsModel(m_dir.path(), &why);
  if (m_modelPath.isEmpty()) {
    if (!iwb::test::hasAidreamsModel()) QSKIP(qPrintable(why));
    QFAIL(qPrintable(why));
  }
}

namespace {

QString words(int n, const QString& word) {
  QStringList list;
  for (int i = 0; i < n; ++i) list << word;
  return list.join(QLatin1Char(' '));
}

// Types `text` into the panel's input and waits for the context meter to count it.
bool typeAndCount(ChatPanel& panel, const QString& text) {
  QSignalSpy counted(&panel, &ChatPanel::contextCounted);
  panel.input()->setPlainText(text);
  return counted.wait(kTimeoutMs);
}

// Sends messages of 8 words until the next one would overflow aidreams' 128-token context.
bool fillContext(ChatPanel& panel) {
  panel.settingsPanel()->systemPromptEdit()->clear();
  panel.settingsPanel()->maxTokensBox()->setValue(4);
  for (int i = 0; i < 10; ++i) {
    if (!typeAndCount(panel, words(8, QStringLiteral("dream")))) return false;
    if (panel.contextMeter()->state() == ContextMeter::State::Overflows) return true;
    QSignalSpy finished(&panel, &ChatPanel::replyFinished);
    panel.send();
    if (!finished.wait(kTimeoutMs)) return false;
  }
  return false;
}

}  // namespace

void TestChatContext::contextMeterCountsWhatIsSent() {
  EngineController engine;
  auto store = ConversationStore::open(m_dir.filePath(QStringLiteral("meter/conversations.sqlite")));
  QVERIFY(store);
  ChatPanel panel(&engine, store->get());
  QVERIFY(iwb::test::loadModelAndWait(engine, m_modelPath, kTimeoutMs));
  panel.settingsPanel()->maxTokensBox()->setValue(4);
  panel.settingsPanel()->systemPromptEdit()->setPlainText(QStringLiteral("You dream."));
  QVERIFY(typeAndCount(panel, QStringLiteral("Tell me a dream")));
  const int numCounted = panel.contextMeter()->numTokens();
  QVERIFY(numCounted > 4);
  QCOMPARE(panel.contextMeter()->contextLength(), 128);
  QCOMPARE(panel.contextMeter()->state(), ContextMeter::State::Fits);
  QVERIFY2(panel.contextMeter()->text().startsWith(QStringLiteral("%1 / 128 tokens").arg(numCounted)),
           qPrintable(panel.contextMeter()->text()));
  // The count is the prompt the worker then builds: the system prompt, the template, the text.
  QSignalSpy started(&engine, &EngineController::generationStarted);
  QSignalSpy finished(&panel, &ChatPanel::replyFinished);
  panel.send();
  QVERIFY(finished.wait(kTimeoutMs));
  QCOMPARE(started.count(), 1);
  QCOMPARE(started.first().at(1).toInt(), numCounted);
  // After the reply the meter counts the conversation with its reply, and grows with typing.
  QTRY_VERIFY_WITH_TIMEOUT(panel.contextMeter()->numTokens() > numCounted, kTimeoutMs);
  const int afterReply = panel.contextMeter()->numTokens();
  QVERIFY(typeAndCount(panel, QStringLiteral("And another")));
  QVERIFY(panel.contextMeter()->numTokens() > afterReply);
  // A reply of up to 120 tokens no longer fits: the meter warns before sending.
  QSignalSpy counted(&panel, &ChatPanel::contextCounted);
  panel.settingsPanel()->maxTokensBox()->setValue(120);
  QVERIFY(counted.wait(kTimeoutMs));
  QCOMPARE(panel.contextMeter()->state(), ContextMeter::State::Tight);
  QVERIFY(panel.contextMeter()->text().contains(QStringLiteral("cut off")));
}

void TestChatContext::overflowLeavesOutOldestTurns() {
  EngineController engine;
  auto store = ConversationStore::open(m_dir.filePath(QStringLiteral("shorten/conversations.sqlite")));
  QVERIFY(store);
  ChatPanel panel(&engine, store->get());
  QVERIFY(iwb::test::loadModelAndWait(engine, m_modelPath, kTimeoutMs));
  QVERIFY(fillContext(panel));
  const int numRows = panel.messageModel()->rowCount();
  QVERIFY2(numRows >= 4, qPrintable(panel.contextMeter()->text()));
  // The turns the prompt is built from: the history (failed or empty replies left out), then
  // the message about to be sent.
  QList<ChatTurn> sent = panel.messageModel()->turns();
  sent.push_back({QStringLiteral("user"), panel.input()->toPlainText()});
  QSignalSpy shortened(&engine, &EngineController::promptShortened);
  QSignalSpy finished(&panel, &ChatPanel::replyFinished);
  panel.send();
  QTRY_VERIFY_WITH_TIMEOUT(panel.overflowQuestion() != nullptr, kTimeoutMs);
  QVERIFY(panel.messageModel()->rowCount() == numRows);  // nothing sent before the answer
  panel.overflowQuestion()->findChild<QPushButton*>(QStringLiteral("shortenButton"))->click();
  QVERIFY(finished.wait(kTimeoutMs));
  QVERIFY(panel.isShorteningToFit());
  QCOMPARE(shortened.count(), 1);
  const int numLeftOut = shortened.first().at(1).toInt();
  // Whole exchanges: what stays of the turns sent starts with a user turn. (Sampled replies
  // may be empty, and the prompt leaves empty replies out, so the count need not be even.)
  QVERIFY2(numLeftOut >= 1 && numLeftOut < sent.size(), qPrintable(QString::number(numLeftOut)));
  QCOMPARE(sent.at(numLeftOut).role, QStringLiteral("user"));
  // The history keeps everything; the meter says what the prompt leaves out.
  QCOMPARE(panel.messageModel()->rowCount(), numRows + 2);
  QCOMPARE((*store)->messages(panel.currentConversation())->size(), numRows + 2);
  QTRY_VERIFY_WITH_TIMEOUT(panel.contextMeter()->text().contains(QStringLiteral("left out")), kTimeoutMs);
  QVERIFY(panel.contextMeter()->state() != ContextMeter::State::Overflows);
}

void TestChatContext::overflowStartsNewChat() {
  EngineController engine;
  auto store = ConversationStore::open(m_dir.filePath(QStringLiteral("newchat/conversations.sqlite")));
  QVERIFY(store);
  ChatPanel panel(&engine, store->get());
  QVERIFY(iwb::test::loadModelAndWait(engine, m_modelPath, kTimeoutMs));
  QVERIFY(fillContext(panel));
  const qint64 oldConversation = panel.currentConversation();
  const int numOldRows = panel.messageModel()->rowCount();
  QSignalSpy finished(&panel, &ChatPanel::replyFinished);
  panel.send();
  QTRY_VERIFY_WITH_TIMEOUT(panel.overflowQuestion() != nullptr, kTimeoutMs);
  panel.overflowQuestion()->findChild<QPushButton*>(QStringLiteral("newChatButton"))->click();
  QVERIFY(finished.wait(kTimeoutMs));
  QVERIFY(panel.currentConversation() != oldConversation);
  QCOMPARE(panel.messageModel()->rowCount(), 2);
  QCOMPARE(panel.messageModel()->item(0).message.content, words(8, QStringLiteral("dream")));
  QCOMPARE((*store)->messages(oldConversation)->size(), numOldRows);
}

void TestChatContext::tokenProbabilitiesAreTheEnginesTopK() {
  EngineController engine;
  ChatPanel panel(&engine, nullptr);
  QVERIFY(iwb::test::loadModelAndWait(engine, m_modelPath, kTimeoutMs));
  panel.setShowsTokenProbabilities(true);
  // Greedy without a repeat penalty: the chosen token is the raw logits' top one.
  SamplingSettings greedy;
  greedy.temperature = 0;
  greedy.repeatPenalty = 1.0;
  greedy.maxTokens = 12;
  panel.settingsPanel()->setValues(QString(), greedy);
  QSignalSpy finished(&panel, &ChatPanel::replyFinished);
  panel.input()->setPlainText(QStringLiteral("Tell me a dream"));
  panel.send();
  QVERIFY(finished.wait(kTimeoutMs));
  const MessageListModel::Item& reply = panel.messageModel()->item(1);
  QVERIFY(reply.tokenSpans.size() >= 4);

  // The same prompt through an engine of the test's own, without the GUI: its logits' top 5.
  auto direct = iwb::Engine::load(m_modelPath.toStdString(), {});
  QVERIFY(direct);
  auto prompt =
      iwb::build_chat_prompt((*direct)->tokenizer(), (*direct)->chat_template(), {{"user", "Tell me a dream"}}, {});
  QVERIFY(prompt);
  iwb::GenerationRequest request;
  request.prompt_tokens = prompt->tokens;
  request.stop_strings = prompt->stop_strings;
  request.sampling = panel.settingsPanel()->sampling().toSamplingParams(0);
  request.max_new_tokens = 12;
  request.num_top_logprobs = ChatPanel::kNumTopAlternatives;
  QVERIFY((*direct)->add_request(std::move(request)));
  std::vector<iwb::TokenEvent> events;
  while ((*direct)->has_unfinished_requests()) {
    auto step = (*direct)->step();
    QVERIFY(step);
    for (auto& t : step->tokens) {
      if (!t.text.empty()) events.push_back(t);
    }
  }
  // A reply does not start with blanks: the panel drops a first token that is only a blank.
  while (!events.empty() && QString::fromStdString(events.front().text).trimmed().isEmpty())
    events.erase(events.begin());
  QCOMPARE(qsizetype(events.size()), reply.tokenSpans.size());
  for (size_t i = 0; i < events.size(); ++i) {
    const TokenProbability& shown = reply.tokenSpans[qsizetype(i)].probability;
    QCOMPARE(shown.alternatives.size(), qsizetype(ChatPanel::kNumTopAlternatives));
    QVERIFY(qAbs(shown.probability - std::exp(double(events[i].logprob))) < 1e-6);
    double previous = 1.0;
    for (qsizetype k = 0; k < shown.alternatives.size(); ++k) {
      const iwb::TokenLogprob& top = events[i].top_logprobs[size_t(k)];
      const iwb::tokenizer::TokenId id = top.token;
      QCOMPARE(shown.alternatives[k].text,
               QString::fromStdString((*direct)->tokenizer().decode(std::span<const iwb::tokenizer::TokenId>(&id, 1))));
      QVERIFY(qAbs(shown.alternatives[k].probability - std::exp(double(top.logprob))) < 1e-6);
      QVERIFY(shown.alternatives[k].probability <= previous);
      previous = shown.alternatives[k].probability;
    }
    // Greedy: the token written is the most likely one.
    QCOMPARE(events[i].token, events[i].top_logprobs.front().token);
    QVERIFY(qAbs(shown.probability - shown.alternatives.front().probability) < 1e-9);
  }
  // The spans tile the reply's text, in order.
  int end = 0;
  for (const auto& span : reply.tokenSpans) {
    QCOMPARE(span.start, end);
    end = span.start + span.length;
  }
  QCOMPARE(end, int(reply.message.content.size()));
  // The hover names the token and its alternatives.
  const QString tip = MessageDelegate::tokenToolTip(reply.message.content.mid(0, reply.tokenSpans[0].length),
                                                    reply.tokenSpans[0].probability);
  QVERIFY(tip.contains(QStringLiteral("most likely")));
  QCOMPARE(tip.count(QStringLiteral("<tr>")), ChatPanel::kNumTopAlternatives);
  // The view finds the token under the mouse.
  panel.resize(1000, 700);
  panel.show();
  QVERIFY(QTest::qWaitForWindowExposed(&panel));
  MessageView* view = panel.messageView();
  const QModelIndex index = panel.messageModel()->index(1);
  const QRect item = view->visualRect(index);
  const QRect bubble = view->messageDelegate()->bubbleRect(item, index);
  QCOMPARE(view->messageDelegate()->tokenAt(item, index, bubble.topLeft() + QPoint(12, 14)), 0);
  QCOMPARE(view->messageDelegate()->documentFor(index), nullptr);   // shown as written, coloured
  panel.settingsPanel()->setValues(QString(), SamplingSettings{});  // the next tests' defaults
}

void TestChatContext::replyFormatHoldsRepliesToTheSchema() {
  EngineController engine;
  ChatPanel panel(&engine, nullptr);
  QVERIFY(iwb::test::loadModelAndWait(engine, m_modelPath, kTimeoutMs));
  ChatSettingsPanel* settings = panel.settingsPanel();
  panel.resize(1000, 700);
  panel.show();
  QVERIFY(QTest::qWaitForWindowExposed(&panel));
  // The schema editor shows only for "JSON schema", and says at once what is wrong.
  QVERIFY(!settings->jsonSchemaEdit()->isVisible());
  settings->replyFormatBox()->setCurrentIndex(settings->replyFormatBox()->findData(QStringLiteral("json_schema")));
  QVERIFY(settings->jsonSchemaEdit()->isVisible());
  QVERIFY(settings->schemaStatusLabel()->text().contains(QStringLiteral("none is written")));
  settings->jsonSchemaEdit()->setPlainText(QStringLiteral(R"({"type": "integer", "multipleOf": 5})"));
  QVERIFY2(settings->schemaStatusLabel()->text().contains(QStringLiteral("'multipleOf' is not supported")),
           qPrintable(settings->schemaStatusLabel()->text()));
  // Sending with that schema fails with the same reason, and nothing is generated.
  QSignalSpy failed(&panel, &ChatPanel::replyFailed);
  panel.input()->setPlainText(QStringLiteral("Pick a color"));
  panel.send();
  QVERIFY(failed.wait(kTimeoutMs));
  QVERIFY(failed.first().first().toString().contains(QStringLiteral("'multipleOf' is not supported")));

  settings->jsonSchemaEdit()->setPlainText(QStringLiteral(R"({"enum": ["red", "green", "blue"]})"));
  QCOMPARE(settings->schemaStatusLabel()->text(), QStringLiteral("Replies will fit this schema."));
  const SamplingSettings chosen = settings->sampling();
  QCOMPARE(chosen.replyFormat, QStringLiteral("json_schema"));
  QCOMPARE(SamplingSettings::fromJson(chosen.toJson()), chosen);  // kept with the conversation
  QSignalSpy finished(&panel, &ChatPanel::replyFinished);
  panel.input()->setPlainText(QStringLiteral("Pick a color"));
  panel.send();
  QVERIFY(finished.wait(kTimeoutMs));
  const QString reply = panel.messageModel()->item(panel.messageModel()->rowCount() - 1).message.content;
  QVERIFY2(
      reply == QStringLiteral("\"red\"") || reply == QStringLiteral("\"green\"") || reply == QStringLiteral("\"blue\""),
      qPrintable(reply));
  // Regex: its own line editor, checked as typed, and the reply's whole text matches it.
  settings->replyFormatBox()->setCurrentIndex(settings->replyFormatBox()->findData(QStringLiteral("regex")));
  QVERIFY(settings->regexEdit()->isVisible());
  QVERIFY(!settings->jsonSchemaEdit()->isVisible());
  settings->regexEdit()->setText(QStringLiteral("(red|blue"));
  QVERIFY2(settings->schemaStatusLabel()->text().contains(QStringLiteral("without ')'")),
           qPrintable(settings->schemaStatusLabel()->text()));
  settings->regexEdit()->setText(QStringLiteral("(red|blue) [a-z]{2,8}\\."));
  QCOMPARE(settings->schemaStatusLabel()->text(), QStringLiteral("Replies will match this regex."));
  QCOMPARE(SamplingSettings::fromJson(settings->sampling().toJson()), settings->sampling());
  QSignalSpy regexFinished(&panel, &ChatPanel::replyFinished);
  panel.input()->setPlainText(QStringLiteral("Pick a color"));
  panel.send();
  QVERIFY(regexFinished.wait(kTimeoutMs));
  const QString matched = panel.messageModel()->item(panel.messageModel()->rowCount() - 1).message.content;
  QVERIFY2(QRegularExpression(QStringLiteral("^(red|blue) [a-z]{2,8}\\.$")).match(matched).hasMatch(),
           qPrintable(matched));
  // Back to text for the other tests.
  settings->replyFormatBox()->setCurrentIndex(0);
  QVERIFY(!settings->jsonSchemaEdit()->isVisible());
  QVERIFY(!settings->regexEdit()->isVisible());
  QCOMPARE(settings->sampling().replyFormat, QStringLiteral("text"));
}

// The Thinking and Reasoning effort pickers reach the prompt the worker builds: with SmolLM3's
// template, thinking on writes its long reasoning instructions and off only its short identity
// line ("/no_think", an empty think block); with gpt-oss's, the effort is its "Reasoning:" line.
// Both are kept with the conversation's settings.
void TestChatContext::thinkingControlsReachThePrompt() {
  EngineController engine;
  ChatPanel panel(&engine, nullptr);
  QVERIFY(iwb::test::loadModelAndWait(engine, m_modelPath, kTimeoutMs));
  ChatSettingsPanel* settings = panel.settingsPanel();
  settings->systemPromptEdit()->clear();
  const auto useTemplate = [&](const QString& family) {
    const int row = settings->templateBox()->findData(family);
    settings->templateBox()->setCurrentIndex(row);
    emit settings->templateBox()->activated(row);
  };
  const auto countWith = [&](QComboBox* box, const QString& value) {
    QSignalSpy counted(&panel, &ChatPanel::contextCounted);
    box->setCurrentIndex(box->findData(value));
    return counted.wait(kTimeoutMs) ? panel.contextMeter()->numTokens() : -1;
  };
  useTemplate(QStringLiteral("smollm3"));
  QVERIFY(typeAndCount(panel, QStringLiteral("Hi")));
  const int on = countWith(settings->thinkingBox(), QStringLiteral("on"));
  const int off = countWith(settings->thinkingBox(), QStringLiteral("off"));
  QVERIFY2(off > 0 && on > off, qPrintable(QStringLiteral("on %1, off %2").arg(on).arg(off)));
  QCOMPARE(SamplingSettings::fromJson(settings->sampling().toJson()).thinking, QStringLiteral("off"));

  useTemplate(QStringLiteral("harmony"));
  QVERIFY(typeAndCount(panel, QStringLiteral("Hello")));
  const int low = countWith(settings->reasoningEffortBox(), QStringLiteral("low"));
  const int medium = countWith(settings->reasoningEffortBox(), QStringLiteral("medium"));
  QVERIFY2(low > 0 && medium > low, qPrintable(QStringLiteral("low %1, medium %2").arg(low).arg(medium)));
  QCOMPARE(SamplingSettings::fromJson(settings->sampling().toJson()).reasoningEffort, QStringLiteral("medium"));
  // Back to the defaults for the other tests.
  settings->thinkingBox()->setCurrentIndex(0);
  settings->reasoningEffortBox()->setCurrentIndex(0);
  useTemplate(QStringLiteral("auto"));
}

// GLM-4.7's prompt ends inside an open think block, and so does Qwen3.5's ("<think>\n", picked
// by its name in the list): the reply is reasoning until it writes </think> (aidreams never does
// in 4 tokens), so the chat shows it as reasoning, not as an answer.
void TestChatContext::replyOfAPromptThatOpenedThinkingIsReasoning() {
  EngineController engine;
  ChatPanel panel(&engine, nullptr);
  QVERIFY(iwb::test::loadModelAndWait(engine, m_modelPath, kTimeoutMs));
  ChatSettingsPanel* settings = panel.settingsPanel();
  settings->systemPromptEdit()->clear();
  settings->maxTokensBox()->setValue(4);
  for (const auto& [family, shown] : {std::pair{QStringLiteral("glm-4.7"), QStringLiteral("GLM-4.7")},
                                      std::pair{QStringLiteral("qwen3.5"), QStringLiteral("Qwen3.5")}}) {
    const int row = settings->templateBox()->findData(family);
    QVERIFY2(row >= 0, qPrintable(family));
    QCOMPARE(settings->templateBox()->itemText(row), shown);
    settings->templateBox()->setCurrentIndex(row);
    emit settings->templateBox()->activated(row);
    QVERIFY(typeAndCount(panel, QStringLiteral("Tell me a dream")));
    QSignalSpy finished(&panel, &ChatPanel::replyFinished);
    panel.send();
    QVERIFY(finished.wait(kTimeoutMs));
    const MessageListModel* messages = panel.messageModel();
    const QModelIndex reply = messages->index(messages->rowCount() - 1);
    QCOMPARE(reply.data(MessageListModel::RoleRole).toString(), QStringLiteral("assistant"));
    QVERIFY(reply.data(Qt::DisplayRole).toString().startsWith(QStringLiteral("<think>")));
    QVERIFY2(!reply.data(MessageListModel::ReasoningRole).toString().isEmpty(), qPrintable(family));
    QVERIFY2(reply.data(MessageListModel::AnswerRole).toString().isEmpty(), qPrintable(family));
  }
  settings->templateBox()->setCurrentIndex(settings->templateBox()->findData(QStringLiteral("auto")));
}

QTEST_MAIN(TestChatContext)
#include "test_chat_context.moc"
