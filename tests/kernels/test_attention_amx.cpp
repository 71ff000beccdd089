// The AMX prompt attention (paged_attention_amx.cpp: bf16 tile products of split operands)
// against paged_attention_ref: a 203-token prefill beside decodes of another sequence over a
// shuffled pool full of noise, head sizes 32 to 256 (values 16 to 256, column tails of one to
// three 16-column tiles), query-head groups of 1 to 130 (7 to 48 row tiles, the last partly
// filled; runs of 5 to 208 tokens, their length set by the thread count), sliding windows
// starting mid-tile, soft-capping, sinks, a quantized and an FP8 cache, 1 to 3 threads. Head
// sizes the tiles cannot take are declined.
// Skips, saying why, on CPUs (or kernels) without AMX-BF16.
#include "cpu_features.h"
#include "paged_attention_amx.h"

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

struct Case {
  int heads = 12, kv_heads = 2, dk = 128, dv = 128;
  int window = 0;
  float softcap = 0;
  bool has_sinks = false;
  GgmlType k_type = GgmlType::F16, v_type = GgmlType::F16;
};

// bf16 hi + lo keeps 16 significant bits of a query or probability (2^-17), so the outputs
// agree with the reference to about 1e-5 of the largest (test_paged_attention_quant measured
// up to 1.03e-5), not the f32 tiles' ~1.4e-6: still far below an f16 cache's own rounding
// (2^-11 of each value). A wrong tile layout or mask errs by 1e-2 and more.
constexpr double kTolerance = 3e-5;

}  // namespace

Q_DECLARE_METATYPE(Case)

class TestAttentionAmx : public QObject {
  Q_OBJECT

 private slots:
  void initTestCase() {
    if (!detail::has_amx_bf16()) QSKIP(qPrintable(QString("no AMX-BF16: %1").arg(detail::amx_unused_reason())));
    if (qEnvironmentVariableIsSet("IWB_ATTENTION_AMX") && qEnvironmentVariableIntValue("IWB_ATTENTION_AMX") == 0)
      QSKIP("IWB_ATTENTION_AMX=0 turns this kernel off");
  }

  void matchesReference_data() {
    QTest::addColumn<Case>("c");
    auto row = [](const char* name, Case c) { QTest::newRow(name) << c; };
    row("12/2 heads of 128 (runs of 70-104 tokens)", {});
    row("12/2 heads of 128, window 70", {.window = 70});
    row("4/1 heads of 256, softcap 50 (runs of 35-104)",
        {.heads = 4, .kv_heads = 1, .dk = 256, .dv = 256, .softcap = 50});
    row("32/8 heads of 64, window 33", {.heads = 32, .kv_heads = 8, .dk = 64, .dv = 64, .window = 33});
    row("16/1 heads of 128 (runs of 35-42, 35-42 row tiles)", {.heads = 16, .kv_heads = 1});
    row("3/3 heads of 96, values of 80 (a 1-tile column tail)", {.heads = 3, .kv_heads = 3, .dk = 96, .dv = 80});
    row("8/2 heads of 64, values of 48, window 7, sinks",
        {.heads = 8, .kv_heads = 2, .dk = 64, .dv = 48, .window = 7, .has_sinks = true});
    row("40/1 heads of 32, values of 16 (runs of 19)", {.heads = 40, .kv_heads = 1, .dk = 32, .dv = 16});
    row("130/1 heads of 32, values of 112 (runs of 5, 41 row tiles)",
        {.heads = 130, .kv_heads = 1, .dk = 32, .dv = 112});
    row("8/2 heads of 64, sinks", {.heads = 8, .kv_heads = 2, .dk = 64, .dv = 64, .has_sinks = true});
    row("Q8_0 keys, Q4_0 values (rotated)", {.k_type = GgmlType::Q8_0, .v_type = GgmlType::Q4_0});
    row("FP8 keys and values", {.k_type = GgmlType::F8_E4M3, .v_type = GgmlType::F8_E4M3});
  }

  void matchesReference() {
    QFETCH(Case, c);
    std::mt19937 rng(static_cast<uint32_t>(c.heads * 1000 + c.dk + c.dv + c.window));
    const int64_t block = 16, lengths[2] = {203, 90};
    const int64_t max_blocks = (lengths[0] + block - 1) / block;
    const int64_t num_blocks = 2 * max_blocks + 3;
    std::vector<int32_t> pool_ids(static_cast<size_t>(num_blocks));
    std::iota(pool_ids.begin(), pool_ids.end(), 0);
    std::shuffle(pool_ids.begin(), pool_ids.end(), rng);
    std::vector<int32_t> tables(static_cast<size_t>(2 * max_blocks), -1);
    for (int64_t i = 0; i < 2 * max_blocks; ++i) tables[static_cast<size_t>(i)] = pool_ids[static_cast<size_t>(i)];
    const int64_t k_row = int64_t{c.kv_heads} * c.dk, v_row = int64_t{c.kv_heads} * c.dv;
    const int64_t num_slots = num_blocks * block;
    std::vector<uint16_t> k_pool(static_cast<size_t>(num_slots * kv_row_units(c.k_type, k_row))),
        v_pool(static_cast<size_t>(num_slots * kv_row_units(c.v_type, v_row)));
    // Every slot written (the unused ones are noise the tables must not reach).
    std::vector<int64_t> slot_ids(static_cast<size_t>(num_slots));
    std::iota(slot_ids.begin(), slot_ids.end(), 0);
    const std::vector<float> keys = random_floats(static_cast<size_t>(num_slots * k_row), rng, 1.0f);
    const std::vector<float> values = random_floats(static_cast<size_t>(num_slots * v_row), rng, 1.0f);
    WriteKvPagedArgs wr;
    wr.k = keys.data();
    wr.v = values.data();
    wr.slot_mapping = slot_ids.data();
    wr.num_tokens = num_slots;
    wr.k_cache = k_pool.data();
    wr.v_cache = v_pool.data();
    wr.num_slots = num_slots;
    wr.k_row = k_row;
    wr.v_row = v_row;
    wr.num_kv_heads = c.kv_heads;
    wr.k_type = c.k_type;
    wr.v_type = c.v_type;
    QVERIFY(write_kv_paged(wr));
    // The batch: all of sequence 0 (a prefill), then positions 0, 31, 63, 64 and 89 of sequence 1.
    std::vector<int32_t> token_seq(static_cast<size_t>(lengths[0]), 0), positions(static_cast<size_t>(lengths[0]));
    std::iota(positions.begin(), positions.end(), 0);
    for (int32_t p : {0, 31, 63, 64, 89}) {
      token_seq.push_back(1);
      positions.push_back(p);
    }
    const auto num_tokens = static_cast<int64_t>(positions.size());
    const std::vector<float> q = random_floats(static_cast<size_t>(num_tokens * c.heads * c.dk), rng, 1.5f);
    const std::vector<int32_t> seq_lengths = {static_cast<int32_t>(lengths[0]), static_cast<int32_t>(lengths[1])};
    const std::vector<float> sinks = random_floats(static_cast<size_t>(c.heads), rng, 6.0f);

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
    p.num_heads = c.heads;
    p.num_kv_heads = c.kv_heads;
    p.head_dim = c.dk;
    p.head_dim_v = c.dv;
    p.scale = 1.0f / std::sqrt(static_cast<float>(c.dk));
    p.sliding_window = c.window;
    p.softcap = c.softcap;
    p.k_type = c.k_type;
    p.v_type = c.v_type;
    if (c.has_sinks) p.sinks = sinks.data();
    std::vector<float> ref(static_cast<size_t>(num_tokens * c.heads * c.dv), NAN);
    p.output = ref.data();
    QVERIFY(paged_attention_ref(p));
    for (int threads : {1, 2, 3}) {
      std::vector<float> fast(ref.size(), NAN);
      p.output = fast.data();
      p.num_threads = threads;
      QVERIFY(detail::paged_attention_amx(p));
      const double err = max_relative_error(fast, ref);
      if (threads == 1) qInfo("max relative error %.3g", err);
      QVERIFY2(err < kTolerance, qPrintable(QString("threads %1: %2").arg(threads).arg(err)));
    }
  }

  // Head sizes the tiles do not divide go to the tiled kernel (nothing written here).
  void declinesOtherHeadSizes() {
    for (const auto& [dk, dv] : {std::pair{80, 80}, std::pair{128, 72}, std::pair{544, 128}}) {
      PagedAttentionArgs p;
      p.num_heads = p.num_kv_heads = 1;
      p.head_dim = dk;
      p.head_dim_v = dv;
      QVERIFY2(!detail::paged_attention_amx(p), qPrintable(QString("%1/%2").arg(dk).arg(dv)));
    }
  }
};

QTEST_GUILESS_MAIN(TestAttentionAmx)
#include "test_attention_amx.moc"
