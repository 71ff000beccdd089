// GPU KV cache writes (F16, the block types and FP8) against write_kv_paged_ref, bit for bit, and the
// copy-on-write block copies against a host copy. Skips, saying why, when no CUDA device is usable.
#include "cuda_test_support.h"
#include "random_tensors.h"

#include "iwb/kernels/cuda/kv_cache_cuda.h"
#include "iwb/kernels/dequantize.h"
#include "iwb/kernels/paged_attention.h"

#include <QTest>

#include <algorithm>
#include <numeric>
#include <random>
#include <vector>

using namespace iwb;
using iwb::test::DeviceBuffer;

// Empty when equal; else how many uint16 units differ and the first few as slot:unit GPU/CPU (in
// hex), so one device run shows the pattern of a mismatch rather than its first unit only.
QString describe_differences(const std::vector<uint16_t>& gpu, const std::vector<uint16_t>& cpu, int64_t row_units) {
  QStringList first;
  int64_t count = 0;
  for (size_t i = 0; i < cpu.size(); ++i) {
    if (gpu[i] == cpu[i]) continue;
    if (++count <= 12) {
      first << QStringLiteral("%1:%2 %3/%4")
                   .arg(static_cast<int64_t>(i) / row_units)
                   .arg(static_cast<int64_t>(i) % row_units)
                   .arg(gpu[i], 4, 16, QLatin1Char('0'))
                   .arg(cpu[i], 4, 16, QLatin1Char('0'));
    }
  }
  if (count == 0) return {};
  return QStringLiteral("%1 of %2 units differ (slot:unit GPU/CPU): %3")
      .arg(count)
      .arg(cpu.size())
      .arg(first.join(QStringLiteral(", ")));
}

class TestCudaKvCache : public QObject {
  Q_OBJECT

 private slots:
  void initTestCase() {
    const QString reason = iwb::test::cuda_unavailable_reason();
    if (!reason.isEmpty()) QSKIP(qPrintable(QStringLiteral("CUDA KV cache kernels not tested: %1").arg(reason)));
  }

  void write_matches_reference_data() {
    QTest::addColumn<int>("type_id");
    QTest::addColumn<int>("k_row");
    QTest::addColumn<int>("v_row");
    QTest::newRow("F16 2x80 / 2x64") << static_cast<int>(GgmlType::F16) << 160 << 128;
    QTest::newRow("F16 1x8 / 3x8") << static_cast<int>(GgmlType::F16) << 8 << 24;
    QTest::newRow("Q8_0 2x64 / 3x32") << static_cast<int>(GgmlType::Q8_0) << 128 << 96;
    QTest::newRow("Q8_0 8x128") << static_cast<int>(GgmlType::Q8_0) << 1024 << 1024;
    // The other block types (their scales and minima go through the same f16 store) and FP8.
    QTest::newRow("Q5_1 2x64 / 3x32") << static_cast<int>(GgmlType::Q5_1) << 128 << 96;
    QTest::newRow("Q5_0 1x128") << static_cast<int>(GgmlType::Q5_0) << 128 << 128;
    QTest::newRow("Q4_1 2x64 / 3x32") << static_cast<int>(GgmlType::Q4_1) << 128 << 96;
    QTest::newRow("Q4_0 8x128") << static_cast<int>(GgmlType::Q4_0) << 1024 << 1024;
    QTest::newRow("F8_E4M3 2x64") << static_cast<int>(GgmlType::F8_E4M3) << 128 << 128;
  }

  void write_matches_reference() {
    QFETCH(int, type_id);
    QFETCH(int, k_row);
    QFETCH(int, v_row);
    const auto type = static_cast<GgmlType>(type_id);
    const int64_t num_tokens = 13, num_slots = 4 * 16;
    std::mt19937 rng(static_cast<uint32_t>(k_row * 3 + v_row + type_id));
    const std::vector<float> k = iwb::test::random_floats(static_cast<size_t>(num_tokens * k_row), rng, 3.0f);
    const std::vector<float> v = iwb::test::random_floats(static_cast<size_t>(num_tokens * v_row), rng, 0.5f);
    // Distinct scattered slot_ids, two padding tokens.
    std::vector<int64_t> all_slots(static_cast<size_t>(num_slots));
    std::iota(all_slots.begin(), all_slots.end(), 0);
    std::shuffle(all_slots.begin(), all_slots.end(), rng);
    std::vector<int64_t> slot_ids(all_slots.begin(), all_slots.begin() + num_tokens);
    slot_ids[3] = -1;
    slot_ids[11] = -1;

    const int64_t k_units = kv_row_units(type, k_row), v_units = kv_row_units(type, v_row);
    std::vector<uint16_t> k_cache(static_cast<size_t>(num_slots * k_units), 0x1234);
    std::vector<uint16_t> v_cache(static_cast<size_t>(num_slots * v_units), 0x4321);
    DeviceBuffer<uint16_t> d_k_cache(k_cache), d_v_cache(v_cache);
    DeviceBuffer<float> d_k(k), d_v(v);
    DeviceBuffer<int64_t> d_slots(slot_ids);
    WriteKvCudaArgs args{d_k.get(), d_v.get(), d_slots.get(), num_tokens, d_k_cache.get(), d_v_cache.get(), num_slots,
                         k_row,     v_row,     type,          type};
    args.is_rotated = false;  // whole rows as one head, unrotated (the emulated test covers rotated heads)
    CUDA_VERIFY(write_kv_paged_cuda(args, nullptr));
    CUDA_VERIFY(cudaDeviceSynchronize());

    // Plain (unrotated) blocks asked of both.
    QVERIFY(write_kv_paged_ref({.k = k.data(), .v = v.data(), .slot_mapping = slot_ids.data(), .num_tokens = num_tokens,
                                .k_cache = k_cache.data(), .v_cache = v_cache.data(), .num_slots = num_slots,
                                .k_row = k_row, .v_row = v_row, .k_type = type, .v_type = type, .is_rotated = false}));
    const std::vector<uint16_t> got_k = d_k_cache.download(), got_v = d_v_cache.download();
    const QString k_diff = describe_differences(got_k, k_cache, k_units);
    const QString v_diff = describe_differences(got_v, v_cache, v_units);
    QVERIFY2(k_diff.isEmpty(), qPrintable(QStringLiteral("keys: ") + k_diff));
    QVERIFY2(v_diff.isEmpty(), qPrintable(QStringLiteral("values: ") + v_diff));
  }

  void write_skips_slots_outside_the_pool() {
    const int64_t row = 32, num_slots = 8;
    std::vector<float> k(2 * row, 1.0f);
    std::vector<uint16_t> cache(static_cast<size_t>(num_slots * row), 0);
    DeviceBuffer<float> d_k(k);
    DeviceBuffer<uint16_t> d_k_cache(cache), d_v_cache(cache);
    DeviceBuffer<int64_t> d_slots(std::vector<int64_t>{num_slots, 1000});
    for (GgmlType type : {GgmlType::F16, GgmlType::Q8_0}) {
      WriteKvCudaArgs args{d_k.get(), d_k.get(), d_slots.get(), 2,   d_k_cache.get(), d_v_cache.get(), num_slots,
                           row,       row,       type,          type};
      CUDA_VERIFY(write_kv_paged_cuda(args, nullptr));
      CUDA_VERIFY(cudaDeviceSynchronize());
      QVERIFY(d_k_cache.download() == cache);
      QVERIFY(d_v_cache.download() == cache);
    }
    WriteKvCudaArgs bad{d_k.get(), d_k.get(),      d_slots.get(), 2, d_k_cache.get(), d_v_cache.get(), num_slots, 48,
                        48,        GgmlType::Q8_0, GgmlType::Q8_0};  // 48 is not a multiple of 32
    QCOMPARE(write_kv_paged_cuda(bad, nullptr), cudaErrorInvalidValue);
    bad.k_type = bad.v_type = GgmlType::Q6_K;  // no KV cache type
    bad.k_row = bad.v_row = 32;
    QCOMPARE(write_kv_paged_cuda(bad, nullptr), cudaErrorInvalidValue);
    QCOMPARE(cudaGetLastError(), cudaSuccess);
  }

  void copy_blocks_matches_host_data() {
    QTest::addColumn<int>("block_units");
    QTest::addColumn<int>("pool_padding");
    QTest::newRow("16-byte path") << 16 * 40 << 8;
    QTest::newRow("unaligned path") << 16 * 17 * 3 << 5;
  }

  void copy_blocks_matches_host() {
    QFETCH(int, block_units);
    QFETCH(int, pool_padding);
    const int64_t num_blocks = 6, num_pools = 3;
    const int64_t stride = num_blocks * block_units + pool_padding;
    std::vector<uint16_t> pools(static_cast<size_t>(num_pools * stride));
    std::mt19937 rng(static_cast<uint32_t>(block_units));
    std::uniform_int_distribution<int> unit(0, 65535);
    for (uint16_t& u : pools) u = static_cast<uint16_t>(unit(rng));
    // (src, dst) pairs as std::vector<BlockCopy> lays them out; the last two are skipped.
    const std::vector<int32_t> copies = {1, 4, 2, 0, 5, 5, 7, 1};
    DeviceBuffer<uint16_t> d_pools(pools);
    DeviceBuffer<int32_t> d_copies(copies);
    CopyKvBlocksCudaArgs args{d_pools.get(), num_pools, stride, block_units, num_blocks, d_copies.get(), 4};
    CUDA_VERIFY(copy_kv_blocks_cuda(args, nullptr));
    CUDA_VERIFY(cudaDeviceSynchronize());
    std::vector<uint16_t> expected = pools;
    for (int64_t p = 0; p < num_pools; ++p) {
      for (const auto& [src, dst] : {std::pair{1, 4}, std::pair{2, 0}}) {
        std::copy_n(pools.begin() + p * stride + src * block_units, block_units,
                    expected.begin() + p * stride + dst * block_units);
      }
    }
    QVERIFY(d_pools.download() == expected);
    args.pool_stride_units = num_blocks * block_units - 1;  // pools would overlap
    QCOMPARE(copy_kv_blocks_cuda(args, nullptr), cudaErrorInvalidValue);
    QCOMPARE(cudaGetLastError(), cudaSuccess);
  }
};

QTEST_APPLESS_MAIN(TestCudaKvCache)
#include "test_cuda_kv_cache.moc"
