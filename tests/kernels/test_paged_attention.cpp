// Paged attention equals contiguous attention: two sequences (37 and 45 positions, block size
// 16, head_dim 64, 14 heads over 2 KV heads) whose first two blocks are shared, scattered over a
// shuffled pool, give the outputs of attention_ref on each sequence's own contiguous cache; the
// fast path matches the reference; the paged K/V write equals its scalar twin; bad arguments
// are refused.
#include "iwb/kernels/attention.h"
#include "iwb/kernels/dequantize.h"
#include "iwb/kernels/paged_attention.h"
#include "random_tensors.h"

#include <QtTest>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

using namespace iwb;
using namespace iwb::test;

namespace {

constexpr int64_t kHeads = 14, kKvHeads = 2, kDim = 64, kDimV = 64, kBlock = 16, kPoolBlocks = 11;
constexpr int64_t kRowK = kKvHeads * kDim, kRowV = kKvHeads * kDimV;

struct PagedSetup {
  // Contiguous f32 K/V per sequence [len x row]; sequence 1 repeats sequence 0's first 32 positions.
  std::vector<std::vector<float>> k, v;
  std::vector<int32_t> lengths = {37, 45};
  std::vector<int32_t> tables;  // [2 x 3]
  std::vector<uint16_t> k_pool, v_pool;
  int64_t max_blocks = 3;
};

PagedSetup make_setup(std::mt19937& rng) {
  PagedSetup s;
  s.k.push_back(random_floats(static_cast<size_t>(37 * kRowK), rng));
  s.v.push_back(random_floats(static_cast<size_t>(37 * kRowV), rng));
  std::vector<float> k1 = random_floats(static_cast<size_t>(45 * kRowK), rng);
  std::vector<float> v1 = random_floats(static_cast<size_t>(45 * kRowV), rng);
  std::copy_n(s.k[0].begin(), 32 * kRowK, k1.begin());  // the shared prefix: same keys and values
  std::copy_n(s.v[0].begin(), 32 * kRowV, v1.begin());
  s.k.push_back(std::move(k1));
  s.v.push_back(std::move(v1));
  // Blocks 7 and 2 are shared by both tables; the pool is filled with noise first, so a wrong
  // slot reads garbage rather than zeros.
  s.tables = {7, 2, 5, 7, 2, 9};
  const std::vector<float> noise_k = random_floats(static_cast<size_t>(kPoolBlocks * kBlock * kRowK), rng, 3.0f);
  const std::vector<float> noise_v = random_floats(static_cast<size_t>(kPoolBlocks * kBlock * kRowV), rng, 3.0f);
  s.k_pool.resize(noise_k.size());
  s.v_pool.resize(noise_v.size());
  for (size_t i = 0; i < noise_k.size(); ++i) s.k_pool[i] = f32_to_fp16(noise_k[i]);
  for (size_t i = 0; i < noise_v.size(); ++i) s.v_pool[i] = f32_to_fp16(noise_v[i]);
  // The write path under test: each sequence's K/V through its slot mapping (sequence 1 only
  // writes its own third block; the shared ones are already there).
  for (int seq = 0; seq < 2; ++seq) {
    const int64_t first = seq == 0 ? 0 : 32;
    std::vector<int64_t> slot_ids;
    for (int64_t p = first; p < s.lengths[seq]; ++p) slot_ids.push_back(s.tables[seq * 3 + p / kBlock] * kBlock + p % kBlock);
    WriteKvPagedArgs w;
    w.k = s.k[seq].data() + first * kRowK;
    w.v = s.v[seq].data() + first * kRowV;
    w.slot_mapping = slot_ids.data();
    w.num_tokens = static_cast<int64_t>(slot_ids.size());
    w.k_cache = s.k_pool.data();
    w.v_cache = s.v_pool.data();
    w.num_slots = kPoolBlocks * kBlock;
    w.k_row = kRowK;
    w.v_row = kRowV;
    if (!write_kv_paged(w)) qFatal("write_kv_paged refused a valid write");
  }
  return s;
}

std::vector<uint16_t> to_f16(const std::vector<float>& x) {
  std::vector<uint16_t> h(x.size());
  for (size_t i = 0; i < x.size(); ++i) h[i] = f32_to_fp16(x[i]);
  return h;
}

}  // namespace

class TestPagedAttention : public QObject {
  Q_OBJECT

 private slots:
  void pagedEqualsContiguous_data() {
    QTest::addColumn<int>("window");
    QTest::addColumn<float>("softcap");
    QTest::newRow("causal") << 0 << 0.0f;
    QTest::newRow("sliding window 20") << 20 << 0.0f;
    QTest::newRow("softcap 30") << 0 << 30.0f;
  }
  void pagedEqualsContiguous() {
    QFETCH(int, window);
    QFETCH(float, softcap);
    std::mt19937 rng(31);
    const PagedSetup s = make_setup(rng);
    // A batch: all 37 positions of sequence 0 (a prefill), then positions 3, 31, 32 and 44 of
    // sequence 1 (inside the shared blocks, at the border, and a decode at the end).
    std::vector<int32_t> token_seq(37, 0), positions(37);
    std::iota(positions.begin(), positions.end(), 0);
    for (int32_t p : {3, 31, 32, 44}) {
      token_seq.push_back(1);
      positions.push_back(p);
    }
    const int64_t num_tokens = static_cast<int64_t>(positions.size());
    const std::vector<float> q = random_floats(static_cast<size_t>(num_tokens * kHeads * kDim), rng, 1.5f);

    // Expected: contiguous attention over each sequence's own cache.
    std::vector<float> expected(static_cast<size_t>(num_tokens * kHeads * kDimV), NAN);
    for (int seq = 0; seq < 2; ++seq) {
      const std::vector<uint16_t> k = to_f16(s.k[seq]), v = to_f16(s.v[seq]);
      for (int64_t t = 0; t < num_tokens; ++t) {
        if (token_seq[t] != seq) continue;
        AttentionArgs a;
        a.q = q.data() + t * kHeads * kDim;
        a.k = k.data();
        a.v = v.data();
        a.k_row_stride = kRowK;
        a.v_row_stride = kRowV;
        a.num_kv = s.lengths[seq];
        a.positions = &positions[t];
        a.num_tokens = 1;
        a.num_heads = kHeads;
        a.num_kv_heads = kKvHeads;
        a.head_dim = kDim;
        a.head_dim_v = kDimV;
        a.scale = 1.0f / std::sqrt(float(kDim));
        a.sliding_window = window;
        a.softcap = softcap;
        a.output = expected.data() + t * kHeads * kDimV;
        QVERIFY(attention_ref(a));
      }
    }

    PagedAttentionArgs p;
    p.q = q.data();
    p.k_cache = s.k_pool.data();
    p.v_cache = s.v_pool.data();
    p.num_blocks = kPoolBlocks;
    p.block_size = kBlock;
    p.block_tables = s.tables.data();
    p.max_blocks_per_sequence = s.max_blocks;
    p.sequence_lengths = s.lengths.data();
    p.num_sequences = 2;
    p.token_sequences = token_seq.data();
    p.positions = positions.data();
    p.num_tokens = num_tokens;
    p.num_heads = kHeads;
    p.num_kv_heads = kKvHeads;
    p.head_dim = kDim;
    p.head_dim_v = kDimV;
    p.scale = 1.0f / std::sqrt(float(kDim));
    p.sliding_window = window;
    p.softcap = softcap;
    std::vector<float> ref(expected.size(), NAN), fast(expected.size(), NAN);
    p.output = ref.data();
    QVERIFY(paged_attention_ref(p));
    p.output = fast.data();
    p.num_threads = 2;
    QVERIFY(paged_attention(p));
    QVERIFY2(max_relative_error(ref, expected) < 1e-6, qPrintable(QString::number(max_relative_error(ref, expected))));
    QVERIFY2(max_relative_error(fast, ref) < 1e-5, qPrintable(QString::number(max_relative_error(fast, ref))));
    const OpCost cost = paged_attention_cost(p);
    QVERIFY(cost.flops > 0 && cost.bytes > 0);
  }

  void writeMatchesItsReference() {
    std::mt19937 rng(37);
    const int64_t num_tokens = 9, num_slots = 40, k_row = 3 * 24, v_row = 3 * 40;
    const std::vector<float> k = random_floats(static_cast<size_t>(num_tokens * k_row), rng, 2.0f);
    const std::vector<float> v = random_floats(static_cast<size_t>(num_tokens * v_row), rng, 2.0f);
    const std::vector<int64_t> slot_ids = {5, 39, 0, -1, 17, 16, 2, 33, 8};  // -1: padding, skipped
    std::vector<uint16_t> k_fast(static_cast<size_t>(num_slots * k_row), 0x1234), v_fast(static_cast<size_t>(num_slots * v_row), 0x1234);
    std::vector<uint16_t> k_ref = k_fast, v_ref = v_fast;
    WriteKvPagedArgs w{k.data(), v.data(), slot_ids.data(), num_tokens, k_fast.data(), v_fast.data(), num_slots, k_row, v_row};
    QVERIFY(write_kv_paged(w));
    w.k_cache = k_ref.data();
    w.v_cache = v_ref.data();
    QVERIFY(write_kv_paged_ref(w));
    QCOMPARE(k_fast, k_ref);
    QCOMPARE(v_fast, v_ref);
    QCOMPARE(k_ref[static_cast<size_t>(17 * k_row + 4)], f32_to_fp16(k[static_cast<size_t>(4 * k_row + 4)]));
    QCOMPARE(write_kv_paged_cost(w).bytes, 8.0 * (6.0 * (k_row + v_row) + 8.0));
    // A slot past the pool is refused before anything is written.
    const std::vector<int64_t> bad = {1, 2, 3, 4, 40, 6, 7, 8, 9};
    const std::vector<uint16_t> before = k_ref;
    w.slot_mapping = bad.data();
    QVERIFY(!write_kv_paged(w));
    QVERIFY(!write_kv_paged_ref(w));
    QCOMPARE(k_ref, before);
  }

  void inconsistentArgumentsAreRefused() {
    std::mt19937 rng(41);
    PagedSetup s = make_setup(rng);
    const std::vector<float> q = random_floats(static_cast<size_t>(kHeads * kDim), rng);
    std::vector<float> out(static_cast<size_t>(kHeads * kDimV));
    int32_t seq = 1, pos = 44;
    PagedAttentionArgs p;
    p.q = q.data();
    p.k_cache = s.k_pool.data();
    p.v_cache = s.v_pool.data();
    p.num_blocks = kPoolBlocks;
    p.block_size = kBlock;
    p.block_tables = s.tables.data();
    p.max_blocks_per_sequence = s.max_blocks;
    p.sequence_lengths = s.lengths.data();
    p.num_sequences = 2;
    p.token_sequences = &seq;
    p.positions = &pos;
    p.num_tokens = 1;
    p.num_heads = kHeads;
    p.num_kv_heads = kKvHeads;
    p.head_dim = kDim;
    p.head_dim_v = kDimV;
    p.output = out.data();
    QVERIFY(paged_attention(p));
    pos = 45;  // past the sequence's length
    QVERIFY(!paged_attention(p));
    QVERIFY(!paged_attention_ref(p));
    pos = 44;
    s.tables[5] = kPoolBlocks;  // a block outside the pool
    QVERIFY(!paged_attention(p));
    s.tables[5] = 9;
    s.lengths[1] = 49;  // longer than its 3-block table
    QVERIFY(!paged_attention(p));
    s.lengths[1] = 45;
    seq = 2;  // no such sequence
    QVERIFY(!paged_attention(p));
    seq = 1;
    p.num_kv_heads = 3;  // does not divide 14 heads
    QVERIFY(!paged_attention(p));
    QCOMPARE(paged_attention_cost(p).flops, 0.0);
  }
};

QTEST_APPLESS_MAIN(TestPagedAttention)
#include "test_paged_attention.moc"
