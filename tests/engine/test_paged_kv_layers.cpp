// The paged KV storage with a shape per layer (KvCacheShape::layers, Gemma 4's sliding layers of
// two KV heads of 64 and global layers of one of 128): kv_cache_shape reads each layer's heads
// from the config, a block's bytes are the sum of the layers', and each layer's pool holds rows
// of its own width: what is written to a layer comes back through paged attention with that
// layer's heads (f16 and Q8_0 caches), untouched by writes to the other layers, and a
// copy-on-write copy carries every layer.
#include "iwb/engine/paged/paged_kv_storage.h"
#include "iwb/engine/synth/synth_preset.h"
#include "iwb/kernels/dequantize.h"
#include "iwb/kernels/paged_attention.h"

#include <QTest>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

using namespace iwb;

namespace {

constexpr int32_t kBlockSize = 4;
constexpr int64_t kPositions = 6;  // two blocks: 0..3 in the first, 4..5 in the second

KvCacheShape gemma4_shape() { return kv_cache_shape(synth::shape_config(*synth::find_synth_preset("test-gemma4"))); }

// Layers whose rows differ in width too (Gemma 4's have 128 values per side in every layer).
KvCacheShape uneven_shape() {
  KvCacheShape s{3, 2, 64, 64};
  s.layers = {{2, 64, 64}, {1, 256, 256}, {8, 32, 32}};
  return s;
}

struct LayerRows {
  std::vector<float> k, v;  // [kPositions][k_row], [kPositions][v_row]
};

LayerRows random_rows(const KvLayerShape& l, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  LayerRows r;
  r.k.resize(static_cast<size_t>(kPositions * l.num_kv_heads * l.head_dim_k));
  r.v.resize(static_cast<size_t>(kPositions * l.num_kv_heads * l.head_dim_v));
  for (float& x : r.k) x = normal(rng);
  for (float& x : r.v) x = normal(rng);
  return r;
}

// Attention of one query per head at the last position over the rows as written, in double:
// what the cache must give back, [num_heads][head_dim_v].
std::vector<float> expected_attention(const KvLayerShape& l, int64_t num_heads, const std::vector<float>& q,
                                      const LayerRows& r) {
  const int64_t hk = l.head_dim_k, hv = l.head_dim_v, group = num_heads / l.num_kv_heads;
  std::vector<float> out(static_cast<size_t>(num_heads * hv));
  for (int64_t h = 0; h < num_heads; ++h) {
    const int64_t g = h / group;
    std::vector<double> s(kPositions);
    for (int64_t j = 0; j < kPositions; ++j) {
      double dot = 0;
      for (int64_t i = 0; i < hk; ++i) dot += double(q[h * hk + i]) * r.k[(j * l.num_kv_heads + g) * hk + i];
      s[j] = dot / std::sqrt(double(hk));
    }
    const double mx = *std::max_element(s.begin(), s.end());
    double sum = 0;
    for (double& e : s) sum += (e = std::exp(e - mx));
    for (int64_t i = 0; i < hv; ++i) {
      double acc = 0;
      for (int64_t j = 0; j < kPositions; ++j) acc += s[j] / sum * r.v[(j * l.num_kv_heads + g) * hv + i];
      out[h * hv + i] = static_cast<float>(acc);
    }
  }
  return out;
}

// The cache's attention of layer `il` for one query at the last position of a sequence whose
// blocks are `blocks`.
std::vector<float> cache_attention(const PagedKvStorage& kv, int64_t il, int64_t num_heads, const std::vector<float>& q,
                                   const std::vector<int32_t>& blocks) {
  const KvLayerShape l = kv.shape().layer(il);
  std::vector<float> out(static_cast<size_t>(num_heads * l.head_dim_v), NAN);
  const int32_t length = kPositions, sequence = 0, position = kPositions - 1;
  PagedAttentionArgs a;
  a.q = q.data();
  a.k_cache = kv.k_data(il);
  a.v_cache = kv.v_data(il);
  a.num_blocks = kv.num_blocks();
  a.block_size = kv.block_size();
  a.block_tables = blocks.data();
  a.max_blocks_per_sequence = static_cast<int64_t>(blocks.size());
  a.sequence_lengths = &length;
  a.num_sequences = 1;
  a.token_sequences = &sequence;
  a.positions = &position;
  a.num_tokens = 1;
  a.num_heads = num_heads;
  a.num_kv_heads = l.num_kv_heads;
  a.head_dim = l.head_dim_k;
  a.head_dim_v = l.head_dim_v;
  a.scale = 1.0f / std::sqrt(static_cast<float>(l.head_dim_k));
  a.output = out.data();
  a.num_threads = 1;
  a.k_type = kv.types().k;
  a.v_type = kv.types().v;
  if (!paged_attention_ref(a)) out.clear();
  return out;
}

double max_abs_difference(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return INFINITY;
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::fabs(double(a[i]) - b[i]));
  return worst;
}

}  // namespace

class TestPagedKvLayers : public QObject {
  Q_OBJECT

 private slots:
  void theShapeFollowsEachLayer() {
    const ModelConfig c = synth::shape_config(*synth::find_synth_preset("test-gemma4"));
    const KvCacheShape s = kv_cache_shape(c);
    QCOMPARE(s.num_layers, c.num_layers);
    QCOMPARE(static_cast<int64_t>(s.layers.size()), c.num_layers);
    for (int64_t il = 0; il < c.num_layers; ++il) {
      const KvLayerShape want = c.is_sliding(il) ? KvLayerShape{2, 64, 64} : KvLayerShape{1, 128, 128};
      QCOMPARE(s.layer(il), want);
    }
    // A model whose layers are alike keeps one shape for all.
    QVERIFY(kv_cache_shape(synth::shape_config(*synth::find_synth_preset("test-gemma3"))).layers.empty());
  }

  void aBlocksBytesAreTheSumOfItsLayers_data() {
    QTest::addColumn<bool>("isUneven");
    QTest::newRow("test-gemma4") << false;
    QTest::newRow("uneven") << true;
  }
  void aBlocksBytesAreTheSumOfItsLayers() {
    QFETCH(bool, isUneven);
    const KvCacheShape s = isUneven ? uneven_shape() : gemma4_shape();
    uint64_t f16 = 0, q8 = 0;
    for (int64_t il = 0; il < s.num_layers; ++il) {
      const KvLayerShape l = s.layer(il);
      const uint64_t values = static_cast<uint64_t>(l.num_kv_heads * (l.head_dim_k + l.head_dim_v));
      f16 += kBlockSize * 2 * values;
      q8 += kBlockSize * values / 32 * 34;
    }
    QCOMPARE(PagedKvStorage::bytes_per_block(s, kBlockSize), f16);
    QCOMPARE(PagedKvStorage::bytes_per_block(s, kBlockSize, GgmlType::Q8_0), q8);
    auto blocks = PagedKvStorage::num_blocks_for_budget(s, kBlockSize, 3 * f16 + 1);
    QVERIFY(blocks.is_ok());
    QCOMPARE(*blocks, int64_t{3});
    auto created = PagedKvStorage::create(s, kBlockSize, 3);
    QVERIFY(created.is_ok());
    QCOMPARE((*created)->num_bytes(), 3 * f16);
  }

  void eachLayerHoldsRowsOfItsOwnWidth_data() {
    QTest::addColumn<int>("type");
    QTest::addColumn<bool>("isUneven");
    for (const bool uneven : {false, true}) {
      QTest::newRow(uneven ? "uneven f16" : "test-gemma4 f16") << int(GgmlType::F16) << uneven;
      QTest::newRow(uneven ? "uneven q8_0" : "test-gemma4 q8_0") << int(GgmlType::Q8_0) << uneven;
    }
  }
  void eachLayerHoldsRowsOfItsOwnWidth() {
    QFETCH(int, type);
    QFETCH(bool, isUneven);
    const KvCacheTypes types(static_cast<GgmlType>(type));
    const KvCacheShape s = isUneven ? uneven_shape() : gemma4_shape();
    const int64_t num_heads = 8;
    auto created = PagedKvStorage::create(s, kBlockSize, 5, types);
    QVERIFY2(created.is_ok(), created.error_message().c_str());
    PagedKvStorage& kv = **created;
    // Every layer's rows into blocks 3 then 1 (slots 12..15, 4..5).
    const std::vector<int32_t> blocks = {3, 1};
    const std::vector<int64_t> slot_ids = {12, 13, 14, 15, 4, 5};
    std::vector<LayerRows> rows;
    for (int64_t il = 0; il < s.num_layers; ++il) {
      const KvLayerShape l = s.layer(il);
      QCOMPARE(kv.k_row(il), l.num_kv_heads * l.head_dim_k);
      QCOMPARE(kv.v_row(il), l.num_kv_heads * l.head_dim_v);
      QCOMPARE(kv.k_units(il), kv_row_units(types.k, kv.k_row(il)));
      rows.push_back(random_rows(l, 100 + static_cast<uint32_t>(il)));
      QVERIFY(kv.write(il, slot_ids, rows.back().k.data(), rows.back().v.data()).is_ok());
    }
    if (types.is_f16()) {  // the f16 rows as they are, at the slot of their own layer's width
      for (int64_t il = 0; il < s.num_layers; ++il) {
        for (int64_t i = 0; i < kv.k_row(il); ++i) {
          QCOMPARE(kv.k_slot(il, 1, 1)[i], f32_to_fp16(rows[il].k[5 * kv.k_row(il) + i]));
        }
      }
    }
    // The query of every layer through its own heads; then the blocks copied to 0 and 2.
    const double tolerance = types.is_f16() ? 2e-3 : 5e-2;
    std::mt19937 rng(7);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    QVERIFY(kv.copy_block(3, 0).is_ok());
    QVERIFY(kv.copy_block(1, 2).is_ok());
    for (int64_t il = 0; il < s.num_layers; ++il) {
      const KvLayerShape l = s.layer(il);
      std::vector<float> q(static_cast<size_t>(num_heads * l.head_dim_k));
      for (float& x : q) x = normal(rng);
      const std::vector<float> want = expected_attention(l, num_heads, q, rows[il]);
      const double err = max_abs_difference(cache_attention(kv, il, num_heads, q, blocks), want);
      const double copied = max_abs_difference(cache_attention(kv, il, num_heads, q, {0, 2}), want);
      qInfo("layer %lld (%lld x %lld): attention %g from the written rows, %g from the copies", (long long)il,
            (long long)l.num_kv_heads, (long long)l.head_dim_k, err, copied);
      QVERIFY2(err < tolerance, qPrintable(QString("layer %1: %2").arg(il).arg(err)));
      QVERIFY2(copied < tolerance, qPrintable(QString("layer %1 copied: %2").arg(il).arg(copied)));
    }
  }
};

QTEST_APPLESS_MAIN(TestPagedKvLayers)
#include "test_paged_kv_layers.moc"
