// Exporting a conversation (JSON and Markdown) and importing the JSON back (issue 19): through
// the chat panel's export and import over a SQLite store, export -> import -> export gives the
// same file, and the imported conversation equals the original field by field. Also the
// conversation list's titles (elided in the pane's width).
#include "chat/chat_panel.h"
#include "chat/conversation_list.h"
#include "chat/message_list_model.h"
#include "store/conversation_export.h"
#include "store/conversation_store.h"
#include "worker/engine_controller.h"

#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QListWidget>
#include <QScrollBar>
#include <QSettings>
#include <QStandardPaths>
#include <QTemporaryDir>
#include <QTest>

using namespace iwb::ui;

namespace {

QByteArray readAll(const QString& path) {
  QFile file(path);
  return file.open(QIODevice::ReadOnly) ? file.readAll() : QByteArray();
}

GenerationStats statsOf(int numGenerated, double ttft, double seconds, quint64 seed) {
  GenerationStats s;
  s.finishReason = QStringLiteral("end of generation");
  s.numPromptTokens = 23;
  s.numGeneratedTokens = numGenerated;
  s.timeToFirstTokenSeconds = ttft;
  s.generationSeconds = seconds;
  s.seed = seed;
  return s;
}

}  // namespace

class TestConversationExport : public QObject {
  Q_OBJECT

 private slots:
  void initTestCase();
  void exportImportRoundTripsExactly();
  void markdownExportReads();
  void importRefusesOtherFiles();
  void listElidesLongTitles();

 private:
  qint64 makeConversation(ConversationStore& store);
  QTemporaryDir m_dir;
};

void TestConversationExport::initTestCase() {
  QVERIFY(m_dir.isValid());
  QSettings::setDefaultFormat(QSettings::IniFormat);
  QSettings::setPath(QSettings::IniFormat, QSettings::UserScope, m_dir.filePath(QStringLiteral("settings")));
  QStandardPaths::setTestModeEnabled(true);
}

qint64 TestConversationExport::makeConversation(ConversationStore& store) {
  Conversation info;
  info.title = QStringLiteral("Sums — and \"quotes\"");
  info.modelPath = QStringLiteral("/models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf");
  info.systemPrompt = QStringLiteral("Answer with code.\nBe brief.");
  info.sampling.temperature = 0.35;
  info.sampling.topK = 17;
  info.sampling.topP = 0.9;
  info.sampling.seed = 1234567890123LL;  // beyond the panel's int seed box: kept exactly
  info.sampling.maxTokens = 321;
  auto c = store.createConversation(info);
  if (!c) return 0;
  store.appendMessage(c->id, QStringLiteral("user"), QStringLiteral("How do I sum a list?"));
  store.appendMessage(c->id, QStringLiteral("assistant"),
                      QStringLiteral("Use `sum`:\n\n```python\nprint(sum([1, 2, 3]))\n```\n"), true,
                      statsOf(17, 0.123456789, 0.987654321, 42));
  store.appendMessage(c->id, QStringLiteral("user"), QStringLiteral("ünïcödé ✓ and a tab\there"));
  store.appendMessage(c->id, QStringLiteral("assistant"), QStringLiteral("Stopped mid"), false,
                      statsOf(3, 1.0 / 3.0, 2.0 / 7.0, 18446744073709551615ULL));
  return c->id;
}

void TestConversationExport::exportImportRoundTripsExactly() {
  auto store = ConversationStore::open(m_dir.filePath(QStringLiteral("roundtrip.sqlite")));
  QVERIFY(store);
  const qint64 id = makeConversation(**store);
  QVERIFY(id > 0);
  EngineController engine;
  ChatPanel panel(&engine, store->get());

  const QString first = m_dir.filePath(QStringLiteral("first.json"));
  QVERIFY(panel.exportConversation(id, first).is_ok());
  const QJsonObject json = QJsonDocument::fromJson(readAll(first)).object();
  QCOMPARE(json.value(QStringLiteral("format")).toString(), QStringLiteral("inference-workbench.conversation"));
  QCOMPARE(json.value(QStringLiteral("model")).toObject().value(QStringLiteral("name")).toString(),
           QStringLiteral("qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"));
  QCOMPARE(json.value(QStringLiteral("sampling")).toObject().value(QStringLiteral("top_k")).toInt(), 17);
  const QJsonObject replyStats =
      json.value(QStringLiteral("messages")).toArray().at(1).toObject().value(QStringLiteral("stats")).toObject();
  QCOMPARE(replyStats.value(QStringLiteral("ttft_s")).toDouble(), 0.123456789);
  QCOMPARE(replyStats.value(QStringLiteral("generated_tokens")).toInt(), 17);

  auto imported = panel.importConversation(first);
  QVERIFY2(imported, imported ? "" : imported.error_message().c_str());
  QVERIFY(*imported != id);
  QCOMPARE(panel.currentConversation(), *imported);
  QCOMPARE(panel.messageModel()->rowCount(), 4);

  // Field by field against the original...
  const Conversation a = *(*store)->conversation(id), b = *(*store)->conversation(*imported);
  QCOMPARE(b.title, a.title);
  QCOMPARE(b.modelPath, a.modelPath);
  QCOMPARE(b.systemPrompt, a.systemPrompt);
  QCOMPARE(QJsonDocument(b.sampling.toJson()).toJson(), QJsonDocument(a.sampling.toJson()).toJson());
  QCOMPARE(b.created, a.created);
  QCOMPARE(b.updated, a.updated);
  const QList<StoredMessage> ma = *(*store)->messages(id), mb = *(*store)->messages(*imported);
  QCOMPARE(mb.size(), ma.size());
  for (qsizetype i = 0; i < ma.size(); ++i) {
    QCOMPARE(mb[i].role, ma[i].role);
    QCOMPARE(mb[i].content, ma[i].content);
    QCOMPARE(mb[i].position, ma[i].position);
    QCOMPARE(mb[i].isComplete, ma[i].isComplete);
    QCOMPARE(mb[i].stats.toJson(), ma[i].stats.toJson());
    QCOMPARE(mb[i].stats.seed, ma[i].stats.seed);
  }
  // ...and the export of the import is the same file, byte for byte.
  const QString second = m_dir.filePath(QStringLiteral("second.json"));
  QVERIFY(panel.exportConversation(*imported, second).is_ok());
  QCOMPARE(readAll(second), readAll(first));
}

void TestConversationExport::markdownExportReads() {
  auto store = ConversationStore::open(m_dir.filePath(QStringLiteral("markdown.sqlite")));
  QVERIFY(store);
  const qint64 id = makeConversation(**store);
  // A gpt-oss reply as generated: the export shows its reasoning as a quote, and no markers.
  (*store)->appendMessage(id, QStringLiteral("user"), QStringLiteral("In one word?"));
  (*store)->appendMessage(id, QStringLiteral("assistant"),
                          QStringLiteral("<|channel|>analysis<|message|>One word: sum.\nDone.<|end|><|start|>assistant"
                                         "<|channel|>final<|message|>Sum."),
                          true, statsOf(9, 0.1, 0.2, 7));
  EngineController engine;
  ChatPanel panel(&engine, store->get());
  const QString path = m_dir.filePath(QStringLiteral("chat.md"));
  QVERIFY(panel.exportConversation(id, path).is_ok());
  const QString md = QString::fromUtf8(readAll(path));
  QVERIFY(md.startsWith(QStringLiteral("# Sums — and \"quotes\"\n")));
  QVERIFY(md.contains(QStringLiteral("- Model: `qwen2.5-coder-1.5b-instruct-q4_k_m.gguf`")));
  QVERIFY(md.contains(QStringLiteral("temperature 0.35")));
  QVERIFY(md.contains(QStringLiteral("## System\n\nAnswer with code.\nBe brief.")));
  QVERIFY(md.contains(QStringLiteral("## You\n\nHow do I sum a list?")));
  QVERIFY(md.contains(QStringLiteral("```python\nprint(sum([1, 2, 3]))\n```")));
  QVERIFY(md.contains(QStringLiteral("*TTFT 0.12 s")));  // per-reply timings
  QVERIFY2(md.contains(QStringLiteral("## Assistant\n\n> **Reasoning**\n>\n> One word: sum.\n> Done.\n\nSum.\n")),
           qPrintable(md));
  QVERIFY(!md.contains(QStringLiteral("<|")));
}

void TestConversationExport::importRefusesOtherFiles() {
  auto store = ConversationStore::open(m_dir.filePath(QStringLiteral("refuse.sqlite")));
  QVERIFY(store);
  EngineController engine;
  ChatPanel panel(&engine, store->get());
  const QString path = m_dir.filePath(QStringLiteral("other.json"));
  QFile file(path);
  QVERIFY(file.open(QIODevice::WriteOnly));
  file.write(R"({"messages": []})");
  file.close();
  auto imported = panel.importConversation(path);
  QVERIFY(!imported);
  QVERIFY(QString::fromStdString(imported.error_message()).contains(QStringLiteral("Not a conversation")));
  QCOMPARE((*store)->listConversations()->size(), 0);
  auto newer = conversationFromJson(R"({"format": "inference-workbench.conversation", "version": 9})");
  QVERIFY(!newer);
  QVERIFY(QString::fromStdString(newer.error_message()).contains(QStringLiteral("version 9")));
}

// A title that grows past the pane's width (the automatic title from the first prompt replaces
// "New Chat") is elided; the list never scrolls sideways (it did: the item kept its new text
// width and a horizontal scroll bar appeared under the titles).
void TestConversationExport::listElidesLongTitles() {
  ConversationList list;
  Conversation c;
  c.id = 7;
  c.title = QStringLiteral("New Chat");
  list.setConversations({c});
  list.resize(220, 300);
  list.show();
  QVERIFY(QTest::qWaitForWindowExposed(&list));
  const QString longTitle =
      QStringLiteral("Write a C function that reverses a string in place, with a short explanation.");
  list.setTitle(7, longTitle);
  QCoreApplication::processEvents();
  QCOMPARE(list.titleAt(0), longTitle);  // the whole title stays the item's text (and tooltip)
  QListWidget* widget = list.listWidget();
  QVERIFY(!widget->horizontalScrollBar()->isVisible());
  QCOMPARE(widget->horizontalScrollBar()->maximum(), 0);
}

QTEST_MAIN(TestConversationExport)
#include "test_conversation_export.moc"
