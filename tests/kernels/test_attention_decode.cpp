// The decode attention (paged_attention_decode.cpp: AVX-512, or AVX2 on CPUs without it or
// under IWB_CPU_AVX2=1) against paged_attention_ref: one
// query token per sequence over caches written by write_kv_paged (F16, and quantized sides
// rotated as the engine stores them; Q8_0 and Q4_0 read in place by the AVX-512 kernels), query-head groups of 1 to 16
// (one or two groups of rows per KV head), head sizes 64 to 256 (80: a column tail), depths from one key to past
// several key splits, sliding windows, soft-capping and sinks, batches of several sequences, and 1-3 threads (which
// change how the keys are split). A batch holding a run of positions (a prompt), or asking for batch invariance, is
// declined and left to the tiled kernel.
#include "cpu_features.h"
#include "paged_attention_decode.h"

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
  int heads = 12, kv_heads = 2, dim = 128;
  std::vector<int32_t> lengths = {300};  // each sequence decodes its last position
  int64_t window = 0;
  float softcap = 0;
  bool has_sinks = false;
  GgmlType k_type = GgmlType::F16, v_type = GgmlType::F16;
};

// Caches written through write_kv_paged from random keys and values, blocks shuffled.
struct Setup {
  std::vector<uint16_t> k_cache, v_cache;
  std::vector<int32_t> tables, token_sequences, positions;
  std::vector<float> q, sinks;
  PagedAttentionArgs args;
};

void make_setup(const Case& c, std::mt19937& rng, Setup& s) {
  const int64_t block = 16, row = int64_t{c.kv_heads} * c.dim;
  int64_t max_blocks = 0, num_blocks = 0;
  for (int32_t len : c.lengths) {
    max_blocks = std::max<int64_t>(max_blocks, (len + block - 1) / block);
    num_blocks += (len + block - 1) / block;
  }
  num_blocks += 3;
  std::vector<int32_t> pool(static_cast<size_t>(num_blocks));
  std::iota(pool.begin(), pool.end(), 0);
  std::shuffle(pool.begin(), pool.end(), rng);
  s.tables.assign(static_cast<size_t>(c.lengths.size() * max_blocks), -1);
  std::vector<int64_t> key_slots;
  size_t next = 0;
  for (size_t q = 0; q < c.lengths.size(); ++q) {
    for (int64_t b = 0; b < (c.lengths[q] + block - 1) / block; ++b) s.tables[q * max_blocks + b] = pool[next++];
    for (int32_t p = 0; p < c.lengths[q]; ++p) {
      key_slots.push_back(int64_t{s.tables[q * max_blocks + p / block]} * block + p % block);
    }
    s.token_sequences.push_back(static_cast<int32_t>(q));
    s.positions.push_back(c.lengths[q] - 1);
  }
  s.k_cache.assign(static_cast<size_t>(num_blocks * block * kv_row_units(c.k_type, row)), 0);
  s.v_cache.assign(static_cast<size_t>(num_blocks * block * kv_row_units(c.v_type, row)), 0);
  const auto n = static_cast<int64_t>(key_slots.size());
  const std::vector<float> keys = random_floats(static_cast<size_t>(n * row), rng, 1.0f);
  const std::vector<float> values = random_floats(static_cast<size_t>(n * row), rng, 1.0f);
  WriteKvPagedArgs w;
  w.k = keys.data();
  w.v = values.data();
  w.slot_mapping = key_slots.data();
  w.num_tokens = n;
  w.k_cache = s.k_cache.data();
  w.v_cache = s.v_cache.data();
  w.num_slots = num_blocks * block;
  w.k_row = w.v_row = row;
  w.num_kv_heads = c.kv_heads;
  w.k_type = c.k_type;
  w.v_type = c.v_type;
  QVERIFY(write_kv_paged(w));

  s.q = random_floats(static_cast<size_t>(s.positions.size() * c.heads * c.dim), rng, 1.5f);
  s.sinks = random_floats(static_cast<size_t>(c.heads), rng, 6.0f);
  PagedAttentionArgs& a = s.args;
  a.q = s.q.data();
  a.k_cache = s.k_cache.data();
  a.v_cache = s.v_cache.data();
  a.num_blocks = num_blocks;
  a.block_size = block;
  a.block_tables = s.tables.data();
  a.max_blocks_per_sequence = max_blocks;
  a.sequence_lengths = c.lengths.data();
  a.num_sequences = static_cast<int64_t>(c.lengths.size());
  a.token_sequences = s.token_sequences.data();
  a.positions = s.positions.data();
  a.num_tokens = static_cast<int64_t>(s.positions.size());
  a.num_heads = c.heads;
  a.num_kv_heads = c.kv_heads;
  a.head_dim = a.head_dim_v = c.dim;
  a.scale = 1.0f / std::sqrt(static_cast<float>(c.dim));
  a.sliding_window = c.window;
  a.softcap = c.softcap;
  a.k_type = c.k_type;
  a.v_type = c.v_type;
  a.sinks = c.has_sinks ? s.sinks.data() : nullptr;
}

}  // namespace

Q_DECLARE_METATYPE(Case)

class TestAttentionDecode : public QObject {
  Q_OBJECT

 private slots:
  void initTestCase() {
    if (detail::cpu_path() == detail::CpuPath::Portable)
      QSKIP("the decode kernels need AVX2 or AVX-512 (this CPU runs the per-pair loop)");
    qInfo("decode kernels: %s", detail::cpu_path() == detail::CpuPath::Avx512 ? "AVX-512" : "AVX2");
    if (qEnvironmentVariable("IWB_CPU_AVX2") == "1") QVERIFY(detail::cpu_path() != detail::CpuPath::Avx512);
  }

  void matchesReference_data() {
    QTest::addColumn<Case>("c");
    auto row = [](const char* name, Case c) { QTest::newRow(name) << c; };
    row("12/2 heads of 128, 300 keys", {});
    row("12/2 heads of 128, 1 key", {.lengths = {1}});
    row("12/2 heads of 128, 65 keys", {.lengths = {65}});
    row("12/2 heads of 128, 3001 keys (split)", {.lengths = {3001}});
    row("4/1 heads of 256, 2049 keys, softcap 30",
        {.heads = 4, .kv_heads = 1, .dim = 256, .lengths = {2049}, .softcap = 30});
    row("32/8 heads of 64, window 100 of 1500",
        {.heads = 32, .kv_heads = 8, .dim = 64, .lengths = {1500}, .window = 100});
    row("14/2 heads of 64 (7 rows), 777 keys", {.heads = 14, .kv_heads = 2, .dim = 64, .lengths = {777}});
    row("16/1 heads of 128 (two groups of 8), 1200 keys", {.heads = 16, .kv_heads = 1, .lengths = {1200}});
    row("10/1 heads of 96 (two groups of 5), 530 keys", {.heads = 10, .kv_heads = 1, .dim = 96, .lengths = {530}});
    row("3/3 heads of 80 (one row, column tail), 1100 keys", {.heads = 3, .kv_heads = 3, .dim = 80, .lengths = {1100}});
    row("8/2 heads of 80 (four rows, column tail), 90 keys", {.heads = 8, .kv_heads = 2, .dim = 80, .lengths = {90}});
    row("8/2 heads of 64, sinks, 2500 keys (split)",
        {.heads = 8, .kv_heads = 2, .dim = 64, .lengths = {2500}, .has_sinks = true});
    row("8/2 heads of 64, window 33, sinks",
        {.heads = 8, .kv_heads = 2, .dim = 64, .lengths = {700}, .window = 33, .has_sinks = true});
    row("batch of 5 sequences", {.lengths = {1, 47, 300, 1029, 64}});
    row("Q8_0 keys and values, 2100 keys", {.lengths = {2100}, .k_type = GgmlType::Q8_0, .v_type = GgmlType::Q8_0});
    row("Q8_0 keys, Q4_0 values", {.lengths = {900}, .k_type = GgmlType::Q8_0, .v_type = GgmlType::Q4_0});
    // Q8_0 and Q4_0 rows read in place (AVX-512): a column tail of 16 that starts mid-block.
    row("Q8_0 keys and values, 8/2 heads of 96, 333 keys",
        {.heads = 8, .kv_heads = 2, .dim = 96, .lengths = {333}, .k_type = GgmlType::Q8_0, .v_type = GgmlType::Q8_0});
    row("Q4_0 keys and values, 8/2 heads of 96, 333 keys",
        {.heads = 8, .kv_heads = 2, .dim = 96, .lengths = {333}, .k_type = GgmlType::Q4_0, .v_type = GgmlType::Q4_0});
    row("Q4_0 keys, Q8_0 values, 1500 keys (split)",
        {.lengths = {1500}, .k_type = GgmlType::Q4_0, .v_type = GgmlType::Q8_0});
    row("Q5_1 keys, F16 values, heads of 64",
        {.heads = 8, .kv_heads = 2, .dim = 64, .lengths = {333}, .k_type = GgmlType::Q5_1});
    row("F8_E4M3 keys and values", {.lengths = {640}, .k_type = GgmlType::F8_E4M3, .v_type = GgmlType::F8_E4M3});
  }
  void matchesReference() {
    QFETCH(Case, c);
    std::mt19937 rng(static_cast<uint32_t>(c.heads * 131 + c.dim + c.lengths.back()));
    Setup s;
    make_setup(c, rng, s);
    if (QTest::currentTestFailed()) return;
    std::vector<float> ref(s.q.size() / c.dim * c.dim, NAN);
    s.args.output = ref.data();
    QVERIFY(paged_attention_ref(s.args));
    for (int threads : {1, 2, 3}) {
      std::vector<float> fast(ref.size(), NAN);
      s.args.output = fast.data();
      s.args.num_threads = threads;
      QVERIFY(detail::paged_attention_decode(s.args));
      QVERIFY2(std::all_of(fast.begin(), fast.end(), [](float x) { return std::isfinite(x); }),
               qPrintable(QStringLiteral("threads %1: an output not written or not finite").arg(threads)));
      const double err = max_relative_error(fast, ref);
      QVERIFY2(err < 2e-5, qPrintable(QStringLiteral("threads %1: %2").arg(threads).arg(err)));
    }
  }

  // Two positions in a row of one sequence (a prompt, or a speculative draft being verified) go
  // to the tiled kernel, which shares each key tile among them; paged_attention still answers.
  void runsOfPositionsAreDeclined() {
    std::mt19937 rng(5);
    Case c;
    c.lengths = {40, 90};
    Setup s;
    make_setup(c, rng, s);
    s.token_sequences = {0, 1, 1};
    s.positions = {39, 88, 89};
    s.q = random_floats(static_cast<size_t>(3 * c.heads * c.dim), rng, 1.5f);
    s.args.q = s.q.data();
    s.args.token_sequences = s.token_sequences.data();
    s.args.positions = s.positions.data();
    s.args.num_tokens = 3;
    std::vector<float> out(s.q.size(), NAN), ref(s.q.size(), NAN);
    s.args.output = out.data();
    QVERIFY(!detail::paged_attention_decode(s.args));
    QVERIFY(std::all_of(out.begin(), out.end(), [](float x) { return std::isnan(x); }));  // nothing written
    // So is a decode batch that must not depend on its company (batch-invariant mode).
    PagedAttentionArgs alone = s.args;
    alone.num_tokens = 1;
    QVERIFY(detail::paged_attention_decode(alone));
    alone.is_batch_invariant = true;
    QVERIFY(!detail::paged_attention_decode(alone));
    std::fill(out.begin(), out.end(), NAN);
    QVERIFY(paged_attention(s.args));
    s.args.output = ref.data();
    QVERIFY(paged_attention_ref(s.args));
    QVERIFY(max_relative_error(out, ref) < 1e-5);
  }
};

QTEST_GUILESS_MAIN(TestAttentionDecode)
#include "test_attention_decode.moc"
