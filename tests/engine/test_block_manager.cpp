// Block manager scenarios, one behaviour each: ok/later/never, prefix hits (only of computed
// blocks, never the whole prompt), cached blocks revived and evicted least recently used first,
// copy-on-write after fork and truncate, hash collisions, errors as values, statistics.
#include "iwb/engine/paged/block_manager.h"

#include <QtTest>

#include <numeric>

using namespace iwb;

namespace {

std::vector<int32_t> iota_tokens(int n, int first) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  std::iota(t.begin(), t.end(), first);
  return t;
}

std::vector<int32_t> concat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

BlockManager make(int64_t num_blocks, int32_t block_size, BlockHashFunction hash = {}) {
  BlockManagerConfig c;
  c.num_blocks = num_blocks;
  c.block_size = block_size;
  c.hash = std::move(hash);
  Result<BlockManager> m = BlockManager::create(c);
  if (!m) qFatal("%s", m.error_message().c_str());
  return std::move(m).value();
}

// Allocates and marks every token computed; returns the prefix-hit token count.
int64_t admit(BlockManager& m, SequenceId seq, const std::vector<int32_t>& tokens) {
  Result<int64_t> hit = m.allocate(seq, tokens);
  if (!hit) qFatal("%s", hit.error_message().c_str());
  if (!m.mark_computed(seq, static_cast<int64_t>(tokens.size()))) qFatal("mark_computed failed");
  return *hit;
}

std::vector<BlockId> table(const BlockManager& m, SequenceId seq) {
  const auto t = m.block_table(seq);
  return {t.begin(), t.end()};
}

}  // namespace

class TestBlockManager : public QObject {
  Q_OBJECT

 private slots:
  void createRefusesUnusableConfigs() {
    QVERIFY(!BlockManager::create({0, 16, true, {}, {}}));
    QVERIFY(!BlockManager::create({8, 0, true, {}, {}}));
    Result<BlockManager> m = BlockManager::create({8, 16, true, {}, {}});
    QVERIFY(m);
    QCOMPARE(m->num_available_blocks(), 8);
    QVERIFY(m->check_consistency());
  }

  void laterAndNeverAreDifferentAnswers() {
    BlockManager m = make(4, 4);
    const AllocationCheck never = m.can_allocate(iota_tokens(17, 1));
    QCOMPARE(never.status, AllocationStatus::Never);
    QVERIFY2(never.message.find("prompt needs 5 blocks but the cache holds 4") != std::string::npos,
             never.message.c_str());
    QCOMPARE(m.can_allocate({}).status, AllocationStatus::Never);
    QCOMPARE(m.can_allocate(iota_tokens(16, 1)).status, AllocationStatus::Ok);

    admit(m, 1, iota_tokens(12, 100));  // 3 of 4 blocks
    const AllocationCheck later = m.can_allocate(iota_tokens(8, 1));
    QCOMPARE(later.status, AllocationStatus::Later);
    QCOMPARE(later.num_new_blocks, 2);
    QCOMPARE(m.can_allocate(iota_tokens(4, 1)).status, AllocationStatus::Ok);
    QCOMPARE(m.can_allocate(iota_tokens(4, 1), 1).status, AllocationStatus::Later);  // reserve respected
    QCOMPARE(m.can_allocate(iota_tokens(17, 1)).status, AllocationStatus::Never);    // still never
    Result<int64_t> refused = m.allocate(2, iota_tokens(8, 1));
    QVERIFY(!refused);
    QCOMPARE(refused.status().code(), ErrorCode::OutOfMemory);
    QVERIFY(!m.has_sequence(2));
    QVERIFY(m.free(1));
    QCOMPARE(m.can_allocate(iota_tokens(8, 1)).status, AllocationStatus::Ok);
    QVERIFY(m.check_consistency());
  }

  void allocationGivesTablesAndSlots() {
    BlockManager m = make(8, 4);
    QCOMPARE(admit(m, 7, iota_tokens(10, 1)), 0);
    const std::vector<BlockId> t = table(m, 7);
    QCOMPARE(t.size(), size_t(3));
    QCOMPARE(m.num_tokens(7), 10);
    QCOMPARE(*m.slot(7, 0), int64_t(t[0]) * 4);
    QCOMPARE(*m.slot(7, 9), int64_t(t[2]) * 4 + 1);
    QVERIFY(!m.slot(7, 10));
    QVERIFY(!m.slot(8, 0));
    QVERIFY(!m.allocate(7, iota_tokens(3, 1)));  // already has a table
    for (BlockId b : t) QCOMPARE(m.ref_count(b), 1);
  }

  void computedFullBlocksAreShared() {
    BlockManager m = make(16, 4);
    const std::vector<int32_t> a = iota_tokens(10, 1);
    QCOMPARE(admit(m, 1, a), 0);
    // Same 8 leading tokens (two full blocks), another tail.
    const std::vector<int32_t> b = concat(iota_tokens(8, 1), {50, 51, 52});
    QCOMPARE(admit(m, 2, b), 8);
    QCOMPARE(table(m, 2)[0], table(m, 1)[0]);
    QCOMPARE(table(m, 2)[1], table(m, 1)[1]);
    QVERIFY(table(m, 2)[2] != table(m, 1)[2]);
    QCOMPARE(m.ref_count(table(m, 1)[0]), 2);
    QCOMPARE(m.ref_count(table(m, 1)[2]), 1);
    // Diverging inside the second block: only the first is shared.
    QCOMPARE(admit(m, 3, concat(iota_tokens(6, 1), {60, 61, 62})), 4);
    const BlockManagerStats st = m.stats();
    QCOMPARE(st.num_prefix_query_tokens, 10 + 11 + 9);
    QCOMPARE(st.num_prefix_hit_tokens, 12);
    QCOMPARE(st.num_shared_blocks, 2);
    QVERIFY(m.check_consistency());
  }

  void uncomputedBlocksAreNotHits() {
    BlockManager m = make(16, 4);
    QVERIFY(m.allocate(1, iota_tokens(12, 1)));
    QCOMPARE(*m.allocate(2, iota_tokens(12, 1)), 0);  // sequence 1's K/V do not exist yet
    QVERIFY(m.mark_computed(1, 6));                   // one full block computed
    QCOMPARE(*m.allocate(3, iota_tokens(12, 1)), 4);
    QVERIFY(!m.mark_computed(1, 5));  // going back is refused
    QVERIFY(!m.mark_computed(1, 13));
  }

  void wholePromptHitStillComputesTheLastToken() {
    BlockManager m = make(16, 4);
    admit(m, 1, iota_tokens(8, 1));
    // All 8 tokens are cached, but the last one must run to give logits: its block is new.
    QCOMPARE(admit(m, 2, iota_tokens(8, 1)), 4);
    QVERIFY(table(m, 2)[1] != table(m, 1)[1]);
    QCOMPARE(admit(m, 3, iota_tokens(9, 1)), 8);
  }

  void freedPrefixesStayCachedUntilReused() {
    BlockManager m = make(8, 4);
    admit(m, 1, iota_tokens(9, 1));
    const std::vector<BlockId> t1 = table(m, 1);
    QVERIFY(m.free(1));
    BlockManagerStats st = m.stats();
    QCOMPARE(st.num_cached_blocks, 2);  // the two full blocks; the partial one is free
    QCOMPARE(st.num_free_blocks, 6);
    QCOMPARE(st.num_used_blocks, 0);
    // Deepest block first in the eviction list.
    QCOMPARE(m.eviction_order(), (std::vector<BlockId>{t1[1], t1[0]}));
    const KvCacheSnapshot snap = m.snapshot();
    QCOMPARE(snap.blocks[size_t(t1[0])].state, BlockState::Cached);
    QCOMPARE(snap.blocks[size_t(t1[0])].tokens, iota_tokens(4, 1));
    QCOMPARE(snap.blocks[size_t(t1[2])].state, BlockState::Free);
    // A later request (next turn of the conversation) revives them.
    QCOMPARE(admit(m, 2, concat(iota_tokens(8, 1), {70, 71})), 8);
    QCOMPARE(table(m, 2)[0], t1[0]);
    QCOMPARE(m.stats().num_cached_blocks, 0);
    QVERIFY(m.check_consistency());
  }

  void evictionTakesTheLeastRecentlyUsedFirst() {
    BlockManager m = make(6, 2);
    admit(m, 1, {1, 2, 3, 4, 5});  // blocks a0 a1 full, a2 partial
    admit(m, 2, {11, 12, 13, 14, 15});
    const std::vector<BlockId> a = table(m, 1), b = table(m, 2);
    QVERIFY(m.free(1));  // released first: evicted first
    QVERIFY(m.free(2));
    QCOMPARE(m.eviction_order(), (std::vector<BlockId>{a[1], a[0], b[1], b[0]}));
    QCOMPARE(m.stats().num_free_blocks, 2);
    // Three new blocks: two free ones, then the least recently used cached block (a1).
    QCOMPARE(admit(m, 3, {21, 22, 23, 24, 25}), 0);
    QCOMPARE(m.stats().num_evictions, 1);
    QCOMPARE(m.eviction_order(), (std::vector<BlockId>{a[0], b[1], b[0]}));
    // Sequence 1's prefix lost its second block, not its first.
    QCOMPARE(*m.allocate(4, std::vector<int32_t>{1, 2, 3, 4, 5}), 2);
    QVERIFY(m.check_consistency());
  }

  void forkSharesAndCopyOnWriteSeparates() {
    BlockManager m = make(8, 4);
    admit(m, 1, iota_tokens(6, 1));  // one full block, one with 2 of 4 slots
    QVERIFY(m.fork(1, 2));
    QCOMPARE(table(m, 2), table(m, 1));
    const BlockId shared_last = table(m, 1)[1];
    QCOMPARE(m.ref_count(shared_last), 2);
    QVERIFY(!m.fork(1, 2));  // child exists
    QVERIFY(!m.fork(9, 3));  // unknown parent

    Result<AppendedSlot> s1 = m.append_slot(1, 100);
    QVERIFY(s1);
    QVERIFY(s1->copy.has_value());
    QCOMPARE(s1->copy->src, shared_last);
    const BlockId mine = table(m, 1)[1];
    QCOMPARE(s1->copy->dst, mine);
    QCOMPARE(s1->slot, int64_t(mine) * 4 + 2);
    QCOMPARE(m.ref_count(shared_last), 1);
    QCOMPARE(m.ref_count(mine), 1);
    QCOMPARE(m.ref_count(table(m, 1)[0]), 2);  // the full block stays shared
    // The other owner now holds the block alone and writes in place.
    Result<AppendedSlot> s2 = m.append_slot(2, 200);
    QVERIFY(s2);
    QVERIFY(!s2->copy.has_value());
    QCOMPARE(s2->slot, int64_t(shared_last) * 4 + 2);
    const KvCacheSnapshot snap = m.snapshot();
    QCOMPARE(snap.blocks[size_t(mine)].tokens, (std::vector<int32_t>{5, 6, 100}));
    QCOMPARE(snap.blocks[size_t(shared_last)].tokens, (std::vector<int32_t>{5, 6, 200}));
    QCOMPARE(m.stats().num_copy_on_writes, 1);
    QVERIFY(m.check_consistency());
  }

  void appendOpensANewBlockWhenTheLastIsFull() {
    BlockManager m = make(3, 4);
    admit(m, 1, iota_tokens(8, 1));
    QVERIFY(m.can_append(1));
    Result<AppendedSlot> s = m.append_slot(1, 9);
    QVERIFY(s);
    QCOMPARE(table(m, 1).size(), size_t(3));
    QCOMPARE(s->slot, int64_t(table(m, 1)[2]) * 4);
    for (int i = 0; i < 3; ++i) QVERIFY(m.append_slot(1, 10 + i));
    QVERIFY(!m.can_append(1));  // 12 tokens fill all 3 blocks
    Result<AppendedSlot> none = m.append_slot(1, 99);
    QVERIFY(!none);
    QCOMPARE(none.status().code(), ErrorCode::OutOfMemory);
    QCOMPARE(m.num_tokens(1), 12);
    QVERIFY(!m.can_append(42));
  }

  void errorsAreValuesNotCorruption() {
    BlockManager m = make(4, 4);
    admit(m, 1, iota_tokens(5, 1));
    QVERIFY(m.free(1));
    const Status twice = m.free(1);
    QVERIFY(!twice);
    QCOMPARE(twice.code(), ErrorCode::NotFound);
    QVERIFY(!m.free(77));
    QVERIFY(!m.truncate(77, 0));
    QVERIFY(!m.append_slot(77, 1));
    QVERIFY(!m.mark_computed(77, 0));
    admit(m, 2, iota_tokens(5, 1));
    QVERIFY(!m.truncate(2, 6));
    QVERIFY(!m.truncate(2, -1));
    QVERIFY(m.check_consistency());
    QCOMPARE(m.stats().num_used_blocks, 2);
  }

  void truncateReleasesTailAndLeavesSharedBlocks() {
    BlockManager m = make(8, 4);
    admit(m, 1, iota_tokens(10, 1));
    QVERIFY(m.fork(1, 2));
    const std::vector<BlockId> t = table(m, 1);
    QVERIFY(m.truncate(2, 5));  // drops block 2, keeps 1 slot of block 1 (shared)
    QCOMPARE(table(m, 2).size(), size_t(2));
    QCOMPARE(m.ref_count(t[2]), 1);
    QCOMPARE(m.ref_count(t[1]), 2);
    QCOMPARE(m.num_computed_tokens(2), 5);
    // Sequence 1 still reads its 10 tokens; 2's next token goes to a copy of block 1.
    Result<AppendedSlot> s = m.append_slot(2, 300);
    QVERIFY(s && s->copy.has_value());
    QCOMPARE(s->copy->src, t[1]);
    const KvCacheSnapshot snap = m.snapshot();
    QCOMPARE(snap.blocks[size_t(t[1])].tokens, (std::vector<int32_t>{5, 6, 7, 8}));
    QCOMPARE(snap.blocks[size_t(table(m, 2)[1])].tokens, (std::vector<int32_t>{5, 300}));
    QVERIFY(m.truncate(2, 0));
    QCOMPARE(table(m, 2).size(), size_t(0));
    QVERIFY(m.append_slot(2, 1));
    QVERIFY(m.check_consistency());
  }

  void truncatingAnOwnedCachedBlockUncachesIt() {
    BlockManager m = make(8, 4);
    admit(m, 1, iota_tokens(9, 1));
    const BlockId second = table(m, 1)[1];
    QVERIFY(m.snapshot().blocks[size_t(second)].is_prefix_cached);
    QVERIFY(m.truncate(1, 6));
    QVERIFY(!m.snapshot().blocks[size_t(second)].is_prefix_cached);
    QVERIFY(m.append_slot(1, 99));                // overwrites slot 2 of that block in place
    QCOMPARE(admit(m, 2, iota_tokens(9, 1)), 4);  // only the first block is still a hit
    QVERIFY(m.check_consistency());
  }

  void hashCollisionsNeverGiveWrongHits() {
    // Every block gets the same key: lookups must still prove the tokens and the parent chain.
    BlockManager m = make(32, 4, [](BlockHash, std::span<const int32_t>) { return BlockHash(42); });
    admit(m, 1, iota_tokens(12, 1));
    QCOMPARE(admit(m, 2, concat({90, 91, 92, 93}, iota_tokens(8, 5))), 0);  // other first block
    QCOMPARE(admit(m, 3, concat(iota_tokens(4, 1), {80, 81, 82, 83, 84})), 4);
    // Only one block can hold key 42: the chain of sequence 1 is findable through its first block only.
    QCOMPARE(admit(m, 4, iota_tokens(12, 1)), 4);
    QVERIFY(m.check_consistency());
  }

  void aHitNeedsTheSameParentBlock() {
    // Keys from a block's own tokens only: block [5..8] has one key under any prefix. A prompt
    // whose first block is cached must still not take [5..8] computed after another first block.
    BlockManager m =
        make(32, 4, [](BlockHash, std::span<const int32_t> t) { return hash_block_tokens(kRootBlockHash, t); });
    admit(m, 1, concat(iota_tokens(8, 1), {9}));                              // [1..4][5..8][9]
    admit(m, 2, concat(concat(iota_tokens(4, 11), iota_tokens(4, 5)), {9}));  // [11..14][5..8][9]
    QCOMPARE(admit(m, 3, concat(concat(iota_tokens(4, 11), iota_tokens(4, 5)), {9})), 4);
    QCOMPARE(admit(m, 4, concat(iota_tokens(8, 1), {9})), 8);  // the right chain still hits in full
    QVERIFY(m.check_consistency());
  }

  void aRewrittenParentOrphansItsCachedChildren() {
    // Block [5..8] was computed after [1..4]; that block is then cut and rewritten as
    // [1,2,30,40]. Its old child stays cached but must not follow the rewritten parent.
    BlockManager m =
        make(32, 4, [](BlockHash, std::span<const int32_t> t) { return hash_block_tokens(kRootBlockHash, t); });
    admit(m, 1, concat(iota_tokens(8, 1), {9}));
    QVERIFY(m.truncate(1, 2));  // the child goes to the eviction list, the parent is cut in place
    QCOMPARE(m.stats().num_cached_blocks, 1);
    QVERIFY(m.append_slot(1, 30));
    QVERIFY(m.append_slot(1, 40));
    QVERIFY(m.mark_computed(1, 4));
    const std::vector<int32_t> prompt = {1, 2, 30, 40, 5, 6, 7, 8, 9};
    QCOMPARE(admit(m, 2, prompt), 4);
    QVERIFY(m.check_consistency());
  }

  void statisticsDescribeThePool() {
    BlockManager m = make(8, 4);
    admit(m, 1, iota_tokens(5, 1));  // 2 blocks, 5 of 8 slots
    BlockManagerStats st = m.stats();
    QCOMPARE(st.num_used_blocks, 2);
    QCOMPARE(st.num_used_slots, 5);
    QCOMPARE(st.utilisation, 2.0 / 8.0);
    QCOMPARE(st.internal_fragmentation, 3.0 / 8.0);
    QVERIFY(m.fork(1, 2));
    st = m.stats();
    QCOMPARE(st.num_shared_blocks, 2);
    QCOMPARE(st.num_sequences, 2);
    const KvCacheSnapshot snap = m.snapshot();
    const BlockSnapshot& last = snap.blocks[size_t(table(m, 1)[1])];
    QCOMPARE(last.state, BlockState::InUse);
    QCOMPARE(last.owners, (std::vector<SequenceId>{1, 2}));
    QCOMPARE(last.ref_count, 2);
    QCOMPARE(last.first_position, 4);
    QCOMPARE(last.fill, 1);
    QCOMPARE(last.tokens, (std::vector<int32_t>{5}));
    QCOMPARE(std::string(block_state_name(BlockState::Cached)), std::string("cached"));
    QCOMPARE(std::string(allocation_status_name(AllocationStatus::Later)), std::string("later"));
  }

  void prefixCachingCanBeTurnedOff() {
    BlockManagerConfig c{8, 4, false, {}, {}};
    BlockManager m = std::move(BlockManager::create(c)).value();
    admit(m, 1, iota_tokens(9, 1));
    QCOMPARE(admit(m, 2, iota_tokens(9, 1)), 0);
    QVERIFY(m.free(1));
    QCOMPARE(m.stats().num_cached_blocks, 0);
    QCOMPARE(m.stats().num_free_blocks, 5);
  }
};

QTEST_APPLESS_MAIN(TestBlockManager)
#include "test_block_manager.moc"
