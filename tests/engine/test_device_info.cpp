// describe_cpu_device against /proc (model name, RAM, SIMD flags the kernel reports) and
// list_cuda_devices' contract: devices with sane fields, or an error naming the reason.
#include "iwb/engine/backend/device_info.h"

#include <QFile>
#include <QTest>
#include <QTextStream>

#include <algorithm>

using namespace iwb;

namespace {

bool has_feature(const ComputeDeviceInfo& info, const char* name) {
  return std::find(info.simd_features.begin(), info.simd_features.end(), name) != info.simd_features.end();
}

// The "flags" line of /proc/cpuinfo, split; empty off x86 Linux.
QStringList proc_cpu_flags() {
  QFile file(QStringLiteral("/proc/cpuinfo"));
  if (!file.open(QIODevice::ReadOnly | QIODevice::Text)) return {};
  // /proc files report size 0, so QFile::atEnd() is true at once: read until no line comes.
  QTextStream stream(&file);
  QString line;
  while (stream.readLineInto(&line)) {
    if (line.startsWith(QLatin1String("flags"))) {
      return line.section(QLatin1Char(':'), 1).split(QLatin1Char(' '), Qt::SkipEmptyParts);
    }
  }
  return {};
}

}  // namespace

class TestDeviceInfo : public QObject {
  Q_OBJECT

 private slots:
  void cpu_device_is_described() {
    const ComputeDeviceInfo cpu = describe_cpu_device();
    QCOMPARE(cpu.kind, ComputeDeviceKind::Cpu);
    QCOMPARE(cpu.id, std::string("cpu"));
    QVERIFY(!cpu.name.empty());
    QVERIFY(cpu.num_logical_cores >= 1);
    QVERIFY(cpu.total_memory_bytes > 0);
    QVERIFY(cpu.free_memory_bytes <= cpu.total_memory_bytes);
    QCOMPARE(cpu.num_multiprocessors, 0);
  }

  void cpu_simd_features_agree_with_the_kernel() {
    const QStringList flags = proc_cpu_flags();
    if (flags.isEmpty()) QSKIP("no x86 flags line in /proc/cpuinfo");
    const ComputeDeviceInfo cpu = describe_cpu_device();
    // Our name -> the kernel's name for the same CPUID bit.
    const std::pair<const char*, const char*> names[] = {
        {"avx2", "avx2"},       {"fma", "fma"},               {"avx512f", "avx512f"},
        {"avxvnni", "avx_vnni"}, {"avx512vnni", "avx512_vnni"}, {"avx512bf16", "avx512_bf16"}};
    for (const auto& [ours, kernels] : names) {
      QVERIFY2(has_feature(cpu, ours) == flags.contains(QLatin1String(kernels)), ours);
    }
  }

  // The largest cache is the largest level sysfs lists for core 0 (its core complex's L3 on
  // AMD, where sysconf gives the whole socket's), in bytes.
  void cpu_cache_is_the_largest_sysfs_level() {
    qint64 largest = 0;
    for (int index = 0; index < 8; ++index) {
      QFile file(QStringLiteral("/sys/devices/system/cpu/cpu0/cache/index%1/size").arg(index));
      if (!file.open(QIODevice::ReadOnly)) break;
      QString size = QString::fromLatin1(file.readAll()).trimmed();  // "32768K"
      qint64 unit = 1;
      if (size.endsWith(QLatin1Char('K'))) unit = 1024;
      if (size.endsWith(QLatin1Char('M'))) unit = 1024 * 1024;
      if (unit > 1) size.chop(1);
      largest = std::max(largest, size.toLongLong() * unit);
    }
    if (largest == 0) QSKIP("no cache sizes in /sys/devices/system/cpu/cpu0/cache");
    QCOMPARE(static_cast<qint64>(describe_cpu_device().cache_bytes), largest);
  }

  void cuda_devices_or_a_reason() {
    const auto devices = list_cuda_devices();
    if (!devices.is_ok()) {
      const std::string& message = devices.error_message();
      qInfo("no CUDA devices: %s", message.c_str());
#ifdef IWB_HAVE_CUDA
      QVERIFY2(message.rfind("no CUDA device: ", 0) == 0 || message.find("failed") != std::string::npos,
               message.c_str());
      QVERIFY(devices.status().code() != ErrorCode::Unsupported);
#else
      QCOMPARE(devices.status().code(), ErrorCode::Unsupported);
      QVERIFY2(message.find("without CUDA") != std::string::npos, message.c_str());
#endif
      return;
    }
    QVERIFY(!devices->empty());  // an empty list would be an error value instead
    for (size_t i = 0; i < devices->size(); ++i) {
      const ComputeDeviceInfo& d = (*devices)[i];
      QCOMPARE(d.kind, ComputeDeviceKind::Cuda);
      QCOMPARE(d.id, "cuda:" + std::to_string(i));
      QVERIFY(!d.name.empty());
      QVERIFY(d.total_memory_bytes > 0 && d.free_memory_bytes <= d.total_memory_bytes);
      QVERIFY(d.compute_capability_major >= 3);
      QVERIFY(d.num_multiprocessors > 0);
      QVERIFY(d.peak_memory_bandwidth_bytes_per_s() >= 0.0);
    }
  }
};

QTEST_APPLESS_MAIN(TestDeviceInfo)
#include "test_device_info.moc"
