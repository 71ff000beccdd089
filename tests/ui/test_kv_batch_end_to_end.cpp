// A batch on a real model through the worker thread: the aidreams 260K llama2.c model
// (converted to GGUF for the test). Four prompts with a common system text, submitted together
// after one request has put that text in the prefix cache, must all finish, with a chat reply
// generating beside them routed to its own id; the KV snapshots must arrive and show the
// prefix blocks shared by the batch's sequences, then the cache idle. Then the KV Cache tab
// runs a batch from its own form.
#include "aidreams_fixture.h"
#include "kvmap/batch_panel.h"
#include "kvmap/batch_table_model.h"
#include "kvmap/kv_cache_panel.h"
#include "kvmap/kv_map_model.h"
#include "worker/engine_controller.h"

#include <QCheckBox>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QSignalSpy>
#include <QSpinBox>
#include <QTemporaryDir>
#include <QTest>

#include <set>

using namespace iwb::ui;

namespace {

constexpr int kTimeoutMs = 60000;
// Long enough for two or more full blocks of 16 tokens, short enough that prompt and reply fit
// the model's 128-token context.
const QString kSystemText = QStringLiteral("Tell a short and happy story for a small child about a friendly cat.");

BatchInput batchOf(const QStringList& prompts, int maxTokens) {
  BatchInput batch;
  batch.prompts = prompts;
  batch.systemText = kSystemText;
  batch.sampling.temperature = 0;
  batch.sampling.maxTokens = maxTokens;
  return batch;
}

}  // namespace

class TestKvBatchEndToEnd : public QObject {
  Q_OBJECT

 private slots:
  void initTestCase();
  void batchSharesThePrefixBesideAChat();
  void panelRunsABatch();

 private:
  QTemporaryDir m_dir;
  QString m_modelPath;
};

void TestKvBatchEndToEnd::initTestCase() {
  QVERIFY(m_dir.isValid());
  QString why;
  m_modelPath = iwb::test::convertAidreamsModel(m_dir.path(), &why);
  if (m_modelPath.isEmpty()) {
    if (!iwb::test::hasAidreamsModel()) QSKIP(qPrintable(why));
    QFAIL(qPrintable(why));
  }
}

void TestKvBatchEndToEnd::batchSharesThePrefixBesideAChat() {
  EngineController engine;
  QSignalSpy snapshots(&engine, &EngineController::kvSnapshotReady);
  QVERIFY(iwb::test::loadModelAndWait(engine, m_modelPath, kTimeoutMs));
  QTRY_VERIFY_WITH_TIMEOUT(snapshots.count() >= 1, kTimeoutMs);
  const auto loaded = snapshots.last().at(0).value<KvMapSnapshot>();
  QVERIFY(loaded.numBlocks() > 0);  // the pool, all free
  QVERIFY(loaded.isIdle);
  QCOMPARE(loaded.stats.num_used_blocks, qint64(0));

  QSignalSpy finished(&engine, &EngineController::generationFinished);
  QSignalSpy failed(&engine, &EngineController::generationFailed);
  QSignalSpy tokens(&engine, &EngineController::tokensReady);
  // One request computes the system text's blocks; they stay in the prefix cache after it.
  const QList<quint64> warm = engine.submitBatch(batchOf({QStringLiteral("Once upon a time")}, 4));
  QCOMPARE(warm.size(), qsizetype(1));
  QCOMPARE(engine.activeRequest(), quint64(0));  // a batch is not the chat's reply
  QTRY_VERIFY_WITH_TIMEOUT(finished.count() + failed.count() == 1, kTimeoutMs);
  QCOMPARE(failed.count(), 0);

  snapshots.clear();
  finished.clear();
  const QStringList prompts = {QStringLiteral("The cat"), QStringLiteral("A dog"), QStringLiteral("The sun"),
                               QStringLiteral("A bird")};
  const QList<quint64> ids = engine.submitBatch(batchOf(prompts, 24));
  QCOMPARE(ids.size(), qsizetype(4));
  // The chat's reply joins the batch and keeps its own routing.
  GenerationInput chat;
  chat.messages = {{QStringLiteral("user"), QStringLiteral("Lily went to the park")}};
  chat.sampling.temperature = 0;
  chat.sampling.maxTokens = 12;
  const quint64 chatId = engine.generate(chat);
  QCOMPARE(engine.activeRequest(), chatId);
  QTRY_VERIFY_WITH_TIMEOUT(finished.count() + failed.count() == 5, kTimeoutMs);
  QCOMPARE(failed.count(), 0);

  std::set<quint64> ended;
  for (const QList<QVariant>& args : finished) {
    const auto stats = args.at(1).value<GenerationStats>();
    QVERIFY2(!stats.isError(), qPrintable(stats.errorMessage));
    QVERIFY(stats.numGeneratedTokens > 0);
    ended.insert(args.at(0).toULongLong());
  }
  for (const quint64 id : ids) QVERIFY(ended.count(id) == 1);
  QVERIFY(ended.count(chatId) == 1);
  QCOMPARE(engine.activeRequest(), quint64(0));
  std::set<quint64> withText;
  for (const QList<QVariant>& args : tokens) withText.insert(args.at(0).toULongLong());
  for (const quint64 id : ids) QVERIFY(withText.count(id) == 1);
  QVERIFY(withText.count(chatId) == 1);

  // The first step of the batch showed at once: the cached system text shared by its sequences.
  // Waited for: when the batch ends within one snapshot interval (0.15 s), the only other
  // snapshot is the idle one, which follows the last finished signal through the queue (seen
  // once, with the other core busy: the count was 1 here).
  QTRY_VERIFY_WITH_TIMEOUT(snapshots.count() >= 2, kTimeoutMs);
  bool sawShared = false;
  for (const QList<QVariant>& args : snapshots) {
    const auto s = args.at(0).value<KvMapSnapshot>();
    for (const iwb::BlockSnapshot& b : s.blocks) {
      if (b.ref_count < 2) continue;
      QCOMPARE(qsizetype(b.owners.size()), qsizetype(b.ref_count));
      QVERIFY(!s.blockTexts.at(b.id).isEmpty());
      int numBatchOwners = 0;
      for (const iwb::SequenceId seq : b.owners) numBatchOwners += ids.contains(s.sequenceRequests.value(seq)) ? 1 : 0;
      // Every sequence of the batch found the system text's blocks in the prefix cache.
      if (numBatchOwners == ids.size() && s.stats.num_shared_blocks > 0 && !s.isIdle) sawShared = true;
    }
  }
  QVERIFY2(sawShared, "no snapshot showed a block shared by all the batch's sequences");
  // The idle snapshot follows the last finished signal through the queue: wait for it.
  QVERIFY(QTest::qWaitFor([&] { return snapshots.last().at(0).value<KvMapSnapshot>().isIdle; }, kTimeoutMs));
  const auto idle = snapshots.last().at(0).value<KvMapSnapshot>();
  QVERIFY(idle.isIdle);
  QCOMPARE(idle.stats.num_used_blocks, qint64(0));
  QVERIFY(idle.stats.num_cached_blocks > 0);  // the prompts' full blocks stay reusable
  QVERIFY(idle.stats.prefix_hit_rate > 0);
  QCOMPARE(idle.numRunning + idle.numWaiting, qint64(0));

  // Unloading empties the map.
  snapshots.clear();
  engine.unload();
  QTRY_VERIFY_WITH_TIMEOUT(snapshots.count() >= 1, kTimeoutMs);
  QVERIFY(snapshots.last().at(0).value<KvMapSnapshot>().isEmpty());
}

void TestKvBatchEndToEnd::panelRunsABatch() {
  EngineController engine;
  KvCachePanel panel(&engine);
  BatchPanel* batch = panel.batchPanel();
  QVERIFY(!batch->runButton()->isEnabled());
  QVERIFY(iwb::test::loadModelAndWait(engine, m_modelPath, kTimeoutMs));
  QTRY_VERIFY_WITH_TIMEOUT(panel.model()->numBlocks() > 0, kTimeoutMs);
  QVERIFY(batch->runButton()->isEnabled());

  batch->promptsEdit()->setPlainText(QStringLiteral("The little fox\nA big tree"));
  batch->sharePrefixBox()->setChecked(false);  // the long system text would not fit 128 tokens
  batch->countBox()->setValue(3);
  batch->maxTokensBox()->setValue(10);
  QSignalSpy submitted(batch, &BatchPanel::batchSubmitted);
  QTest::mouseClick(batch->runButton(), Qt::LeftButton);
  QCOMPARE(submitted.count(), 1);
  BatchTableModel* table = batch->model();
  QCOMPARE(table->rowCount(), 3);
  QVERIFY(batch->stopButton()->isEnabled());
  QTRY_VERIFY_WITH_TIMEOUT(table->numUnfinished() == 0, kTimeoutMs);
  // Sampled replies: one may be blanks and the end token alone (the table drops leading blanks,
  // as one scripts/test.sh run showed), so the text is asked of the batch, not of every row.
  QString outputs;
  for (const BatchTableModel::Row& row : table->rows()) {
    QCOMPARE(row.state, BatchTableModel::State::Finished);
    QVERIFY(row.numTokens > 0);
    outputs += row.output;
  }
  QVERIFY(!outputs.isEmpty());
  QCOMPARE(table->rows().at(2).prompt, QStringLiteral("The little fox"));  // the list, again from the top
  QVERIFY(!batch->stopButton()->isEnabled());
  QTRY_VERIFY_WITH_TIMEOUT(panel.model()->snapshot().isIdle, kTimeoutMs);
  QVERIFY(panel.model()->historySeconds().size() >= 2);
  QVERIFY(panel.model()->statsText().contains(QStringLiteral("Blocks used: 0 / ")));

  // Another model that fails to load: the old pool is gone, and the map says so.
  QSignalSpy loadFailed(&engine, &EngineController::modelLoadFailed);
  engine.loadModel(m_dir.filePath(QStringLiteral("missing.gguf")));
  QTRY_VERIFY_WITH_TIMEOUT(loadFailed.count() == 1, kTimeoutMs);
  QTRY_COMPARE_WITH_TIMEOUT(panel.model()->numBlocks(), qint64(0), kTimeoutMs);
  QVERIFY(!batch->runButton()->isEnabled());
}

QTEST_MAIN(TestKvBatchEndToEnd)
#include "test_kv_batch_end_to_end.moc"
