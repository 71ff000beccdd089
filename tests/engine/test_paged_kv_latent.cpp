// The paged KV storage for latent attention (KvCacheShape::is_value_in_key): where the types allow
// (one KV head, the same type on both sides, the same Hadamard pieces) it keeps keys only, the
// value rows being the key rows' first values: the bytes per block drop by the value pool, a
// slot's value pointer is its key row, writes store the keys once, copies carry both, and an
// FP8 side's value scale is the key scale. Otherwise it stores values apart as before.
#include "iwb/engine/paged/paged_kv_storage.h"
#include "iwb/kernels/dequantize.h"
#include "iwb/kernels/paged_attention.h"

#include <QTest>

#include <random>
#include <vector>

using namespace iwb;

namespace {

// DeepSeek-V2-Lite's cache head: the latent 512 and 64 roped values; the value is the latent.
KvCacheShape latent_shape(int64_t layers = 2) { return KvCacheShape{layers, 1, 576, 512, true}; }

}  // namespace

class TestPagedKvLatent : public QObject {
  Q_OBJECT

 private slots:
  void sharesWhereTheTypesAllow() {
    const KvCacheShape s = latent_shape();
    QVERIFY(PagedKvStorage::shares_values(s, {GgmlType::F16, GgmlType::F16}));
    QVERIFY(PagedKvStorage::shares_values(s, {GgmlType::Q8_0, GgmlType::Q8_0}));
    QVERIFY(PagedKvStorage::shares_values(s, {GgmlType::F8_E4M3, GgmlType::F8_E4M3}));
    QVERIFY(!PagedKvStorage::shares_values(s, {GgmlType::Q8_0, GgmlType::F16}));  // -ctk q8_0 -ctv f16
    KvCacheShape apart = s;
    apart.is_value_in_key = false;
    QVERIFY(!PagedKvStorage::shares_values(apart, {GgmlType::F16, GgmlType::F16}));
    KvCacheShape two_heads = s;
    two_heads.num_kv_heads = 2;
    QVERIFY(!PagedKvStorage::shares_values(two_heads, {GgmlType::F16, GgmlType::F16}));
    // Keys of 160 rotate in pieces of 32, values of 128 in 64: the stored rows would differ.
    const KvCacheShape small{2, 1, 160, 128, true};
    QVERIFY(PagedKvStorage::shares_values(small, {GgmlType::F16, GgmlType::F16}));
    QVERIFY(!PagedKvStorage::shares_values(small, {GgmlType::Q8_0, GgmlType::Q8_0}));

    // 576 f16 values per layer and position instead of 1,088.
    QCOMPARE(PagedKvStorage::bytes_per_block(s, 16, {}), uint64_t{2 * 16 * 2 * 576});
    QCOMPARE(PagedKvStorage::bytes_per_block(apart, 16, {}), uint64_t{2 * 16 * 2 * (576 + 512)});
  }

  void valuesAreTheKeyRowsFirstValues() {
    auto created = PagedKvStorage::create(latent_shape(), 4, 3);
    QVERIFY(created.is_ok());
    PagedKvStorage& kv = **created;
    QVERIFY(kv.shares_values());
    QCOMPARE(kv.v_units(0), kv.k_units(0));
    QCOMPARE(kv.num_bytes(), uint64_t{3 * 2 * 4 * 2 * 576});
    for (int64_t layer = 0; layer < 2; ++layer) QCOMPARE(kv.v_data(layer), kv.k_data(layer));
    std::mt19937 rng(9);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::vector<float> k(2 * 576);
    for (float& x : k) x = normal(rng);
    const std::vector<int64_t> slot_ids = {5, 2};  // block 1 offset 1, block 0 offset 2
    QVERIFY(kv.write(1, slot_ids, k.data(), nullptr).is_ok());
    QCOMPARE(kv.v_slot(1, 1, 1), kv.k_slot(1, 1, 1));
    for (int64_t i = 0; i < 576; ++i) QCOMPARE(kv.k_slot(1, 1, 1)[i], f32_to_fp16(k[static_cast<size_t>(i)]));
    // A copy-on-write copy carries keys and so values.
    QVERIFY(kv.copy_block(1, 2).is_ok());
    for (int64_t i = 0; i < 512; ++i) QCOMPARE(kv.v_slot(1, 2, 1)[i], kv.k_slot(1, 1, 1)[i]);
  }

  void fp8ValuesUseTheKeyScale() {
    KvCacheTypes types{GgmlType::F8_E4M3, GgmlType::F8_E4M3};
    types.calculate_scales = true;
    auto created = PagedKvStorage::create(latent_shape(1), 4, 2, types);
    QVERIFY(created.is_ok());
    PagedKvStorage& kv = **created;
    std::vector<float> k(576, 0.5f);
    k[7] = 40.0f;
    const std::vector<int64_t> slot_ids = {0};
    QVERIFY(kv.write(0, slot_ids, k.data(), nullptr).is_ok());
    QCOMPARE(kv.k_scale(0), 40.0f / kKScaleConstant);
    QCOMPARE(kv.v_scale(0), kv.k_scale(0));
  }
};

QTEST_APPLESS_MAIN(TestPagedKvLatent)
#include "test_paged_kv_latent.moc"
