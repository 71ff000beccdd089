// The KV-cache map without a model: a real BlockManager driven by a script (three sequences
// with a common prefix, appends, a fork with copy-on-write, frees) gives the snapshot; the
// map's model must show exactly its cell states, owners, shared marks, fills, hover text and
// live numbers, and the widget must paint them in the right colours. Also the batch table's
// routing and the batch form.
#include "iwb/engine/paged/block_manager.h"
#include "kvmap/batch_panel.h"
#include "kvmap/batch_table_model.h"
#include "kvmap/kv_cache_panel.h"
#include "kvmap/kv_map_model.h"
#include "kvmap/kv_map_widget.h"
#include "worker/engine_controller.h"
#include "worker/kv_map_values.h"

#include <QCheckBox>
#include <QImage>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QSpinBox>
#include <QTest>

using namespace iwb::ui;
using iwb::BlockManager;

namespace {

constexpr int kBlockSize = 4;
constexpr int kNumBlocks = 16;

// " w1 w2 ..." for token ids: a stand-in tokenizer whose text is easy to predict.
std::string wordsOf(std::span<const int32_t> tokens) {
  std::string text;
  for (const int32_t t : tokens) text += " w" + std::to_string(t);
  return text;
}

// The script. Prefix P = 1..8 (two full blocks). A = P + 20,21,22 gets blocks 0,1,2; once its
// first 11 tokens are computed, blocks 0 and 1 are in the prefix cache, so B = P + 30,31 and
// C = P + 40 share them and get blocks 3 and 4. A appends 23 (block 2 now full) and 24 (block
// 5). D is forked from B and appends 50: B's last block 3 is shared, so D writes a copy
// (block 6). A's 13 computed tokens put block 2 in the prefix cache; then C and A are freed:
// block 2 stays cached, blocks 4 and 5 go back to the free list.
BlockManager scriptedBlockManager() {
  iwb::BlockManagerConfig config;
  config.num_blocks = kNumBlocks;
  config.block_size = kBlockSize;
  auto created = BlockManager::create(config);
  if (!created) qFatal("%s", created.error_message().c_str());
  BlockManager bm = std::move(*created);
  const std::vector<int32_t> a = {1, 2, 3, 4, 5, 6, 7, 8, 20, 21, 22};
  const std::vector<int32_t> b = {1, 2, 3, 4, 5, 6, 7, 8, 30, 31};
  const std::vector<int32_t> c = {1, 2, 3, 4, 5, 6, 7, 8, 40};
  auto check = [](bool ok, const std::string& what) {
    if (!ok) qFatal("script step failed: %s", what.c_str());
  };
  auto hitA = bm.allocate(1, a);
  check(hitA && *hitA == 0, "allocate A");
  check(bool(bm.mark_computed(1, 11)), "mark A computed");
  auto hitB = bm.allocate(2, b);
  check(hitB && *hitB == 8, "allocate B with the cached prefix");
  auto hitC = bm.allocate(3, c);
  check(hitC && *hitC == 8, "allocate C with the cached prefix");
  check(bool(bm.append_slot(1, 23)), "append 23 to A");
  check(bool(bm.append_slot(1, 24)), "append 24 to A");
  check(bool(bm.fork(2, 4)), "fork B into D");
  auto slot = bm.append_slot(4, 50);
  check(slot && slot->copy.has_value(), "append to D copies the shared block");
  check(bool(bm.mark_computed(1, 13)), "mark A's 13 tokens computed");
  check(bool(bm.free(3)), "free C");
  check(bool(bm.free(1)), "free A");
  check(bool(bm.check_consistency()), "consistency");
  return bm;
}

KvMapSnapshot scriptedSnapshot(BlockTextCache& texts) {
  const BlockManager bm = scriptedBlockManager();
  iwb::EngineKvSnapshot engine;
  engine.cache = bm.snapshot();
  engine.scheduler.num_waiting = 1;
  engine.scheduler.num_running = 2;
  engine.scheduler.num_preemptions = 3;
  engine.sequences = {{.sequence = 2, .request = 102, .is_running = true},
                      {.sequence = 4, .request = 104, .is_running = true}};
  engine.bytes_per_block = 4096;
  // The worker's map: engine request 102 is the caller's #7, 104 is #9.
  return makeKvMapSnapshot(std::move(engine), texts, {{102, 7}, {104, 9}});
}

QColor pixel(const QImage& image, const QPoint& p) { return image.pixelColor(p); }

}  // namespace

class TestKvMap : public QObject {
  Q_OBJECT

 private slots:
  void cellsFollowTheScript();
  void hoverTextNamesOwnersRangeAndText();
  void statsTextIsExact();
  void blockTextsAreDecodedOnce();
  void historyAndClear();
  void paintsCellColours();
  void panelShowsDetailsAndLegend();
  void batchTableRoutesOnlyItsRequests();
  void batchFormCyclesPromptsAndAddsThePrefix();
};

void TestKvMap::cellsFollowTheScript() {
  BlockTextCache texts(wordsOf);
  KvMapModel model;
  model.setSnapshot(scriptedSnapshot(texts));
  QCOMPARE(model.numBlocks(), qint64(kNumBlocks));
  QCOMPARE(model.blockSize(), kBlockSize);

  // The common prefix: shared by B and D (A, its first owner, is gone).
  for (qint64 id : {0, 1}) {
    QCOMPARE(model.cellKind(id), KvCellKind::Shared);
    QCOMPARE(model.block(id)->ref_count, 2);
    QCOMPARE(model.block(id)->owners, (std::vector<iwb::SequenceId>{2, 4}));
    QCOMPARE(model.fillFraction(id), 1.0);
  }
  QCOMPARE(model.cellKind(2), KvCellKind::Cached);  // A's third block, full and computed
  QCOMPARE(model.fillFraction(2), 1.0);
  QVERIFY(model.block(2)->owners.empty());
  QCOMPARE(model.cellKind(3), KvCellKind::InUse);  // B's last block: 30, 31
  QCOMPARE(model.block(3)->owners, (std::vector<iwb::SequenceId>{2}));
  QCOMPARE(model.fillFraction(3), 0.5);
  QCOMPARE(model.cellKind(6), KvCellKind::InUse);  // D's copy: 30, 31, 50
  QCOMPARE(model.block(6)->owners, (std::vector<iwb::SequenceId>{4}));
  QCOMPARE(model.fillFraction(6), 0.75);
  for (qint64 id : {4, 5, 7, 15}) {
    QCOMPARE(model.cellKind(id), KvCellKind::Free);
    QCOMPARE(model.fillFraction(id), 0.0);
  }
  QCOMPARE(model.cellKind(16), KvCellKind::Free);  // outside the pool
  QVERIFY(model.block(16) == nullptr);
  QCOMPARE(model.sequences(), (QList<quint64>{2, 4}));
  QCOMPARE(model.sequenceLabel(2), QStringLiteral("seq 2 · #7"));
  QCOMPARE(model.sequenceLabel(3), QStringLiteral("seq 3"));
  // Stable, distinct colours per sequence.
  QCOMPARE(KvMapModel::sequenceColor(2), KvMapModel::sequenceColor(2));
  QVERIFY(KvMapModel::sequenceColor(2) != KvMapModel::sequenceColor(4));
  QVERIFY(KvMapModel::sequenceColor(2) != KvMapModel::freeColor());
}

void TestKvMap::hoverTextNamesOwnersRangeAndText() {
  BlockTextCache texts(wordsOf);
  KvMapModel model;
  model.setSnapshot(scriptedSnapshot(texts));
  QCOMPARE(model.hoverText(1), QStringLiteral("Block 1 — in use, shared by 2 sequences\n"
                                              "Owners: seq 2 · #7, seq 4 · #9\n"
                                              "Tokens 4–7 (4 of 4 slots)\n"
                                              "Reference count 2 · in the prefix cache\n"
                                              "Text: “ w5 w6 w7 w8”"));
  QCOMPARE(model.hoverText(6), QStringLiteral("Block 6 — in use\n"
                                              "Owners: seq 4 · #9\n"
                                              "Tokens 8–10 (3 of 4 slots)\n"
                                              "Reference count 1\n"
                                              "Text: “ w30 w31 w50”"));
  QCOMPARE(model.hoverText(2), QStringLiteral("Block 2 — cached (a reusable prefix, no owner)\n"
                                              "Tokens 8–11 (4 of 4 slots)\n"
                                              "Reference count 0 · in the prefix cache\n"
                                              "Text: “ w20 w21 w22 w23”"));
  QCOMPARE(model.hoverText(5), QStringLiteral("Block 5 — free"));
  QVERIFY(model.hoverText(99).isEmpty());
}

void TestKvMap::statsTextIsExact() {
  BlockTextCache texts(wordsOf);
  KvMapModel model;
  model.setSnapshot(scriptedSnapshot(texts));
  // Used: 0, 1, 3, 6 holding 4 + 4 + 2 + 3 = 13 of 16 slots. Prefix lookups: A found 0 of its
  // 11 tokens, B 8 of 10, C 8 of 9.
  QCOMPARE(model.statsText(), QStringLiteral("Blocks used: 4 / 16\n"
                                             "Utilisation: 25.0 %\n"
                                             "Internal fragmentation: 18.8 %\n"
                                             "Prefix-cache hit rate: 53.3 % (16 of 30 tokens)\n"
                                             "Preemptions: 3\n"
                                             "Waiting / running: 1 / 2\n"
                                             "Shared blocks: 2\n"
                                             "Cached blocks: 1\n"
                                             "Free blocks: 11\n"
                                             "Tokens held: 13\n"
                                             "Copy-on-writes: 1\n"
                                             "Evictions: 0"));
  QCOMPARE(model.poolSummary(), QStringLiteral("16 blocks of 4 tokens (64 tokens)"));

  KvMapModel empty;
  QVERIFY(empty.statsText().contains(QStringLiteral("Prefix-cache hit rate: — (no prompt yet)")));
  QCOMPARE(empty.poolSummary(), QStringLiteral("No KV cache: load a model to see its blocks."));
}

void TestKvMap::blockTextsAreDecodedOnce() {
  BlockTextCache texts(wordsOf);
  const KvMapSnapshot first = scriptedSnapshot(texts);
  QCOMPARE(texts.numDecodes(), qint64(5));  // blocks 0, 1, 2, 3 and 6 hold tokens
  QCOMPARE(first.blockTexts.size(), qsizetype(kNumBlocks));
  QCOMPARE(first.blockTexts.at(3), QStringLiteral(" w30 w31"));
  QVERIFY(first.blockTexts.at(4).isEmpty());
  const KvMapSnapshot second = scriptedSnapshot(texts);
  QCOMPARE(texts.numDecodes(), qint64(5));  // nothing changed: nothing decoded again
  QCOMPARE(second.blockTexts, first.blockTexts);
  QCOMPARE(second.sequenceRequests.value(2), quint64(7));
  QCOMPARE(second.sequenceRequests.value(4), quint64(9));
  QCOMPARE(second.numPreemptions, qint64(3));
  texts.setDecoder(wordsOf);  // a new model: the cache starts over
  (void)scriptedSnapshot(texts);
  QCOMPARE(texts.numDecodes(), qint64(10));
}

void TestKvMap::historyAndClear() {
  BlockTextCache texts(wordsOf);
  KvMapModel model;
  KvMapSnapshot s = scriptedSnapshot(texts);
  for (int i = 0; i < 3; ++i) {
    s.sessionSeconds = 10.0 + i;
    model.setSnapshot(s);
  }
  QCOMPARE(model.historySeconds(), (QVector<double>{10, 11, 12}));
  QCOMPARE(model.historyUsed(), (QVector<double>{4, 4, 4}));
  QCOMPARE(model.historyCached(), (QVector<double>{1, 1, 1}));
  s.sessionSeconds = 2;  // the clock went back: a new session's pool
  model.setSnapshot(s);
  QCOMPARE(model.historySeconds(), (QVector<double>{2}));
  model.setSnapshot(KvMapSnapshot{});  // unloaded: the map empties, the history stays on show
  QCOMPARE(model.numBlocks(), qint64(0));
  QCOMPARE(model.historySeconds().size(), qsizetype(1));
  s.sessionSeconds = 20;
  s.blocks.resize(32);  // another model's pool: a new history
  model.setSnapshot(s);
  QCOMPARE(model.historySeconds(), (QVector<double>{20}));
  model.clear();
  QVERIFY(model.historySeconds().isEmpty());
}

void TestKvMap::paintsCellColours() {
  BlockTextCache texts(wordsOf);
  KvMapModel model;
  KvMapWidget widget(&model);
  widget.resize(400, 300);
  model.setSnapshot(scriptedSnapshot(texts));
  QImage image(widget.size(), QImage::Format_ARGB32);
  widget.render(&image);
  QVERIFY(widget.cellPitch() >= 20);  // 16 blocks in 400 x 300: large cells
  QVERIFY(widget.numColumns() >= 4);

  const QRect free = widget.cellRect(10);
  QVERIFY(!free.isEmpty());
  QCOMPARE(pixel(image, free.center()), KvMapModel::freeColor());
  QCOMPARE(widget.blockAt(free.center()), qint64(10));

  // Block 3 is half full: its left quarter in B's colour, its right quarter paler.
  const QRect half = widget.cellRect(3);
  const QColor seqB = KvMapModel::sequenceColor(2);
  QCOMPARE(pixel(image, QPoint(half.left() + half.width() / 4, half.center().y())), seqB);
  const QColor empty = pixel(image, QPoint(half.right() - half.width() / 4, half.center().y()));
  QVERIFY(empty != seqB);
  QVERIFY(empty.lightness() > seqB.lightness());

  // Block 0 is shared by B and D: B's colour in its upper half, D's in the lower, a dark frame.
  const QRect shared = widget.cellRect(0);
  QCOMPARE(pixel(image, QPoint(shared.center().x(), shared.top() + shared.height() / 4)), seqB);
  QCOMPARE(pixel(image, QPoint(shared.center().x(), shared.bottom() - shared.height() / 4)),
           KvMapModel::sequenceColor(4));
  QCOMPARE(pixel(image, QPoint(shared.left(), shared.center().y())), KvMapModel::sharedMarkColor());

  // Block 2 is a cached prefix: pale, hatched.
  const QRect cached = widget.cellRect(2);
  bool hasPale = false;
  bool hasHatch = false;
  for (int x = cached.left(); x <= cached.right(); ++x) {
    const QColor c = pixel(image, QPoint(x, cached.center().y()));
    hasPale |= c == KvMapModel::cachedColor();
    hasHatch |= c == KvMapModel::cachedHatchColor();
  }
  QVERIFY(hasPale && hasHatch);
  QCOMPARE(widget.blockAt(QPoint(0, 0)), qint64(-1));  // the margin

  // Thousands of blocks still fit, in smaller cells.
  KvMapSnapshot big = scriptedSnapshot(texts);
  big.blocks.resize(4000);
  for (size_t i = kNumBlocks; i < big.blocks.size(); ++i) big.blocks[i].id = static_cast<iwb::BlockId>(i);
  model.setSnapshot(big);
  QVERIFY(widget.cellPitch() >= 3 && widget.cellPitch() <= 6);
  QVERIFY(!widget.cellRect(3999).isEmpty());
  QVERIFY(widget.cellRect(3999).bottom() < widget.height());
}

void TestKvMap::panelShowsDetailsAndLegend() {
  EngineController engine;
  KvCachePanel panel(&engine);
  panel.resize(1200, 800);
  QVERIFY(panel.detailsText().contains(QStringLiteral("when a model is loaded")));
  BlockTextCache texts(wordsOf);
  KvMapSnapshot snapshot = scriptedSnapshot(texts);
  emit engine.kvSnapshotReady(snapshot);  // as the worker's snapshot arrives
  QCOMPARE(panel.model()->numSnapshots(), qint64(1));
  QVERIFY(panel.legendText().contains(QStringLiteral("seq 2 · #7")));
  QVERIFY(panel.legendText().contains(QStringLiteral("seq 4 · #9")));
  // The cache type and its bytes per block and per position: f16 unless the engine says.
  QVERIFY2(panel.summaryText().contains(QStringLiteral("f16 cache, 4.0 KiB per block")),
           qPrintable(panel.summaryText()));
  snapshot.cacheType = QStringLiteral("q8_0/q4_0");
  snapshot.bytesPerBlock = 4 * 52;  // keys 34 + values 18 bytes a position, blocks of 4
  emit engine.kvSnapshotReady(snapshot);
  QVERIFY2(panel.summaryText().contains(QStringLiteral("q8_0/q4_0 cache, 208 B per block (52 B per position)")),
           qPrintable(panel.summaryText()));
  panel.show();
  QVERIFY(QTest::qWaitForWindowExposed(&panel));
  const QPoint inBlock6 = panel.mapWidget()->cellRect(6).center();
  QTest::mouseMove(panel.mapWidget(), inBlock6);
  QTRY_COMPARE(panel.mapWidget()->hoveredBlock(), qint64(6));
  QCOMPARE(panel.detailsText(), panel.model()->hoverText(6));
}

void TestKvMap::batchTableRoutesOnlyItsRequests() {
  BatchTableModel table;
  table.addRequests({5, 6}, {QStringLiteral("first"), QStringLiteral("second")});
  QCOMPARE(table.rowCount(), 2);
  QCOMPARE(table.numUnfinished(), 2);
  QCOMPARE(BatchTableModel::stateText(table.rows().at(0)), QStringLiteral("queued"));
  table.handleStarted(5, 12);
  table.handleStarted(99, 3);  // the chat's request: not ours
  QCOMPARE(BatchTableModel::stateText(*table.find(5)), QStringLiteral("prompt"));
  table.handleTokens(5, QStringLiteral("\n Hello"));
  table.handleTokens(5, QStringLiteral(" world"));
  table.handleTokens(99, QStringLiteral("chat text"));
  table.handleTokenTimes(5, {1.0, 1.5, 2.0});
  QCOMPARE(table.find(5)->output, QStringLiteral("Hello world"));
  QCOMPARE(table.find(5)->numTokens, 3);
  QCOMPARE(BatchTableModel::tokensPerSecond(*table.find(5)), 2.0);
  QCOMPARE(table.data(table.index(0, BatchTableModel::SpeedColumn)).toString(), QStringLiteral("2.0"));
  QCOMPARE(table.data(table.index(0, BatchTableModel::StateColumn)).toString(), QStringLiteral("generating"));
  QVERIFY(table.find(99) == nullptr);

  GenerationStats stats;
  stats.finishReason = QStringLiteral("end of generation");
  stats.numGeneratedTokens = 4;
  stats.generationSeconds = 1.5;
  table.handleFinished(5, stats);
  table.handleFailed(6, QStringLiteral("too long"));
  QCOMPARE(table.numUnfinished(), 0);
  QCOMPARE(table.find(5)->numTokens, 4);
  QCOMPARE(table.data(table.index(0, BatchTableModel::StateColumn)).toString(), QStringLiteral("end of generation"));
  QCOMPARE(table.data(table.index(1, BatchTableModel::OutputColumn)).toString(), QStringLiteral("too long"));
  table.clearFinished();
  QCOMPARE(table.rowCount(), 0);
}

void TestKvMap::batchFormCyclesPromptsAndAddsThePrefix() {
  EngineController engine;
  BatchPanel panel(&engine);
  QVERIFY(!panel.runButton()->isEnabled());  // no model
  QVERIFY(panel.runBatch().isEmpty());
  panel.promptsEdit()->setPlainText(QStringLiteral("one\n\n  two  \n"));
  panel.countBox()->setValue(5);
  panel.maxTokensBox()->setValue(33);
  panel.sharePrefixBox()->setChecked(true);
  BatchInput batch = panel.batchInput();
  QCOMPARE(batch.prompts, (QStringList{"one", "two", "one", "two", "one"}));
  QCOMPARE(batch.systemText, BatchPanel::sharedPrefixText());
  QCOMPARE(batch.sampling.maxTokens, 33);
  const GenerationInput input = batch.inputFor(1);
  QCOMPARE(input.messages.size(), qsizetype(2));
  QCOMPARE(input.messages.at(0).role, QStringLiteral("system"));
  QCOMPARE(input.messages.at(1).content, QStringLiteral("two"));
  panel.sharePrefixBox()->setChecked(false);
  batch = panel.batchInput();
  QVERIFY(batch.systemText.isEmpty());
  QCOMPARE(batch.inputFor(0).messages.size(), qsizetype(1));
}

QTEST_MAIN(TestKvMap)
#include "test_kv_map.moc"
