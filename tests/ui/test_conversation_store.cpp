// Tests of the SQLite conversation store: conversations (create, rename, settings, delete
// with its messages, list order), messages (append, update, truncate), durability settings,
// everything found again through a second store object, and the schema version checks.
#include "store/conversation_store.h"

#include <QProcess>
#include <QSqlDatabase>
#include <QSqlQuery>
#include <QTemporaryDir>
#include <QTest>
#include <QThread>

#include <cstdio>

using namespace iwb::ui;

namespace {

// Opens `path` with a connection of the test's own, to look at what the store wrote.
template <typename F>
void withRawConnection(const QString& path, F&& f) {
  {
    QSqlDatabase db = QSqlDatabase::addDatabase(QStringLiteral("QSQLITE"), QStringLiteral("raw"));
    db.setDatabaseName(path);
    QVERIFY(db.open());
    f(db);
    db.close();
  }
  QSqlDatabase::removeDatabase(QStringLiteral("raw"));
}

Conversation conversationNamed(const QString& title) {
  Conversation c;
  c.title = title;
  c.modelPath = QStringLiteral("/models/tiny.gguf");
  c.systemPrompt = QStringLiteral("Be brief.");
  c.sampling.temperature = 0.3;
  c.sampling.topK = 7;
  c.sampling.seed = 1234567890123LL;  // beyond int: stored as text
  c.sampling.maxTokens = 99;
  return c;
}

}  // namespace

class TestConversationStore : public QObject {
  Q_OBJECT

 private slots:
  void init();
  void createsSchemaWithVersionAndDurability();
  void createsRenamesAndListsConversations();
  void appendsUpdatesAndTruncatesMessages();
  void deleteRemovesMessagesToo();
  void everythingSurvivesReopening();
  void refusesNewerSchemaAndBadIds();
  void samplingJsonRoundTripsAndToleratesJunk();
  void finishedMessageSurvivesKill();

 private:
  std::unique_ptr<ConversationStore> openStore();
  QTemporaryDir m_dir;
  QString m_path;
};

void TestConversationStore::init() {
  QVERIFY(m_dir.isValid());
  m_path = m_dir.filePath(QStringLiteral("%1/conversations.sqlite").arg(QTest::currentTestFunction()));
}

std::unique_ptr<ConversationStore> TestConversationStore::openStore() {
  auto store = ConversationStore::open(m_path);
  if (!store) qWarning("open failed: %s", store.error_message().c_str());
  return store ? std::move(*store) : nullptr;
}

void TestConversationStore::createsSchemaWithVersionAndDurability() {
  auto store = openStore();
  QVERIFY(store);  // the sub-folder did not exist: open creates it
  QCOMPARE(store->schemaVersion(), ConversationStore::kSchemaVersion);
  QCOMPARE(store->path(), QFileInfo(m_path).absoluteFilePath());
  QVERIFY(store->listConversations()->isEmpty());
  store.reset();
  withRawConnection(m_path, [](QSqlDatabase& db) {
    QSqlQuery q(db);
    QVERIFY(q.exec(QStringLiteral("PRAGMA journal_mode")) && q.next());
    QCOMPARE(q.value(0).toString(), QStringLiteral("wal"));  // persistent in the file
    QVERIFY(q.exec(QStringLiteral("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")));
    QStringList tables;
    while (q.next()) tables << q.value(0).toString();
    QVERIFY2(tables.contains(QStringLiteral("conversations")) && tables.contains(QStringLiteral("messages")),
             qPrintable(tables.join(QLatin1Char(','))));
  });
}

void TestConversationStore::createsRenamesAndListsConversations() {
  auto store = openStore();
  QVERIFY(store);
  auto first = store->createConversation(conversationNamed(QStringLiteral("First")));
  QVERIFY2(first, first.error_message().c_str());
  QVERIFY(first->id > 0);
  QCOMPARE(first->title, QStringLiteral("First"));
  QCOMPARE(first->systemPrompt, QStringLiteral("Be brief."));
  QCOMPARE(first->sampling, conversationNamed(QString()).sampling);
  QVERIFY(first->created.isValid());
  QCOMPARE(first->created.timeSpec(), Qt::UTC);
  QTest::qWait(5);  // distinct update times
  auto second = store->createConversation(conversationNamed(QStringLiteral("Second")));
  QVERIFY(second && second->id != first->id);

  auto list = store->listConversations();
  QVERIFY(list);
  QCOMPARE(list->size(), 2);
  QCOMPARE(list->at(0).title, QStringLiteral("Second"));  // newest first

  QTest::qWait(5);
  QVERIFY(store->renameConversation(first->id, QStringLiteral("Renamed")).is_ok());
  list = store->listConversations();
  QCOMPARE(list->at(0).title, QStringLiteral("Renamed"));  // a rename is a change: it moves up
  QCOMPARE(list->at(0).id, first->id);

  Conversation changed = *store->conversation(second->id);
  changed.systemPrompt = QStringLiteral("Answer in French.");
  changed.sampling.temperature = 0.0;
  QVERIFY(store->updateConversationSettings(changed).is_ok());
  QCOMPARE(store->conversation(second->id)->systemPrompt, QStringLiteral("Answer in French."));
  QCOMPARE(store->conversation(second->id)->sampling.temperature, 0.0);
}

void TestConversationStore::appendsUpdatesAndTruncatesMessages() {
  auto store = openStore();
  QVERIFY(store);
  const qint64 id = store->createConversation(conversationNamed(QStringLiteral("Chat")))->id;
  auto u0 = store->appendMessage(id, QStringLiteral("user"), QStringLiteral("Hello"));
  QVERIFY2(u0, u0.error_message().c_str());
  QCOMPARE(u0->position, 0);
  auto a1 = store->appendMessage(id, QStringLiteral("assistant"), QString(), /*isComplete=*/false);
  QVERIFY2(a1, a1.error_message().c_str());  // empty text is fine (a reply about to stream)
  QCOMPARE(a1->position, 1);

  GenerationStats stats;
  stats.finishReason = QStringLiteral("end of generation");
  stats.numPromptTokens = 12;
  stats.numGeneratedTokens = 5;
  stats.timeToFirstTokenSeconds = 0.25;
  stats.generationSeconds = 0.5;
  stats.seed = 42;
  QVERIFY(store->updateMessage(a1->id, QStringLiteral("Hi there — ünïcödé ✓"), stats, true).is_ok());
  auto u2 = store->appendMessage(id, QStringLiteral("user"), QStringLiteral("Second question"));
  auto a3 = store->appendMessage(id, QStringLiteral("assistant"), QStringLiteral("Second answer"), true, stats);
  QCOMPARE(a3->position, 3);

  auto messages = store->messages(id);
  QVERIFY(messages);
  QCOMPARE(messages->size(), 4);
  const StoredMessage& reply = messages->at(1);
  QCOMPARE(reply.content, QStringLiteral("Hi there — ünïcödé ✓"));
  QVERIFY(reply.isComplete);
  QCOMPARE(reply.stats.finishReason, stats.finishReason);
  QCOMPARE(reply.stats.numPromptTokens, 12);
  QCOMPARE(reply.stats.numGeneratedTokens, 5);
  QCOMPARE(reply.stats.seed, quint64{42});
  QCOMPARE(reply.stats.tokensPerSecond(), 8.0);  // 4 tokens after the first in 0.5 s
  QVERIFY(!messages->at(0).stats.isValid());     // user messages carry no stats

  // Edit the second question: keep the first two messages, then continue.
  QVERIFY(store->truncateMessages(id, 2).is_ok());
  messages = store->messages(id);
  QCOMPARE(messages->size(), 2);
  QCOMPARE(messages->last().id, a1->id);
  auto again = store->appendMessage(id, QStringLiteral("user"), QStringLiteral("Edited question"));
  QCOMPARE(again->position, 2);  // positions stay contiguous
  QVERIFY(again->id != u2->id);

  // A role the schema does not know is refused by the database, with a message.
  auto bad = store->appendMessage(id, QStringLiteral("narrator"), QStringLiteral("x"));
  QVERIFY(!bad);
  QVERIFY(!bad.error_message().empty());
}

void TestConversationStore::deleteRemovesMessagesToo() {
  auto store = openStore();
  QVERIFY(store);
  const qint64 keep = store->createConversation(conversationNamed(QStringLiteral("Keep")))->id;
  const qint64 drop = store->createConversation(conversationNamed(QStringLiteral("Drop")))->id;
  QVERIFY(store->appendMessage(keep, QStringLiteral("user"), QStringLiteral("a")));
  QVERIFY(store->appendMessage(drop, QStringLiteral("user"), QStringLiteral("b")));
  QVERIFY(store->appendMessage(drop, QStringLiteral("assistant"), QStringLiteral("c")));
  QVERIFY(store->deleteConversation(drop).is_ok());
  QCOMPARE(store->listConversations()->size(), 1);
  QVERIFY(!store->conversation(drop));
  QCOMPARE(store->messages(keep)->size(), 1);
  store.reset();
  withRawConnection(m_path, [](QSqlDatabase& db) {
    QSqlQuery q(db);
    QVERIFY(q.exec(QStringLiteral("SELECT COUNT(*) FROM messages")) && q.next());
    QCOMPARE(q.value(0).toInt(), 1);  // the cascade removed the dropped conversation's two rows
  });
}

void TestConversationStore::everythingSurvivesReopening() {
  qint64 id = 0;
  {
    auto store = openStore();
    QVERIFY(store);
    id = store->createConversation(conversationNamed(QStringLiteral("Persistent")))->id;
    QVERIFY(store->appendMessage(id, QStringLiteral("user"), QStringLiteral("Remember me")));
    auto reply = store->appendMessage(id, QStringLiteral("assistant"), QStringLiteral("Half a rep"), false);
    QVERIFY(reply);
    // Two stores on one file (two windows): the second sees the first's committed rows.
    auto other = ConversationStore::open(m_path);
    QVERIFY(other);
    QCOMPARE((*other)->messages(id)->size(), 2);
  }
  auto store = openStore();
  QVERIFY(store);
  auto conversation = store->conversation(id);
  QVERIFY(conversation);
  QCOMPARE(conversation->title, QStringLiteral("Persistent"));
  QCOMPARE(conversation->modelPath, QStringLiteral("/models/tiny.gguf"));
  QCOMPARE(conversation->sampling.seed, 1234567890123LL);
  auto messages = store->messages(id);
  QCOMPARE(messages->size(), 2);
  QCOMPARE(messages->at(0).content, QStringLiteral("Remember me"));
  QCOMPARE(messages->at(1).content, QStringLiteral("Half a rep"));
  QVERIFY(!messages->at(1).isComplete);  // a checkpoint, never finished
}

void TestConversationStore::refusesNewerSchemaAndBadIds() {
  {
    auto store = openStore();
    QVERIFY(store);
    QVERIFY(!store->renameConversation(999, QStringLiteral("x")));
    QVERIFY(!store->deleteConversation(999));
    QVERIFY(!store->updateMessage(999, QStringLiteral("x"), {}, true));
    QVERIFY(!store->appendMessage(999, QStringLiteral("user"), QStringLiteral("x")));  // no such conversation
  }
  withRawConnection(m_path, [](QSqlDatabase& db) {
    QSqlQuery q(db);
    QVERIFY(q.exec(QStringLiteral("PRAGMA user_version=%1").arg(ConversationStore::kSchemaVersion + 1)));
  });
  auto newer = ConversationStore::open(m_path);
  QVERIFY(!newer);
  QVERIFY2(newer.error_message().find("newer version") != std::string::npos, newer.error_message().c_str());

  const QString notDb = m_dir.filePath(QStringLiteral("not-a-database.sqlite"));
  QFile file(notDb);
  QVERIFY(file.open(QIODevice::WriteOnly));
  file.write(QByteArray(4096, 'x'));
  file.close();
  auto garbage = ConversationStore::open(notDb);
  QVERIFY(!garbage);
  QVERIFY(!garbage.error_message().empty());
}

void TestConversationStore::samplingJsonRoundTripsAndToleratesJunk() {
  SamplingSettings s;
  s.temperature = 1.25;
  s.topK = 0;
  s.topP = 0.5;
  s.minP = 0.0;
  s.repeatPenalty = 1.0;
  s.seed = -1;
  s.maxTokens = 0;
  s.replyFormat = QStringLiteral("json_schema");
  s.jsonSchema = QStringLiteral(R"({"type": "object"})");
  QCOMPARE(SamplingSettings::fromJson(s.toJson()), s);
  s.replyFormat = QStringLiteral("regex");
  s.regex = QStringLiteral("[0-9]+");
  QCOMPARE(SamplingSettings::fromJson(s.toJson()), s);  // the regex and its format kept too
  const QJsonObject junk{{QStringLiteral("temperature"), QStringLiteral("hot")},
                         {QStringLiteral("top_p"), 7.0},
                         {QStringLiteral("top_k"), 12}};
  const SamplingSettings parsed = SamplingSettings::fromJson(junk);
  QCOMPARE(parsed.temperature, SamplingSettings{}.temperature);
  QCOMPARE(parsed.topP, SamplingSettings{}.topP);
  QCOMPARE(parsed.topK, 12);
  QCOMPARE(parsed.replyFormat, QStringLiteral("text"));  // rows from before the reply format
  QCOMPARE(SamplingSettings::fromJson({{QStringLiteral("response_format"), QStringLiteral("yaml")}}).replyFormat,
           QStringLiteral("text"));
  const iwb::SamplingParams params = s.toSamplingParams(77);
  QCOMPARE(params.seed, uint64_t{77});  // -1 asks for the random seed given
  s.seed = 5;
  QCOMPARE(s.toSamplingParams(77).seed, uint64_t{5});
}

// The child process of finishedMessageSurvivesKill: store a finished reply, say so, then wait
// to be killed (no clean shutdown, no destructor, no close of the database).
int writeThenWait(const QString& path) {
  auto store = ConversationStore::open(path);
  if (!store) return 3;
  auto conversation = (*store)->createConversation(conversationNamed(QStringLiteral("Killed")));
  if (!conversation) return 4;
  if (!(*store)->appendMessage(conversation->id, QStringLiteral("user"), QStringLiteral("question"))) return 5;
  GenerationStats stats;
  stats.finishReason = QStringLiteral("end of generation");
  if (!(*store)->appendMessage(conversation->id, QStringLiteral("assistant"), QStringLiteral("finished answer"), true,
                               stats)) {
    return 6;
  }
  std::printf("written\n");
  std::fflush(stdout);
  QThread::sleep(60);  // killed long before this ends
  return 0;
}

void TestConversationStore::finishedMessageSurvivesKill() {
  QProcess child;
  child.start(QCoreApplication::applicationFilePath(), {QStringLiteral("--write-then-wait"), m_path});
  QVERIFY(child.waitForStarted());
  QVERIFY(child.waitForReadyRead(20000));
  QCOMPARE(child.readAllStandardOutput().trimmed(), QByteArray("written"));
  child.kill();  // SIGKILL: the process gets no chance to flush or close anything
  QVERIFY(child.waitForFinished());
  QCOMPARE(child.exitStatus(), QProcess::CrashExit);

  auto store = openStore();
  QVERIFY(store);
  auto list = store->listConversations();
  QCOMPARE(list->size(), 1);
  auto messages = store->messages(list->first().id);
  QCOMPARE(messages->size(), 2);
  QCOMPARE(messages->at(1).content, QStringLiteral("finished answer"));
  QVERIFY(messages->at(1).isComplete);
  QCOMPARE(messages->at(1).stats.finishReason, QStringLiteral("end of generation"));
}

int main(int argc, char** argv) {
  QCoreApplication app(argc, argv);
  if (argc == 3 && QByteArray(argv[1]) == "--write-then-wait") return writeThenWait(QString::fromLocal8Bit(argv[2]));
  TestConversationStore test;
  return QTest::qExec(&test, argc, argv);
}
#include "test_conversation_store.moc"
