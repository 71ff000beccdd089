// The tiled paged attention (AVX-512 or AVX2: key tiles of 64 or 32, online softmax) against
// paged_attention_ref on shapes that cross many tiles: head sizes 128 and 256, and 80, 72, 56
// and 40 (which AVX-512's tiles decline and AVX2's take; the per-pair loop without AVX2),
// grouped and multi-query heads, a 203-token prefill beside decodes of another sequence, sliding
// windows that start mid-tile, soft-capping. test_attention_tiles_avx2 runs it with
// IWB_CPU_AVX2=1, test_attention_tiles_portable with IWB_CPU_PORTABLE=1.
#include "iwb/kernels/dequantize.h"
#include "iwb/kernels/paged_attention.h"
#include "random_tensors.h"

#include <QtTest>

#include <algorithm>
#include <numeric>
#include <random>

using namespace iwb;
using namespace iwb::test;

class TestAttentionTiles : public QObject {
  Q_OBJECT

 private slots:
  void tiledMatchesReference_data() {
    QTest::addColumn<int>("heads");
    QTest::addColumn<int>("kvHeads");
    QTest::addColumn<int>("dim");
    QTest::addColumn<int>("window");
    QTest::addColumn<float>("softcap");
    QTest::addColumn<bool>("hasSinks");
    QTest::newRow("12/2 heads of 128, causal") << 12 << 2 << 128 << 0 << 0.0f << false;
    QTest::newRow("12/2 heads of 128, window 70") << 12 << 2 << 128 << 70 << 0.0f << false;
    QTest::newRow("4/1 heads of 256, softcap 50") << 4 << 1 << 256 << 0 << 50.0f << false;
    QTest::newRow("32/8 heads of 64, window 33") << 32 << 8 << 64 << 33 << 0.0f << false;
    // 80: the AVX-512 tiles decline it (AVX2's take it); 72, 56 and 40 leave no, 8 and 16
    // columns of values after the AVX2 kernel's 24-column passes, and are no multiples of 16.
    QTest::newRow("6/3 heads of 80") << 6 << 3 << 80 << 0 << 0.0f << false;
    QTest::newRow("6/2 heads of 72, window 65") << 6 << 2 << 72 << 65 << 0.0f << false;
    QTest::newRow("4/4 heads of 56, softcap 30") << 4 << 4 << 56 << 0 << 30.0f << false;
    QTest::newRow("10/5 heads of 40") << 10 << 5 << 40 << 0 << 0.0f << false;
    // gpt-oss: a sink logit per head, with and without its sliding window.
    QTest::newRow("8/2 heads of 64, sinks") << 8 << 2 << 64 << 0 << 0.0f << true;
    QTest::newRow("8/2 heads of 64, window 33, sinks") << 8 << 2 << 64 << 33 << 0.0f << true;
    QTest::newRow("6/3 heads of 80, window 7, sinks") << 6 << 3 << 80 << 7 << 0.0f << true;
  }
  void tiledMatchesReference() {
    QFETCH(int, heads);
    QFETCH(int, kvHeads);
    QFETCH(int, dim);
    QFETCH(int, window);
    QFETCH(float, softcap);
    QFETCH(bool, hasSinks);
    std::mt19937 rng(static_cast<uint32_t>(heads * 1000 + dim + window));
    const int64_t block = 16, lengths[2] = {203, 90};
    const int64_t max_blocks = (lengths[0] + block - 1) / block;
    const int64_t num_blocks = 2 * max_blocks + 3;
    // Each sequence's blocks scattered over a shuffled pool full of noise.
    std::vector<int32_t> pool_ids(static_cast<size_t>(num_blocks));
    std::iota(pool_ids.begin(), pool_ids.end(), 0);
    std::shuffle(pool_ids.begin(), pool_ids.end(), rng);
    std::vector<int32_t> tables(static_cast<size_t>(2 * max_blocks), -1);
    for (int64_t i = 0; i < 2 * max_blocks; ++i) tables[static_cast<size_t>(i)] = pool_ids[static_cast<size_t>(i)];
    const int64_t row = kvHeads * dim;
    std::vector<uint16_t> k_pool(static_cast<size_t>(num_blocks * block * row)), v_pool(k_pool.size());
    for (uint16_t& h : k_pool) h = f32_to_fp16(random_floats(1, rng, 1.0f)[0]);
    for (uint16_t& h : v_pool) h = f32_to_fp16(random_floats(1, rng, 1.0f)[0]);
    // The batch: all of sequence 0 (a prefill), then positions 0, 63, 64 and 89 of sequence 1.
    // paged_attention splits it: the prefill and the run 63-64 to the prompt kernels, the lone
    // positions 0 and 89 to the decode kernel.
    std::vector<int32_t> token_seq(static_cast<size_t>(lengths[0]), 0), positions(static_cast<size_t>(lengths[0]));
    std::iota(positions.begin(), positions.end(), 0);
    for (int32_t p : {0, 63, 64, 89}) {
      token_seq.push_back(1);
      positions.push_back(p);
    }
    const auto num_tokens = static_cast<int64_t>(positions.size());
    const std::vector<float> q = random_floats(static_cast<size_t>(num_tokens * heads * dim), rng, 1.5f);
    const std::vector<int32_t> seq_lengths = {static_cast<int32_t>(lengths[0]), static_cast<int32_t>(lengths[1])};

    PagedAttentionArgs p;
    p.q = q.data();
    p.k_cache = k_pool.data();
    p.v_cache = v_pool.data();
    p.num_blocks = num_blocks;
    p.block_size = block;
    p.block_tables = tables.data();
    p.max_blocks_per_sequence = max_blocks;
    p.sequence_lengths = seq_lengths.data();
    p.num_sequences = 2;
    p.token_sequences = token_seq.data();
    p.positions = positions.data();
    p.num_tokens = num_tokens;
    p.num_heads = heads;
    p.num_kv_heads = kvHeads;
    p.head_dim = dim;
    p.head_dim_v = dim;
    p.scale = 1.0f / std::sqrt(static_cast<float>(dim));
    p.sliding_window = window;
    p.softcap = softcap;
    // Sinks from well below to well above the scores (which stay within about +-4 here).
    std::vector<float> sinks = random_floats(static_cast<size_t>(heads), rng, 6.0f);
    if (hasSinks) p.sinks = sinks.data();
    std::vector<float> ref(static_cast<size_t>(num_tokens * heads * dim), NAN);
    p.output = ref.data();
    QVERIFY(paged_attention_ref(p));
    for (int threads : {1, 2}) {
      std::vector<float> fast(ref.size(), NAN);
      p.output = fast.data();
      p.num_threads = threads;
      QVERIFY(paged_attention(p));
      const double err = max_relative_error(fast, ref);
      QVERIFY2(err < 1e-5, qPrintable(QString("threads %1: %2").arg(threads).arg(err)));
    }
  }

  // One visible key: the sink takes its share of the softmax, out = v * e^s / (e^s + e^sink).
  void sinkJoinsTheDenominator() {
    std::mt19937 rng(77);
    const int64_t dim = 64;
    const std::vector<float> q = random_floats(static_cast<size_t>(dim), rng, 1.0f);
    std::vector<uint16_t> k(static_cast<size_t>(dim)), v(static_cast<size_t>(dim));
    for (uint16_t& h : k) h = f32_to_fp16(random_floats(1, rng, 1.0f)[0]);
    for (uint16_t& h : v) h = f32_to_fp16(random_floats(1, rng, 1.0f)[0]);
    const int32_t table = 0, length = 1, seq = 0, pos = 0;
    const float sink = 0.7f;
    PagedAttentionArgs p;
    p.q = q.data();
    p.k_cache = k.data();
    p.v_cache = v.data();
    p.num_blocks = 1;
    p.block_size = 1;
    p.block_tables = &table;
    p.max_blocks_per_sequence = 1;
    p.sequence_lengths = &length;
    p.num_sequences = 1;
    p.token_sequences = &seq;
    p.positions = &pos;
    p.num_tokens = 1;
    p.num_heads = 1;
    p.num_kv_heads = 1;
    p.head_dim = dim;
    p.head_dim_v = dim;
    p.scale = 0.125f;
    p.sinks = &sink;
    double score = 0;
    for (int64_t i = 0; i < dim; ++i) score += static_cast<double>(q[i]) * fp16_to_f32(k[i]);
    score *= 0.125;
    const double w = std::exp(score) / (std::exp(score) + std::exp(static_cast<double>(sink)));
    for (const bool is_reference : {true, false}) {
      std::vector<float> out(static_cast<size_t>(dim), NAN);
      p.output = out.data();
      QVERIFY(is_reference ? paged_attention_ref(p) : paged_attention(p));
      for (int64_t i = 0; i < dim; ++i) QVERIFY(std::fabs(out[i] - w * fp16_to_f32(v[i])) < 1e-6);
    }
  }
};

QTEST_GUILESS_MAIN(TestAttentionTiles)
#include "test_attention_tiles.moc"
