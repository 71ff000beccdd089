// The paged KV storage's FP8 scales (vLLM's --calculate-kv-scales): a layer's first write sets
// its scales from the tokens it writes (padding left out), later writes keep them, the other
// layers wait for their own first write, the stored bytes are e4m3(x / scale), and without
// calculate_scales (or for a side that is not FP8) the scale stays vLLM's default of 1.
#include "iwb/engine/paged/paged_kv_storage.h"
#include "iwb/kernels/paged_attention.h"

#include <QTest>

#include <cmath>
#include <random>
#include <vector>

using namespace iwb;

namespace {

constexpr int64_t kLayers = 2, kKvHeads = 2, kHeadDim = 32, kRow = kKvHeads * kHeadDim, kBlock = 4;

std::vector<float> random_rows(int64_t n, float stddev, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, stddev);
  std::vector<float> x(static_cast<size_t>(n * kRow));
  for (float& v : x) v = normal(rng);
  return x;
}

float max_abs(const float* x, int64_t n) {
  float m = 0.0f;
  for (int64_t i = 0; i < n; ++i) m = std::max(m, std::fabs(x[i]));
  return m;
}

}  // namespace

class TestPagedKvScales : public QObject {
  Q_OBJECT

 private slots:
  void firstWriteOfEachLayerSetsItsScales() {
    KvCacheTypes types(GgmlType::F8_E4M3, GgmlType::Q8_0);
    types.calculate_scales = true;
    Result<std::unique_ptr<PagedKvStorage>> made =
        PagedKvStorage::create({kLayers, kKvHeads, kHeadDim, kHeadDim}, kBlock, 4, types);
    QVERIFY(made.is_ok());
    PagedKvStorage& kv = **made;
    QCOMPARE(kv.k_scale(0), 1.0f);
    QVERIFY(!kv.is_layer_calibrated(0));

    std::vector<float> k = random_rows(3, 40.0f, 1), v = random_rows(3, 2.0f, 2);
    k[static_cast<size_t>(2 * kRow + 7)] = 5000.0f;  // in the padding row: not counted
    const std::vector<int64_t> slot_ids = {5, 2, -1};
    QVERIFY(kv.write(0, slot_ids, k.data(), v.data()).is_ok());
    QVERIFY(kv.is_layer_calibrated(0) && !kv.is_layer_calibrated(1));
    const float k_scale = max_abs(k.data(), 2 * kRow) / 200.0f;
    QCOMPARE(kv.k_scale(0), k_scale);
    QCOMPARE(kv.v_scale(0), 1.0f);                                             // q8_0 values have no scale
    QCOMPARE(kv.k_scale(1), 1.0f);                                             // layer 1 has not written yet
    const auto* bytes = reinterpret_cast<const uint8_t*>(kv.k_slot(0, 1, 1));  // slot 5
    for (int64_t i = 0; i < kRow; ++i) QCOMPARE(int(bytes[i]), int(f32_to_e4m3(k[static_cast<size_t>(i)] / k_scale)));

    // Later writes keep the layer's scales, even with larger keys.
    std::vector<float> k2 = random_rows(1, 400.0f, 3), v2 = random_rows(1, 2.0f, 4);
    QVERIFY(kv.write(0, std::vector<int64_t>{7}, k2.data(), v2.data()).is_ok());
    QCOMPARE(kv.k_scale(0), k_scale);
    QVERIFY(kv.write(1, std::vector<int64_t>{7}, k2.data(), v2.data()).is_ok());
    QCOMPARE(kv.k_scale(1), max_abs(k2.data(), kRow) / 200.0f);
  }

  void withoutCalculationTheScaleIsOne() {
    Result<std::unique_ptr<PagedKvStorage>> made =
        PagedKvStorage::create({kLayers, kKvHeads, kHeadDim, kHeadDim}, kBlock, 4, KvCacheTypes(GgmlType::F8_E4M3));
    QVERIFY(made.is_ok());
    std::vector<float> k = random_rows(1, 40.0f, 5), v = random_rows(1, 2.0f, 6);
    QVERIFY((*made)->write(0, std::vector<int64_t>{0}, k.data(), v.data()).is_ok());
    QCOMPARE((*made)->k_scale(0), 1.0f);
    QCOMPARE((*made)->v_scale(0), 1.0f);
    QVERIFY(!(*made)->is_layer_calibrated(0));
  }
};

QTEST_APPLESS_MAIN(TestPagedKvScales)
#include "test_paged_kv_scales.moc"
