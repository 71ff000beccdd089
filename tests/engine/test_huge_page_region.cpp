// Memory in 2 MiB pages (HugePageRegion): whole pages on a 2 MiB boundary, zero, writable until
// made read-only, moved without a copy, filled by several threads a slice each (a model read
// into it byte for byte); and the paged KV cache's pools in it: every layer's keys and values in
// one region from a 2 MiB boundary, zero, kept apart, and copied block by block.
#include "iwb/engine/gguf/gguf_file.h"
#include "iwb/engine/gguf/gguf_writer.h"
#include "iwb/engine/paged/paged_kv_storage.h"
#include "iwb/engine/runtime/huge_page_region.h"

#include <QTemporaryDir>
#include <QTest>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

using namespace iwb;

namespace {

bool is_huge_aligned(const void* p) { return reinterpret_cast<uintptr_t>(p) % kHugePageBytes == 0; }

bool all_zero(const uint8_t* p, size_t n) {
  return std::all_of(p, p + n, [](uint8_t b) { return b == 0; });
}

}  // namespace

class TestHugePageRegion : public QObject {
  Q_OBJECT

 private slots:
  void wholePagesOnABoundaryAndZero() {
    for (const size_t bytes : {size_t{1}, kHugePageBytes - 1, kHugePageBytes, kHugePageBytes + 1, size_t{5} << 20}) {
      HugePageRegion r = HugePageRegion::allocate(bytes);
      QVERIFY(!r.empty());
      QCOMPARE(r.size(), (bytes + kHugePageBytes - 1) / kHugePageBytes * kHugePageBytes);
      QVERIFY(is_huge_aligned(r.data()));
      auto* p = static_cast<uint8_t*>(r.data());
      QVERIFY(all_zero(p, r.size()));
      p[0] = 1;  // writable to the last byte
      p[r.size() - 1] = 2;
      QCOMPARE(int(p[r.size() - 1]), 2);
      // The kernel's count of its huge pages never exceeds it (it may be 0: THP off or memory
      // fragmented).
      QVERIFY(r.huge_page_bytes() <= r.size());
    }
    QVERIFY(HugePageRegion::allocate(0).empty());
  }

  void movesWithoutACopy() {
    HugePageRegion a = HugePageRegion::allocate(3 << 20, /*no_reserve=*/true);
    QVERIFY(!a.empty());
    static_cast<uint8_t*>(a.data())[7] = 42;
    void* const where = a.data();
    HugePageRegion b = std::move(a);
    QVERIFY(a.empty());
    QCOMPARE(a.size(), size_t{0});
    QCOMPARE(b.data(), where);
    QCOMPARE(int(static_cast<uint8_t*>(b.data())[7]), 42);
    HugePageRegion c = HugePageRegion::allocate(1);
    c = std::move(b);  // c's own region is given back, b's taken over
    QCOMPARE(c.data(), where);
    QVERIFY(b.empty());
    c.make_read_only();
    QCOMPARE(int(static_cast<const uint8_t*>(c.data())[7]), 42);  // still readable
  }

  void slicesCoverTheRegionOnce() {
    const HugePageRegion r = HugePageRegion::allocate((size_t{9} << 20) + 5);  // 5 huge pages
    QVERIFY(!r.empty());
    for (const size_t bytes : {size_t{1}, kHugePageBytes, (size_t{9} << 20) + 5, r.size(), r.size() + 100}) {
      for (const int threads : {0, 1, 2, 3, 5, 8}) {
        std::mutex m;
        std::vector<std::pair<size_t, size_t>> slices;
        r.for_each_slice(bytes, threads, [&](size_t offset, size_t n) {
          const std::lock_guard lock(m);
          slices.emplace_back(offset, n);
        });
        std::sort(slices.begin(), slices.end());
        const size_t want = std::min(bytes, r.size());
        QVERIFY(!slices.empty());
        QVERIFY(slices.size() <= size_t(std::max(1, threads)));
        size_t next = 0;
        for (const auto& [offset, n] : slices) {
          QCOMPARE(offset, next);  // consecutive, none twice, none empty
          QVERIFY(offset % kHugePageBytes == 0);
          QVERIFY(n > 0);
          next = offset + n;
        }
        QCOMPARE(next, want);
      }
    }
    // load_threads: one below 128 MiB, never more than 8.
    QCOMPARE(load_threads(size_t{100} << 20), 1);
    QVERIFY(load_threads(size_t{64} << 30) >= 1 && load_threads(size_t{64} << 30) <= 8);
    HugePageRegion t = HugePageRegion::allocate(size_t{7} << 20);
    t.touch_in_parallel();
    QVERIFY(all_zero(static_cast<const uint8_t*>(t.data()), t.size()));
  }

  // A file past 128 MiB is read by more than one thread where the machine has two: each slice
  // lands at its own offset, byte for byte what a mapping of the file shows, and the progress
  // comes on the caller's thread.
  void readIntoMemoryByteForByte() {
    QTemporaryDir dir;
    QVERIFY(dir.isValid());
    const std::string path = dir.filePath("big.gguf").toStdString();
    const int64_t elements = (int64_t{130} << 20) + 12347;  // I8: one byte each, not page-sized
    gguf::GgufWriter w;
    w.set_string("general.architecture", "test");
    QVERIFY(w.add_tensor("pattern", {elements}, GgmlType::I8, [](std::span<uint8_t> dst) {
               for (size_t i = 0; i < dst.size(); ++i) dst[i] = static_cast<uint8_t>((i * 2654435761u) >> 13);
               return Status{};
             }).is_ok());
    QVERIFY(w.write_file(path).is_ok());
    // Progress on this thread only, never backwards, ending with the whole file.
    std::vector<double> fractions;
    bool elsewhere = false;
    const std::thread::id self = std::this_thread::get_id();
    auto read = gguf::GgufFile::open(path, gguf::LoadMode::Read, [&](double f) {
      elsewhere = elsewhere || std::this_thread::get_id() != self;
      fractions.push_back(f);
    });
    QVERIFY2(read.is_ok(), read.error_message().c_str());
    QVERIFY(!elsewhere);
    QVERIFY(fractions.size() >= 2);
    QVERIFY(std::is_sorted(fractions.begin(), fractions.end()));
    QVERIFY(fractions.front() > 0 && fractions.front() < 1);
    QCOMPARE(fractions.back(), 1.0);
    auto mapped = gguf::GgufFile::open(path, gguf::LoadMode::Map);
    QVERIFY2(mapped.is_ok(), mapped.error_message().c_str());
    QCOMPARE((*read)->load_mode(), gguf::LoadMode::Read);
    const std::span<const uint8_t> a = (*read)->tensor_data((*read)->tensors().at(0));
    const std::span<const uint8_t> b = (*mapped)->tensor_data((*mapped)->tensors().at(0));
    QCOMPARE(a.size(), size_t(elements));
    QVERIFY(a.data() != b.data());
    QVERIFY(std::memcmp(a.data(), b.data(), a.size()) == 0);
  }

  // GgufFile::lock_in_memory (load mode mlock): the kernel's count of locked memory grows by
  // the file, or the refusal names the limit to raise.
  void lockedInMemory() {
    QTemporaryDir dir;
    QVERIFY(dir.isValid());
    const std::string path = dir.filePath("small.gguf").toStdString();
    gguf::GgufWriter w;
    w.set_string("general.architecture", "test");
    std::vector<uint8_t> bytes(size_t{3} << 20, 7);
    QVERIFY(w.add_tensor("t", {int64_t(bytes.size())}, GgmlType::I8, bytes).is_ok());
    QVERIFY(w.write_file(path).is_ok());
    auto file = gguf::GgufFile::open(path, gguf::LoadMode::Map);
    QVERIFY2(file.is_ok(), file.error_message().c_str());
    const auto locked_kib = [] {
      std::ifstream status("/proc/self/status");
      std::string line;
      while (std::getline(status, line)) {
        if (line.rfind("VmLck:", 0) == 0) return std::stol(line.substr(6));
      }
      return -1L;
    };
    const long before = locked_kib();
    const Status s = (*file)->lock_in_memory();
#if defined(__SANITIZE_ADDRESS__)
    QVERIFY2(s.is_ok() || s.message().find("RLIMIT_MEMLOCK") != std::string::npos, s.message().c_str());
    QSKIP("AddressSanitizer makes mlock a no-op (its interceptor locks nothing), so VmLck cannot grow");
#endif
    if (s.is_ok()) {
      QVERIFY2(locked_kib() - before >= long((*file)->file_size() >> 10), qPrintable(QString::number(locked_kib())));
    } else {
      QVERIFY2(s.message().find("RLIMIT_MEMLOCK") != std::string::npos, s.message().c_str());
    }
  }

  void kvPoolsLayerByLayer() {
    const KvCacheShape shape{.num_layers = 3, .num_kv_heads = 2, .head_dim_k = 64, .head_dim_v = 32};
    constexpr int32_t kBlock = 16;
    constexpr int64_t kBlocks = 40;
    auto made = PagedKvStorage::create(shape, kBlock, kBlocks, KvCacheTypes{});
    QVERIFY2(made.is_ok(), made.error_message().c_str());
    PagedKvStorage& kv = **made;
    const int64_t k_units = kBlock * kBlocks * kv.k_row(0), v_units = kBlock * kBlocks * kv.v_row(0);
    // One region: the first layer's keys on a 2 MiB boundary, every layer's keys and values
    // after it, none overlapping another.
    QVERIFY(is_huge_aligned(kv.k_data(0)));
    std::vector<std::pair<const uint16_t*, int64_t>> spans;
    for (int64_t layer = 0; layer < shape.num_layers; ++layer) {
      spans.emplace_back(kv.k_data(layer), k_units);
      spans.emplace_back(kv.v_data(layer), v_units);
      QVERIFY(all_zero(reinterpret_cast<const uint8_t*>(kv.k_data(layer)), size_t(k_units) * 2));
      QVERIFY(all_zero(reinterpret_cast<const uint8_t*>(kv.v_data(layer)), size_t(v_units) * 2));
    }
    std::sort(spans.begin(), spans.end());
    for (size_t i = 0; i + 1 < spans.size(); ++i) QVERIFY(spans[i].first + spans[i].second <= spans[i + 1].first);
    QVERIFY(spans.front().first == kv.k_data(0));
    QVERIFY(kv.k_data(shape.num_layers) == nullptr);
    QVERIFY(kv.huge_page_bytes() <= uint64_t(shape.num_layers * (k_units + v_units) * 2) + kHugePageBytes);
    // Block 3's slots written in every layer, then copied to block 9: each layer's copy holds
    // that layer's values, and no other block changed.
    const int64_t n = kBlock;
    std::vector<int64_t> slot_mapping(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) slot_mapping[static_cast<size_t>(i)] = 3 * kBlock + i;
    for (int64_t layer = 0; layer < shape.num_layers; ++layer) {
      std::vector<float> k(static_cast<size_t>(n * kv.k_row(0))), v(static_cast<size_t>(n * kv.v_row(0)));
      for (size_t i = 0; i < k.size(); ++i) k[i] = float(layer + 1) + float(i % 7) * 0.25f;
      for (size_t i = 0; i < v.size(); ++i) v[i] = -float(layer + 1) - float(i % 5) * 0.5f;
      QVERIFY(kv.write(layer, slot_mapping, k.data(), v.data()).is_ok());
    }
    QVERIFY(kv.copy_block(3, 9).is_ok());
    const int64_t k_block = kBlock * kv.k_row(0), v_block = kBlock * kv.v_row(0);
    for (int64_t layer = 0; layer < shape.num_layers; ++layer) {
      const uint16_t* k = kv.k_data(layer);
      const uint16_t* v = kv.v_data(layer);
      QVERIFY(std::equal(k + 3 * k_block, k + 4 * k_block, k + 9 * k_block));
      QVERIFY(std::equal(v + 3 * v_block, v + 4 * v_block, v + 9 * v_block));
      QVERIFY(!all_zero(reinterpret_cast<const uint8_t*>(k + 9 * k_block), size_t(k_block) * 2));
      QVERIFY(all_zero(reinterpret_cast<const uint8_t*>(k + 10 * k_block), size_t(k_block) * 2));
      if (layer > 0) QVERIFY(!std::equal(k + 9 * k_block, k + 10 * k_block, kv.k_data(layer - 1) + 9 * k_block));
    }
  }
};

QTEST_APPLESS_MAIN(TestHugePageRegion)
#include "test_huge_page_region.moc"
