// The CPU probe with small buffers: every bandwidth (read-only, copy, triad) and the f32 peak
// come out positive, the read-only figure is the memory roof, AVX2 CPUs get an int8 ceiling, its
// sum reads every float, and bad options are refused.
// Nothing here is timed against a threshold: the figures depend on the machine.
#include "iwb/engine/profile/machine_probe.h"
#include "iwb/engine/profile/metrics.h"

#include <QtTest>

#include <vector>

using namespace iwb;

class TestCpuProbe : public QObject {
  Q_OBJECT

 private slots:
  // The paired probe (`iwb bench --paired-probe`) measures again and again on its own buffers,
  // with the threads asked for, and refuses buffers under 1 MiB.
  void readBandwidthProbeRepeats() {
    auto probe = ReadBandwidthProbe::create(2, (4ull << 20) + 4 * 37);
    QVERIFY2(probe.is_ok(), probe.error_message().c_str());
    QCOMPARE((*probe)->num_threads(), 2);
    QCOMPARE((*probe)->buffer_bytes(), (4ull << 20) + 4 * 37);
    for (int i = 0; i < 3; ++i) QVERIFY((*probe)->measure(2) > 0);
    QVERIFY(!ReadBandwidthProbe::create(1, 1000).is_ok());
  }

  void readOnlyBandwidthIsMeasured() {
    ProbeOptions options;
    options.num_threads = 2;
    options.buffer_bytes = 8ull << 20;  // small: the figures only have to exist
    options.repetitions = 2;
    options.compute_seconds = 0.01;
    auto r = probe_cpu(options);
    QVERIFY2(r.is_ok(), r.error_message().c_str());
    QCOMPARE(r->device_id, std::string("cpu"));
    QCOMPARE(r->num_threads, 2);
    QVERIFY(r->read_bytes_per_s > 0);
    QVERIFY(r->copy_bytes_per_s > 0);
    QVERIFY(r->triad_bytes_per_s > 0);
    QVERIFY(r->peak_flops > 0);
    QVERIFY(r->has_read_bandwidth());
    // The read-only figure is the roof MBU and the roofline use; copy and triad stay beside it.
    QCOMPARE(r->bandwidth_bytes_per_s(), r->read_bytes_per_s);
    QCOMPARE(ceilings_from_probe(*r).bandwidth_bytes_per_s, r->read_bytes_per_s);
    QVERIFY(r->stream_bytes_per_s() >= r->copy_bytes_per_s);
    QVERIFY(r->ridge_point() > 0);
  }

  // Every x86 CPU with AVX2 gets an int8 ceiling (VNNI, AVX-VNNI or maddubs), so quantized MFU is
  // not measured against the f32 peak; one maddubs does 64 ops against an FMA's 16 flops, and
  // no AVX2 core issues more FMAs than maddubs per cycle, so the int8 figure is the larger.
  void int8CeilingOnAvx2() {
#if defined(__x86_64__)
    __builtin_cpu_init();
    if (!__builtin_cpu_supports("avx2")) QSKIP("the CPU has no AVX2");
    ProbeOptions options;
    options.num_threads = 1;
    options.buffer_bytes = 1ull << 20;
    options.repetitions = 1;
    options.compute_seconds = 0.05;
    auto r = probe_cpu(options);
    QVERIFY2(r.is_ok(), r.error_message().c_str());
    QVERIFY(r->peak_int8_ops > 0);
    QVERIFY(!r->peak_int8_kind.empty());
    QVERIFY2(r->peak_int8_ops > r->peak_flops,
             qPrintable(QString("int8 %1 GOP/s, f32 %2 GFLOP/s").arg(r->peak_int8_ops / 1e9).arg(r->peak_flops / 1e9)));
#else
    QSKIP("not an x86-64 CPU");
#endif
  }

  // An odd size (not a multiple of any vector width) and one thread: the sum's tail is read too.
  void oddSizeOneThread() {
    ProbeOptions options;
    options.num_threads = 1;
    options.buffer_bytes = (1ull << 20) + 4 * 37;
    options.repetitions = 1;
    options.compute_seconds = 0.01;
    auto r = probe_cpu(options);
    QVERIFY2(r.is_ok(), r.error_message().c_str());
    QVERIFY(r->read_bytes_per_s > 0);
  }

  // The timed sum reads every float in each layout (four or eight streams of whole vectors),
  // their partial last steps and the floats past the streams' equal parts, on sizes that leave
  // every kind of remainder.
  void readSumCoversEveryFloat() {
    for (int layout = 0; layout < kReadStreamLayouts; ++layout) {
      for (const size_t n : {size_t(0), size_t(1), size_t(31), size_t(127), size_t(128), size_t(129), size_t(255),
                             size_t(257), size_t(1000), size_t(4097), size_t(123457)}) {
        std::vector<float> values(n);
        double expected = 0;
        for (size_t i = 0; i < n; ++i) {
          values[i] = static_cast<float>(i % 7 + 1);
          expected += values[i];
        }
        const double sum = read_probe_sum(values.data(), n, layout);
        QVERIFY2(qAbs(sum - expected) <= 1e-4 * (expected + 1),
                 qPrintable(QString("layout %1, n=%2: %3 instead of %4").arg(layout).arg(n).arg(sum).arg(expected)));
      }
    }
  }

  void refusesTinyBuffers() {
    ProbeOptions options;
    options.buffer_bytes = 1024;
    auto r = probe_cpu(options);
    QVERIFY(!r.is_ok());
    QVERIFY2(r.error_message().find("1 MiB") != std::string::npos, r.error_message().c_str());
  }
};

QTEST_GUILESS_MAIN(TestCpuProbe)
#include "test_cpu_probe.moc"
