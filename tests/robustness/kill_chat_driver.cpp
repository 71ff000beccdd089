// The chat side of the kill test (kill_test.py): `run` chats with a real model through the
// chat panel, the engine's worker thread and the SQLite history, printing "FINISHED <id>"
// once each reply is saved, until the test kills it (SIGKILL, at a random moment); `check`
// opens the history afterwards and prints what it holds, so the test can demand that every
// finished reply is there, complete, and the database is intact.
//
//   kill_chat_driver run HISTORY.sqlite MODEL.gguf
//   kill_chat_driver check HISTORY.sqlite
#include "chat/chat_input.h"
#include "chat/chat_panel.h"
#include "chat/chat_settings_panel.h"
#include "store/conversation_store.h"
#include "worker/engine_controller.h"

#include <QApplication>
#include <QSignalSpy>
#include <QSpinBox>
#include <QSqlDatabase>
#include <QSqlQuery>
#include <QTest>

#include <cstdio>

using namespace iwb::ui;

namespace {

int run(const QString& historyPath, const QString& modelPath) {
  EngineController engine;
  auto store = ConversationStore::open(historyPath);
  if (!store) {
    std::fprintf(stderr, "kill_chat_driver: %s\n", store.error_message().c_str());
    return 1;
  }
  ChatPanel panel(&engine, store->get());
  panel.show();
  QSignalSpy loaded(&engine, &EngineController::modelLoaded);
  engine.loadModel(modelPath);
  if (!QTest::qWaitFor([&] { return loaded.count() > 0; }, 60000)) {
    std::fprintf(stderr, "kill_chat_driver: the model did not load\n");
    return 1;
  }
  panel.settingsPanel()->maxTokensBox()->setValue(40);
  QObject::connect(&panel, &ChatPanel::replyFinished, [](qint64 messageId, const GenerationStats&) {
    std::printf("FINISHED %lld\n", static_cast<long long>(messageId));
    std::fflush(stdout);
  });
  for (int i = 0;; ++i) {
    if (i % 4 == 0) panel.newConversation();
    QSignalSpy finished(&panel, &ChatPanel::replyFinished);
    QSignalSpy failed(&panel, &ChatPanel::replyFailed);
    QTest::keyClicks(panel.input(), QStringLiteral("Tell me story number %1").arg(i));
    panel.send();
    if (!QTest::qWaitFor([&] { return finished.count() + failed.count() > 0; }, 60000) || failed.count() > 0) {
      std::fprintf(stderr, "kill_chat_driver: reply %d did not finish\n", i);
      return 1;
    }
  }
}

int check(const QString& historyPath) {
  {
    // The raw file first: SQLite's own check, before the store migrates or repairs anything.
    QSqlDatabase db = QSqlDatabase::addDatabase(QStringLiteral("QSQLITE"), QStringLiteral("integrity"));
    db.setDatabaseName(historyPath);
    if (!db.open()) {
      std::printf("INTEGRITY cannot open\n");
      return 1;
    }
    QSqlQuery q(db);
    q.exec(QStringLiteral("PRAGMA integrity_check"));
    std::printf("INTEGRITY %s\n", q.next() ? qPrintable(q.value(0).toString()) : "no answer");
    db.close();
  }
  QSqlDatabase::removeDatabase(QStringLiteral("integrity"));
  auto store = ConversationStore::open(historyPath);
  if (!store) {
    std::printf("OPEN %s\n", store.error_message().c_str());
    return 1;
  }
  auto conversations = (*store)->listConversations();
  if (!conversations) return 1;
  for (const Conversation& c : *conversations) {
    auto messages = (*store)->messages(c.id);
    if (!messages) return 1;
    for (const StoredMessage& m : *messages) {
      if (m.role != QStringLiteral("assistant")) continue;
      std::printf("%s %lld %d\n", m.isComplete ? "COMPLETE" : "INCOMPLETE", static_cast<long long>(m.id),
                  static_cast<int>(m.content.size()));
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  qputenv("QT_QPA_PLATFORM", "offscreen");
  QApplication app(argc, argv);
  const QStringList args = app.arguments();
  if (args.size() == 4 && args[1] == QStringLiteral("run")) return run(args[2], args[3]);
  if (args.size() == 3 && args[1] == QStringLiteral("check")) return check(args[2]);
  std::fprintf(stderr, "usage: kill_chat_driver run HISTORY.sqlite MODEL.gguf | check HISTORY.sqlite\n");
  return 2;
}
