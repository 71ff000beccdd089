// Property tests of the block manager: thousands of random operations (allocate with shared
// prefixes, append, fork, truncate, free, double free) on small pools, with a shadow model of
// every sequence's tokens and a real PagedKvStorage whose slots hold (token, prefix fingerprint,
// position). After
// every operation: reference counts equal the tables holding each block, free + cached + used
// = total, every sequence reads back exactly its tokens (copy-on-write and prefix hits are
// right), a written slot is never in a shared block, evictions follow the LRU order.
#include "iwb/engine/paged/block_manager.h"
#include "iwb/engine/paged/paged_kv_storage.h"
#include "iwb/kernels/dequantize.h"

#include <QtTest>

#include <algorithm>
#include <map>
#include <random>
#include <set>

using namespace iwb;

namespace {

struct Counters {
  int allocations = 0, prefix_hits = 0, later = 0, never = 0, appends = 0, copy_on_writes = 0, forks = 0,
      truncations = 0, frees = 0, double_frees = 0, evictions = 0, revivals = 0;
};

class Harness {
 public:
  Harness(uint32_t seed, int64_t num_blocks, int32_t block_size, bool prefix_caching, BlockHashFunction hash)
      : m_rng(seed), m_bs(block_size) {
    BlockManagerConfig c{num_blocks, block_size, prefix_caching, std::move(hash), {}};
    Result<BlockManager> m = BlockManager::create(c);
    QVERIFY(m);
    m_manager.emplace(std::move(m).value());
    // Two layers of one KV head with one value each (exact integers in f16): V = position, K =
    // the token id in layer 0 and a fingerprint of the whole prefix in layer 1.
    Result<std::unique_ptr<PagedKvStorage>> s = PagedKvStorage::create({2, 1, 1, 1}, block_size, num_blocks);
    QVERIFY(s);
    m_storage = std::move(s).value();
    // A few "documents" whose prefixes the prompts share (system prompts, earlier turns).
    for (int d = 0; d < 2; ++d) {
      std::vector<int32_t> doc(static_cast<size_t>(block_size) * 5);
      for (int32_t& t : doc) t = pick(1, 40);  // few distinct ids: repeated blocks, colliding content
      m_documents.push_back(doc);
    }
    // Two more that differ from those only in their first block: same later blocks under
    // another prefix, which a content-only key confuses.
    for (int d = 0; d < 2; ++d) {
      std::vector<int32_t> doc = m_documents[static_cast<size_t>(d)];
      for (int i = 0; i < block_size; ++i) doc[static_cast<size_t>(i)] = pick(41, 80);
      m_documents.push_back(doc);
    }
  }

  void run(int num_ops) {
    check_all("start");
    for (int op = 0; op < num_ops && !QTest::currentTestFailed(); ++op) {
      m_op = op;
      const int kind = pick(0, 99);
      if (kind < 22)
        op_allocate();
      else if (kind < 60)
        op_append();
      else if (kind < 68)
        op_fork();
      else if (kind < 76)
        op_truncate();
      else if (kind < 82)
        op_compute_rest();
      else if (kind < 97)
        op_free();
      else
        op_double_free();
      check_all("after op " + std::to_string(op));
    }
    // Freeing everything leaks nothing: each block is free or holds a cached prefix.
    for (const auto& [seq, tokens] : std::map(m_tokens)) free_sequence(seq);
    check_all("after freeing everything");
    const BlockManagerStats st = m_manager->stats();
    QCOMPARE(st.num_used_blocks, 0);
    QCOMPARE(st.num_free_blocks + st.num_cached_blocks, st.num_blocks);
    for (BlockId b = 0; b < m_manager->num_blocks(); ++b) QCOMPARE(m_manager->ref_count(b), 0);
  }

  const Counters& counters() const { return m_count; }

 private:
  int pick(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(m_rng); }
  int32_t new_token() { return pick(1, 1000); }

  SequenceId random_sequence() {
    auto it = m_tokens.begin();
    std::advance(it, pick(0, static_cast<int>(m_tokens.size()) - 1));
    return it->first;
  }

  // Like a model's keys, layer 1's depend on the whole prefix: a fingerprint of tokens 0..p
  // (below 2048, exact in f16). A prefix hit on a block computed after another prefix shows.
  static int32_t fingerprint(const std::vector<int32_t>& tokens, int64_t position) {
    int32_t f = 0;
    for (int64_t i = 0; i <= position; ++i) f = (f * 31 + tokens[static_cast<size_t>(i)]) % 2039;
    return f;
  }

  void write_slot(int64_t slot, int32_t token, int32_t prefix, int64_t position) {
    const float k0 = static_cast<float>(token), k1 = static_cast<float>(prefix), v = static_cast<float>(position);
    const int64_t slot_ids[1] = {slot};
    QVERIFY(m_storage->write(0, slot_ids, &k0, &v));
    QVERIFY(m_storage->write(1, slot_ids, &k1, &v));
  }

  // Writes the K/V of positions [from, to) of `seq` and tells the manager.
  void compute(SequenceId seq, int64_t from, int64_t to) {
    const std::vector<int32_t>& tokens = m_tokens[seq];
    for (int64_t p = from; p < to; ++p) {
      const int64_t slot = *m_manager->slot(seq, p);
      QCOMPARE(m_manager->ref_count(static_cast<BlockId>(slot / m_bs)), 1);  // never write a shared block
      write_slot(slot, tokens[static_cast<size_t>(p)], fingerprint(tokens, p), p);
    }
    QVERIFY(m_manager->mark_computed(seq, to));
    m_computed[seq] = to;
  }

  void op_allocate() {
    std::vector<int32_t> prompt;
    if (pick(0, 3) > 0) {
      const auto& doc = m_documents[static_cast<size_t>(pick(0, 3))];
      prompt.assign(doc.begin(), doc.begin() + pick(0, static_cast<int>(doc.size())));
    }
    const int tail = pick(prompt.empty() ? 1 : 0, m_bs * 2);
    for (int i = 0; i < tail; ++i) prompt.push_back(new_token());
    if (pick(0, 40) == 0)
      prompt.resize(static_cast<size_t>(m_manager->num_blocks() * m_bs + pick(1, 5)), 7);  // never fits

    const SequenceId seq = m_next_seq++;
    const AllocationCheck check = m_manager->can_allocate(prompt);
    const int64_t available_before = m_manager->num_available_blocks();
    const std::vector<BlockId> lru_before = m_manager->eviction_order();
    Result<int64_t> hit = m_manager->allocate(seq, prompt);
    if (check.status == AllocationStatus::Never) {
      ++m_count.never;
      QVERIFY(!hit);
      QVERIFY(m_manager->num_blocks_for(static_cast<int64_t>(prompt.size())) > m_manager->num_blocks());
      QVERIFY(hit.error_message().find("but the cache holds") != std::string::npos);
      return;
    }
    if (check.status == AllocationStatus::Later) {
      ++m_count.later;
      QVERIFY(!hit);
      QCOMPARE(hit.status().code(), ErrorCode::OutOfMemory);
      QVERIFY(check.num_new_blocks > available_before);
      QCOMPARE(m_manager->eviction_order(), lru_before);  // a refused allocation changes nothing
      return;
    }
    QVERIFY2(hit, hit.error_message().c_str());
    ++m_count.allocations;
    const int64_t cached = *hit;
    QVERIFY(cached % m_bs == 0 && cached < static_cast<int64_t>(prompt.size()));
    m_count.prefix_hits += cached > 0 ? 1 : 0;
    m_tokens[seq] = prompt;
    m_computed[seq] = cached;
    // The hit blocks already hold this prompt's keys and values: prefix caching is only right
    // if the storage agrees, token by token.
    for (int64_t p = 0; p < cached; ++p) {
      const int64_t slot = *m_manager->slot(seq, p);
      QCOMPARE(fp16_to_f32(*m_storage->k_slot(0, static_cast<BlockId>(slot / m_bs), slot % m_bs)),
               float(prompt[size_t(p)]));
    }
    const auto table = m_manager->block_table(seq);
    m_revived.assign(table.begin(), table.begin() + cached / m_bs);
    // Mostly the whole prompt runs at once; sometimes a chunk of it, sometimes nothing yet
    // (op_compute_rest finishes it): only computed blocks may become prefix hits.
    const int how = pick(0, 9);
    const int64_t len = static_cast<int64_t>(prompt.size());
    if (how >= 3)
      compute(seq, cached, len);
    else if (how >= 1)
      compute(seq, cached, cached + pick(1, static_cast<int>(len - cached)));
  }

  void op_compute_rest() {
    for (auto& [seq, tokens] : m_tokens) {
      if (m_computed[seq] < static_cast<int64_t>(tokens.size())) {
        compute(seq, m_computed[seq], static_cast<int64_t>(tokens.size()));
        return;
      }
    }
  }

  void op_append() {
    if (m_tokens.empty()) return;
    const SequenceId seq = random_sequence();
    std::vector<int32_t>& tokens = m_tokens[seq];
    if (m_computed[seq] < static_cast<int64_t>(tokens.size())) return;  // still prefilling
    const bool can = m_manager->can_append(seq);
    const int32_t token = new_token();
    Result<AppendedSlot> r = m_manager->append_slot(seq, token);
    QCOMPARE(bool(r), can);
    if (!r) {
      QCOMPARE(m_manager->num_available_blocks(), 0);
      return;
    }
    ++m_count.appends;
    if (r->copy) {
      ++m_count.copy_on_writes;
      QVERIFY(m_manager->ref_count(r->copy->src) >= 1);  // still someone else's
      QVERIFY(m_storage->copy_block(r->copy->src, r->copy->dst));
    }
    tokens.push_back(token);
    const int64_t position = static_cast<int64_t>(tokens.size()) - 1;
    QCOMPARE(r->slot, *m_manager->slot(seq, position));
    compute(seq, position, position + 1);
  }

  void op_fork() {
    if (m_tokens.empty()) return;
    const SequenceId parent = random_sequence();
    // Samples fork after the prompt ran (the scheduler forks only then).
    if (m_computed[parent] < static_cast<int64_t>(m_tokens[parent].size())) return;
    const SequenceId child = m_next_seq++;
    QVERIFY(m_manager->fork(parent, child));
    m_tokens[child] = m_tokens[parent];
    m_computed[child] = m_computed[parent];
    ++m_count.forks;
  }

  void op_truncate() {
    if (m_tokens.empty()) return;
    const SequenceId seq = random_sequence();
    std::vector<int32_t>& tokens = m_tokens[seq];
    const int64_t n = pick(0, static_cast<int>(tokens.size()));
    QVERIFY(m_manager->truncate(seq, n));
    tokens.resize(static_cast<size_t>(n));
    m_computed[seq] = std::min(m_computed[seq], n);
    ++m_count.truncations;
  }

  void free_sequence(SequenceId seq) {
    QVERIFY(m_manager->free(seq));
    m_tokens.erase(seq);
    m_computed.erase(seq);
    m_freed.push_back(seq);
  }

  void op_free() {
    if (m_tokens.empty()) return;
    free_sequence(random_sequence());
    ++m_count.frees;
  }

  void op_double_free() {
    if (m_freed.empty()) return;
    const BlockManagerStats before = m_manager->stats();
    const Status again = m_manager->free(m_freed[static_cast<size_t>(pick(0, static_cast<int>(m_freed.size()) - 1))]);
    QVERIFY(!again);
    QCOMPARE(again.code(), ErrorCode::NotFound);
    QCOMPARE(m_manager->stats().num_free_blocks, before.num_free_blocks);
    QCOMPARE(m_manager->stats().num_cached_blocks, before.num_cached_blocks);
    ++m_count.double_frees;
  }

  void check_all(const std::string& when) {
    const Status consistent = m_manager->check_consistency();
    QVERIFY2(consistent, (when + ": " + consistent.message()).c_str());
    const KvCacheSnapshot snap = m_manager->snapshot();
    std::vector<std::vector<SequenceId>> holders(snap.blocks.size());
    for (const auto& [seq, tokens] : m_tokens) {
      const auto table = m_manager->block_table(seq);
      QCOMPARE(int64_t(table.size()), m_manager->num_blocks_for(static_cast<int64_t>(tokens.size())));
      QCOMPARE(m_manager->num_tokens(seq), static_cast<int64_t>(tokens.size()));
      for (size_t i = 0; i < table.size(); ++i) holders[size_t(table[i])].push_back(seq);
      for (size_t p = 0; p < tokens.size(); ++p) {
        const BlockSnapshot& b = snap.blocks[size_t(table[p / size_t(m_bs)])];
        QVERIFY2(b.tokens.size() > p % size_t(m_bs) && b.tokens[p % size_t(m_bs)] == tokens[p],
                 (when + ": block bookkeeping lost a token of sequence " + std::to_string(seq)).c_str());
        if (static_cast<int64_t>(p) < m_computed[seq]) {
          const BlockId block = table[p / size_t(m_bs)];
          const int64_t offset = static_cast<int64_t>(p) % m_bs;
          for (int64_t layer = 0; layer < 2; ++layer) {
            const float key = layer == 0 ? float(tokens[p]) : float(fingerprint(tokens, static_cast<int64_t>(p)));
            QVERIFY2(
                fp16_to_f32(*m_storage->k_slot(layer, block, offset)) == key &&
                    fp16_to_f32(*m_storage->v_slot(layer, block, offset)) == float(p),
                (when + ": sequence " + std::to_string(seq) + " reads a wrong K/V at position " + std::to_string(p))
                    .c_str());
          }
        }
      }
    }
    int64_t num_free = 0, num_cached = 0, num_used = 0;
    for (const BlockSnapshot& b : snap.blocks) {
      std::vector<SequenceId> expected = holders[size_t(b.id)];
      std::sort(expected.begin(), expected.end());
      QCOMPARE(b.ref_count, static_cast<int32_t>(expected.size()));
      QCOMPARE(b.owners, expected);
      QCOMPARE(b.state == BlockState::InUse, !expected.empty());  // a free or cached block has no owner
      num_free += b.state == BlockState::Free;
      num_cached += b.state == BlockState::Cached;
      num_used += b.state == BlockState::InUse;
    }
    QCOMPARE(num_free + num_cached + num_used, m_manager->num_blocks());
    QCOMPARE(num_free, snap.stats.num_free_blocks);
    QCOMPARE(num_cached, snap.stats.num_cached_blocks);
    check_lru(snap);
  }

  // The eviction list against a shadow: blocks stay in release order, newly released ones join
  // at the tail (deepest first), and the evicted ones are exactly its head.
  void check_lru(const KvCacheSnapshot& snap) {
    const std::vector<BlockId> now = m_manager->eviction_order();
    for (BlockId b : now) QCOMPARE(snap.blocks[size_t(b)].state, BlockState::Cached);
    const std::set<BlockId> now_set(now.begin(), now.end());
    const std::set<BlockId> revived(m_revived.begin(), m_revived.end());
    std::vector<BlockId> remaining_before;  // previous order without blocks revived by a prefix hit
    for (BlockId b : m_lru) {
      if (revived.count(b) != 0 && now_set.count(b) == 0)
        ++m_count.revivals;
      else
        remaining_before.push_back(b);
    }
    size_t num_evicted = 0;
    while (num_evicted < remaining_before.size() && now_set.count(remaining_before[num_evicted]) == 0) ++num_evicted;
    const int64_t evictions = m_manager->stats().num_evictions;
    QCOMPARE(static_cast<int64_t>(num_evicted), evictions - m_num_evictions);
    m_count.evictions += static_cast<int>(num_evicted);
    m_num_evictions = evictions;
    const std::vector<BlockId> kept(remaining_before.begin() + static_cast<ptrdiff_t>(num_evicted),
                                    remaining_before.end());
    QVERIFY2(now.size() >= kept.size() && std::equal(kept.begin(), kept.end(), now.begin()),
             ("op " + std::to_string(m_op) + ": the eviction list is not least-recently-used ordered").c_str());
    for (size_t i = kept.size() + 1; i < now.size(); ++i) {
      QVERIFY(snap.blocks[size_t(now[i - 1])].first_position >= snap.blocks[size_t(now[i])].first_position ||
              m_tokens.empty());  // within one release, deeper blocks first
    }
    m_lru = now;
    m_revived.clear();
  }

  std::mt19937 m_rng;
  int32_t m_bs;
  std::optional<BlockManager> m_manager;
  std::unique_ptr<PagedKvStorage> m_storage;
  std::vector<std::vector<int32_t>> m_documents;
  std::map<SequenceId, std::vector<int32_t>> m_tokens;  // shadow: every live sequence's tokens
  std::map<SequenceId, int64_t> m_computed;
  std::vector<SequenceId> m_freed;
  std::vector<BlockId> m_lru;      // eviction order after the previous operation
  std::vector<BlockId> m_revived;  // blocks the last allocation took from the prefix cache
  int64_t m_num_evictions = 0;
  SequenceId m_next_seq = 1;
  int m_op = 0;
  Counters m_count;
};

}  // namespace

class TestBlockManagerProperties : public QObject {
  Q_OBJECT

 private slots:
  void randomOperationsKeepInvariants_data() {
    QTest::addColumn<uint>("seed");
    QTest::addColumn<int>("numBlocks");
    QTest::addColumn<int>("blockSize");
    QTest::addColumn<bool>("prefixCaching");
    QTest::addColumn<bool>("weakHash");
    QTest::newRow("16 blocks of 4") << 1u << 16 << 4 << true << false;
    QTest::newRow("40 blocks of 16") << 2u << 40 << 16 << true << false;
    QTest::newRow("12 blocks of 2, colliding hash") << 3u << 12 << 2 << true << true;
    QTest::newRow("24 blocks of 3, content-only hash") << 4u << 24 << 3 << true << true;
    QTest::newRow("20 blocks of 5, no prefix cache") << 5u << 20 << 5 << false << false;
    QTest::newRow("9 blocks of 1") << 6u << 9 << 1 << true << false;
  }
  void randomOperationsKeepInvariants() {
    QFETCH(uint, seed);
    QFETCH(int, numBlocks);
    QFETCH(int, blockSize);
    QFETCH(bool, prefixCaching);
    QFETCH(bool, weakHash);
    BlockHashFunction hash;
    if (weakHash && blockSize == 2) {
      // Keys from the first token only, parent ignored: collisions everywhere.
      hash = [](BlockHash, std::span<const int32_t> t) { return BlockHash(t.empty() ? 0 : t[0] % 3); };
    } else if (weakHash) {
      // Keys from the block's own tokens, parent ignored: equal blocks under different prefixes collide.
      hash = [](BlockHash, std::span<const int32_t> t) { return hash_block_tokens(kRootBlockHash, t); };
    }
    Harness h(seed, numBlocks, blockSize, prefixCaching, hash);
    h.run(4000);
    if (QTest::currentTestFailed()) return;
    const Counters& c = h.counters();
    qInfo(
        "allocations %d (prefix hits %d), later %d, never %d, appends %d, copy-on-writes %d, forks %d, "
        "truncations %d, frees %d, double frees %d, evictions %d, revivals %d",
        c.allocations, c.prefix_hits, c.later, c.never, c.appends, c.copy_on_writes, c.forks, c.truncations, c.frees,
        c.double_frees, c.evictions, c.revivals);
    // The run must have exercised what it claims to check.
    QVERIFY(c.allocations > 100 && c.appends > 500 && c.forks > 50 && c.truncations > 50 && c.double_frees > 10);
    QVERIFY(c.later > 0 && c.never > 0);
    if (blockSize > 1) QVERIFY(c.copy_on_writes > 10);  // a block of one slot is never written twice
    if (prefixCaching) QVERIFY(c.prefix_hits > 10 && c.evictions > 10 && c.revivals > 5);
  }
};

QTEST_APPLESS_MAIN(TestBlockManagerProperties)
#include "test_block_manager_properties.moc"
