// The 8-bit (Q8_0) paged KV cache: the write stores exactly ggml's Q8_0 blocks of each slot's
// row; the fast attention matches its double reference; both stay close to attention over the
// f16 cache of the same keys and values (8-bit rounding); shapes it cannot hold are refused.
#include "iwb/kernels/dequantize.h"
#include "iwb/kernels/paged_attention.h"
#include "iwb/kernels/quant_blocks.h"
#include "iwb/kernels/quantize.h"
#include "random_tensors.h"

#include <QtTest>

#include <cmath>
#include <cstring>
#include <random>

using namespace iwb;
using namespace iwb::test;

namespace {

constexpr int64_t kHeads = 6, kKvHeads = 2, kDim = 64, kDimV = 96, kBlock = 16, kPoolBlocks = 9;
constexpr int64_t kRowK = kKvHeads * kDim, kRowV = kKvHeads * kDimV;

struct Cache {
  std::vector<uint16_t> k, v;
};

// Writes the same keys and values of two sequences (37 and 45 positions) into `type` pools.
Cache write_cache(GgmlType type, const std::vector<float>& k, const std::vector<float>& v,
                  const std::vector<int64_t>& slot_ids) {
  Cache c;
  c.k.assign(static_cast<size_t>(kPoolBlocks * kBlock * kv_row_units(type, kRowK)), 0);
  c.v.assign(static_cast<size_t>(kPoolBlocks * kBlock * kv_row_units(type, kRowV)), 0);
  WriteKvPagedArgs w;
  w.k = k.data();
  w.v = v.data();
  w.slot_mapping = slot_ids.data();
  w.num_tokens = static_cast<int64_t>(slot_ids.size());
  w.k_cache = c.k.data();
  w.v_cache = c.v.data();
  w.num_slots = kPoolBlocks * kBlock;
  w.k_row = kRowK;
  w.v_row = kRowV;
  w.kv_type = type;
  if (!write_kv_paged(w)) c.k.clear();
  return c;
}

double max_relative(const std::vector<float>& a, const std::vector<float>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    num = std::max(num, std::abs(static_cast<double>(a[i]) - b[i]));
    den = std::max(den, std::abs(static_cast<double>(b[i])));
  }
  return num / den;
}

}  // namespace

class TestPagedAttentionQ8 : public QObject {
  Q_OBJECT

 private slots:
  void matchesReferenceAndF16() {
    std::mt19937 rng(23);
    const std::vector<int32_t> lengths = {37, 45};
    const std::vector<int32_t> tables = {4, 0, 7, 2, 8, 5};  // [2 x 3]
    std::vector<int64_t> slot_ids;
    for (int s = 0; s < 2; ++s) {
      for (int32_t p = 0; p < lengths[s]; ++p) slot_ids.push_back(tables[s * 3 + p / kBlock] * kBlock + p % kBlock);
    }
    const auto n = static_cast<int64_t>(slot_ids.size());
    const std::vector<float> k = random_floats(static_cast<size_t>(n * kRowK), rng);
    const std::vector<float> v = random_floats(static_cast<size_t>(n * kRowV), rng);
    const Cache f16 = write_cache(GgmlType::F16, k, v, slot_ids);
    const Cache q8 = write_cache(GgmlType::Q8_0, k, v, slot_ids);
    QVERIFY(!f16.k.empty() && !q8.k.empty());

    // Every written slot holds ggml's Q8_0 blocks of its row.
    std::vector<BlockQ8_0> expected(static_cast<size_t>(kRowK / 32));
    for (int64_t t = 0; t < n; t += 7) {
      QVERIFY(quantize_row_q8_0_ref(k.data() + t * kRowK, expected.data(), kRowK));
      QCOMPARE(std::memcmp(q8.k.data() + slot_ids[static_cast<size_t>(t)] * kv_row_units(GgmlType::Q8_0, kRowK),
                           expected.data(), expected.size() * sizeof(BlockQ8_0)),
               0);
    }

    // Queries: the last 5 positions of sequence 0 and 9 of sequence 1 (odd counts, a prefill chunk).
    std::vector<int32_t> token_sequences, positions;
    for (int32_t p = 32; p < 37; ++p) token_sequences.push_back(0), positions.push_back(p);
    for (int32_t p = 36; p < 45; ++p) token_sequences.push_back(1), positions.push_back(p);
    const auto num_tokens = static_cast<int64_t>(positions.size());
    const std::vector<float> q = random_floats(static_cast<size_t>(num_tokens * kHeads * kDim), rng);
    auto run = [&](const Cache& c, GgmlType type, bool is_reference, int64_t window) {
      std::vector<float> out(static_cast<size_t>(num_tokens * kHeads * kDimV), -1.0f);
      PagedAttentionArgs a;
      a.q = q.data();
      a.k_cache = c.k.data();
      a.v_cache = c.v.data();
      a.num_blocks = kPoolBlocks;
      a.block_size = kBlock;
      a.block_tables = tables.data();
      a.max_blocks_per_sequence = 3;
      a.sequence_lengths = lengths.data();
      a.num_sequences = 2;
      a.token_sequences = token_sequences.data();
      a.positions = positions.data();
      a.num_tokens = num_tokens;
      a.num_heads = kHeads;
      a.num_kv_heads = kKvHeads;
      a.head_dim = kDim;
      a.head_dim_v = kDimV;
      a.scale = 1.0f / 8.0f;
      a.sliding_window = window;
      a.output = out.data();
      a.num_threads = 2;
      a.kv_type = type;
      const bool ok = is_reference ? paged_attention_ref(a) : paged_attention(a);
      return ok ? out : std::vector<float>{};
    };
    for (const int64_t window : {int64_t{0}, int64_t{11}}) {
      const std::vector<float> q8_ref = run(q8, GgmlType::Q8_0, true, window);
      const std::vector<float> q8_fast = run(q8, GgmlType::Q8_0, false, window);
      const std::vector<float> f16_ref = run(f16, GgmlType::F16, true, window);
      QVERIFY(!q8_ref.empty() && !q8_fast.empty() && !f16_ref.empty());
      QVERIFY2(max_relative(q8_fast, q8_ref) < 1e-5, qPrintable(QString::number(max_relative(q8_fast, q8_ref))));
      // 8-bit keys and values: about 0.4% relative error per value, a few times that at most.
      const double vs_f16 = max_relative(q8_ref, f16_ref);
      QVERIFY2(vs_f16 > 0 && vs_f16 < 3e-2, qPrintable(QString::number(vs_f16)));
    }
  }

  void refusesWhatItCannotHold() {
    QCOMPARE(kv_row_units(GgmlType::Q8_0, 64), int64_t{34});
    QCOMPARE(kv_row_units(GgmlType::Q8_0, 48), int64_t{0});
    QCOMPARE(kv_row_units(GgmlType::F16, 48), int64_t{48});
    QCOMPARE(kv_row_units(GgmlType::Q4_0, 64), int64_t{0});
    // A key with no Q8_0 form is refused before anything is written.
    std::vector<float> k(static_cast<size_t>(kRowK), 1.0f), v(static_cast<size_t>(kRowV), 1.0f);
    k[5] = INFINITY;
    std::vector<int64_t> slot = {3};
    const Cache c = write_cache(GgmlType::Q8_0, k, v, slot);
    QVERIFY(c.k.empty());
  }
};

QTEST_GUILESS_MAIN(TestPagedAttentionQ8)
#include "test_paged_attention_q8.moc"
