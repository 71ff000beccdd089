// Reading the process's memory from /proc, and meta-type registration of the measurement values.
#include "worker/measurement_values.h"

#include <QFile>

namespace iwb::ui {
namespace {

// "VmRSS:\t  123456 kB" -> bytes; -1 when the line is not that field.
qint64 fieldBytes(const QByteArray& line, const QByteArray& name) {
  if (!line.startsWith(name) || line.size() <= name.size() || line.at(name.size()) != ':') return -1;
  QByteArray value = line.mid(name.size() + 1).trimmed();
  qint64 scale = 1;
  if (value.endsWith(" kB")) {
    scale = 1024;  // the kernel's "kB" is KiB
    value.chop(3);
  }
  bool isNumber = false;
  const qint64 n = value.trimmed().toLongLong(&isNumber);
  return isNumber ? n * scale : -1;
}

}  // namespace

MemorySample parseProcStatus(const QByteArray& text) {
  MemorySample sample;
  int numFound = 0;
  for (const QByteArray& line : text.split('\n')) {
    if (const qint64 v = fieldBytes(line, "VmRSS"); v >= 0) {
      sample.residentBytes = v;
      ++numFound;
    } else if (const qint64 a = fieldBytes(line, "RssAnon"); a >= 0) {
      sample.residentAnonBytes = a;
      ++numFound;
    } else if (const qint64 f = fieldBytes(line, "RssFile"); f >= 0) {
      sample.residentFileBytes = f;
      ++numFound;
    }
  }
  // Kernels before 4.5 have VmRSS alone; the split is what the memory view shows, so ask for all.
  sample.isValid = numFound == 3;
  return sample;
}

MemorySample readProcessMemory() {
  QFile file(QStringLiteral("/proc/self/status"));
  // A /proc file reports size 0; readAll() reads it to the end regardless.
  if (!file.open(QIODevice::ReadOnly)) return {};
  return parseProcStatus(file.readAll());
}

void registerMeasurementMetaTypes() {
  qRegisterMetaType<iwb::ProfileSnapshot>();
  qRegisterMetaType<iwb::ui::RequestMeasurement>();
  qRegisterMetaType<iwb::ui::MemorySample>();
  qRegisterMetaType<QList<double>>();
}

}  // namespace iwb::ui
