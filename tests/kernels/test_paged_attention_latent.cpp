// Latent attention's cache layout (deepseek2): the values are each key row's first head_dim_v
// values, read through PagedAttentionArgs::v_row_units from the key pool, and written with
// WriteKvPagedArgs::has_values false. On every path (one query: decode; many: the tiled kernel,
// on AMX tiles where the CPU has them) and cache type, the output equals bit for bit that of a
// separate value pool holding the same rows, and the reference agrees; inconsistent layouts
// are refused. Run once per CPU path.
#include "random_tensors.h"

#include "iwb/kernels/paged_attention.h"

#include <QTest>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <utility>
#include <vector>

using namespace iwb;

namespace {

constexpr int64_t kHeads = 4, kDimK = 192, kDimV = 128, kBlock = 16, kBlocks = 12;
constexpr int64_t kSlots = kBlocks * kBlock;

// Three sequences in permuted blocks: one decoding (1 query), one prompt (all 50), one chunk (5).
struct Layout {
  std::vector<int32_t> tables, lengths, token_sequences, positions;
  int64_t max_blocks = 5;
};

Layout make_layout(std::mt19937& rng) {
  Layout l;
  std::vector<int32_t> pool(kBlocks);
  std::iota(pool.begin(), pool.end(), 0);
  std::shuffle(pool.begin(), pool.end(), rng);
  const int32_t lengths[] = {37, 50, 20}, queries[] = {1, 50, 5};
  size_t next = 0;
  l.tables.assign(3 * static_cast<size_t>(l.max_blocks), -1);
  for (int s = 0; s < 3; ++s) {
    for (int64_t b = 0; b < (lengths[s] + kBlock - 1) / kBlock; ++b) l.tables[s * l.max_blocks + b] = pool[next++];
    l.lengths.push_back(lengths[s]);
    for (int32_t p = lengths[s] - queries[s]; p < lengths[s]; ++p) {
      l.token_sequences.push_back(s);
      l.positions.push_back(p);
    }
  }
  return l;
}

PagedAttentionArgs args_of(const Layout& l, const std::vector<float>& q, GgmlType type, float* out) {
  PagedAttentionArgs a;
  a.q = q.data();
  a.num_blocks = kBlocks;
  a.block_size = kBlock;
  a.block_tables = l.tables.data();
  a.max_blocks_per_sequence = l.max_blocks;
  a.sequence_lengths = l.lengths.data();
  a.num_sequences = 3;
  a.token_sequences = l.token_sequences.data();
  a.positions = l.positions.data();
  a.num_tokens = static_cast<int64_t>(l.positions.size());
  a.num_heads = kHeads;
  a.num_kv_heads = 1;
  a.head_dim = kDimK;
  a.head_dim_v = kDimV;
  a.scale = 1.0f / std::sqrt(static_cast<float>(kDimK));
  a.output = out;
  a.num_threads = 2;
  a.k_type = a.v_type = type;
  return a;
}

}  // namespace

class TestPagedAttentionLatent : public QObject {
  Q_OBJECT

 private slots:
  void valuesInKeyRowsEqualSeparateValues_data() {
    QTest::addColumn<int>("type_id");
    const std::pair<const char*, GgmlType> types[] = {
        {"f16", GgmlType::F16}, {"q8_0", GgmlType::Q8_0}, {"q4_0", GgmlType::Q4_0}, {"fp8_e4m3", GgmlType::F8_E4M3}};
    for (const auto& [name, t] : types) QTest::newRow(name) << static_cast<int>(t);
  }
  void valuesInKeyRowsEqualSeparateValues() {
    QFETCH(int, type_id);
    const auto type = static_cast<GgmlType>(type_id);
    std::mt19937 rng(static_cast<uint32_t>(41 + type_id));
    const Layout layout = make_layout(rng);
    const std::vector<float> keys = iwb::test::random_floats(static_cast<size_t>(kSlots * kDimK), rng, 1.0f);
    std::vector<float> values;  // each key row's first kDimV values
    for (int64_t s = 0; s < kSlots; ++s)
      values.insert(values.end(), keys.begin() + s * kDimK, keys.begin() + s * kDimK + kDimV);
    std::vector<int64_t> slot_ids(kSlots);
    std::iota(slot_ids.begin(), slot_ids.end(), 0);
    const int64_t k_units = kv_row_units(type, kDimK), v_units = kv_row_units(type, kDimV);
    std::vector<uint16_t> shared(static_cast<size_t>(kSlots * k_units)), k_apart(shared.size()),
        v_apart(static_cast<size_t>(kSlots * v_units));
    WriteKvPagedArgs w;
    w.k = keys.data();
    w.v = values.data();
    w.slot_mapping = slot_ids.data();
    w.num_tokens = kSlots;
    w.k_cache = k_apart.data();
    w.v_cache = v_apart.data();
    w.num_slots = kSlots;
    w.k_row = kDimK;
    w.v_row = kDimV;
    w.k_type = w.v_type = type;
    QVERIFY(write_kv_paged(w));
    w.k_cache = shared.data();
    w.v = nullptr;
    w.v_cache = nullptr;
    w.has_values = false;
    QVERIFY(write_kv_paged(w));
    QVERIFY(shared == k_apart);  // the keys as written with their values apart

    const std::vector<float> q =
        iwb::test::random_floats(static_cast<size_t>(layout.positions.size() * kHeads * kDimK), rng, 1.0f);
    const size_t out_size = layout.positions.size() * kHeads * kDimV;
    std::vector<float> apart(out_size, NAN), inside(out_size, NAN), ref_apart(out_size, NAN), ref_inside(out_size, NAN);
    PagedAttentionArgs a = args_of(layout, q, type, apart.data());
    a.k_cache = k_apart.data();
    a.v_cache = v_apart.data();
    QVERIFY(paged_attention(a));
    a.output = ref_apart.data();
    QVERIFY(paged_attention_ref(a));
    PagedAttentionArgs b = args_of(layout, q, type, inside.data());
    b.k_cache = shared.data();
    b.v_cache = shared.data();
    b.v_row_units = k_units;
    QCOMPARE(paged_v_row_units(b), k_units);
    QVERIFY(paged_attention(b));
    b.output = ref_inside.data();
    QVERIFY(paged_attention_ref(b));
    for (size_t i = 0; i < out_size; ++i) {
      if (inside[i] != apart[i] || ref_inside[i] != ref_apart[i]) {
        QFAIL(qPrintable(QString("element %1: %2 (reference %3) against %4 (reference %5)")
                             .arg(i)
                             .arg(inside[i])
                             .arg(ref_inside[i])
                             .arg(apart[i])
                             .arg(ref_apart[i])));
      }
    }
    // The fast path against the reference, as for any cache (the tolerance of the f16 sums).
    double worst = 0, largest = 0;
    for (size_t i = 0; i < out_size; ++i) {
      worst = std::max(worst, std::abs(static_cast<double>(inside[i]) - ref_inside[i]));
      largest = std::max(largest, std::abs(static_cast<double>(ref_inside[i])));
    }
    QVERIFY2(worst <= 2e-2 * largest, qPrintable(QString("%1 of %2").arg(worst).arg(largest)));
  }

  // Values inside key rows need one KV head and rows that hold them; nothing is written otherwise.
  void inconsistentLayoutsAreRefused() {
    std::mt19937 rng(5);
    const Layout layout = make_layout(rng);
    std::vector<uint16_t> cache(static_cast<size_t>(kSlots * kDimK), 0);
    const std::vector<float> q =
        iwb::test::random_floats(static_cast<size_t>(layout.positions.size() * kHeads * kDimK), rng, 1.0f);
    std::vector<float> out(layout.positions.size() * kHeads * kDimV, NAN);
    PagedAttentionArgs a = args_of(layout, q, GgmlType::F16, out.data());
    a.k_cache = a.v_cache = cache.data();
    a.v_row_units = kDimV - 1;  // shorter than a value row
    QVERIFY(!paged_attention(a));
    a.v_row_units = -1;
    QVERIFY(!paged_attention(a));
    a.v_row_units = kDimK;
    a.num_heads = 4;
    a.num_kv_heads = 2;  // values of head 1 would not be where this layout reads them
    QVERIFY(!paged_attention(a));
    for (float v : out) QVERIFY(std::isnan(v));
  }
};

QTEST_APPLESS_MAIN(TestPagedAttentionLatent)
#include "test_paged_attention_latent.moc"
