// A real device failure while loading on cuda:0 offers the CPU, on a machine with a GPU (the
// CPU-only machines test the same offer for a load that fails for want of a device, in
// test_engine_settings). The test takes almost all of the GPU's free memory with plain
// cudaMalloc, so the engine's own allocations on the device fail for real; the controller then
// reports deviceLoadFailed with the engine's message (what the window's "Load on the CPU" bar
// shows), loadOnCpu loads the model on the CPU with the failed load's other settings, and once
// the memory is given back the device loads the model again. Skips without a CUDA device.
#include "aidreams_fixture.h"
#include "iwb/engine/backend/device_info.h"
#include "worker/engine_controller.h"

#include <QSignalSpy>
#include <QTemporaryDir>
#include <QTest>

#include <cuda_runtime.h>

#include <vector>

using namespace iwb::ui;

namespace {

constexpr int kTimeoutMs = 60000;

}  // namespace

class TestCudaLoadFallback : public QObject {
  Q_OBJECT

 private:
  QTemporaryDir m_dir;
  QString m_modelPath;
  std::vector<void*> m_taken;  // device memory this test holds

  // Takes free device memory in halving chunks (1 GiB down to 1 MiB) until under `leave` bytes
  // stay free.
  void takeDeviceMemory(size_t leave) {
    for (size_t chunk = size_t{1} << 30; chunk >= (size_t{1} << 20); chunk /= 2) {
      for (;;) {
        size_t free = 0, total = 0;
        if (cudaMemGetInfo(&free, &total) != cudaSuccess || free < leave + chunk) break;
        void* p = nullptr;
        if (cudaMalloc(&p, chunk) != cudaSuccess) {
          cudaGetLastError();  // a refused allocation is not sticky
          break;
        }
        m_taken.push_back(p);
      }
    }
  }
  void giveBackDeviceMemory() {
    for (void* p : m_taken) cudaFree(p);
    m_taken.clear();
  }

 private slots:
  void initTestCase() {
    const auto devices = iwb::list_cuda_devices();
    if (!devices.is_ok() || devices->empty()) {
      QSKIP(qPrintable(
          QStringLiteral("no CUDA device: %1")
              .arg(devices.is_ok() ? QStringLiteral("none listed") : QString::fromStdString(devices.error_message()))));
    }
    QVERIFY(m_dir.isValid());
    QString why;
    m_modelPath = iwb::test::convertAidreamsModel(m_dir.path(), &why);
    if (m_modelPath.isEmpty()) QSKIP(qPrintable(why));
  }

  void cleanupTestCase() { giveBackDeviceMemory(); }

  void aRealDeviceFailureOffersTheCpu() {
    takeDeviceMemory(size_t{8} << 20);  // the cuBLAS workspace alone is 32 MiB
    size_t free = 0, total = 0;
    QCOMPARE(cudaMemGetInfo(&free, &total), cudaSuccess);
    QVERIFY2(free < (size_t{32} << 20), qPrintable(QStringLiteral("%1 MiB still free").arg(free >> 20)));

    EngineController engine;
    QSignalSpy deviceFailed(&engine, &EngineController::deviceLoadFailed);
    QSignalSpy failed(&engine, &EngineController::modelLoadFailed);
    QSignalSpy loaded(&engine, &EngineController::modelLoaded);
    EngineLoadOptions o;
    o.device = QStringLiteral("cuda:0");
    o.kvBlockSize = 8;
    engine.loadModel(m_modelPath, o);
    QTRY_VERIFY_WITH_TIMEOUT(failed.count() == 1, kTimeoutMs);
    QCOMPARE(deviceFailed.count(), 1);
    QCOMPARE(deviceFailed.at(0).at(1).toString(), QStringLiteral("cuda:0"));
    const QString message = deviceFailed.at(0).at(2).toString();
    // Which allocation fails first (cuBLAS's handle, the weights, scratch, the KV pool) is the
    // device's business; the message must say it, not that there is no device.
    qInfo("the device's refusal: %s", qPrintable(message));
    QVERIFY(!message.isEmpty());
    QVERIFY2(!message.contains(QStringLiteral("no CUDA device")), qPrintable(message));
    QVERIFY(!engine.hasModel());

    // The CPU does not need the device's memory.
    engine.loadOnCpu(m_modelPath);
    QTRY_VERIFY_WITH_TIMEOUT(loaded.count() == 1, kTimeoutMs);
    QCOMPARE(engine.model().deviceId, QStringLiteral("cpu"));
    QCOMPARE(engine.lastLoadOptions().kvBlockSize, 8);

    // With the memory given back, the same device loads the model: the failure left it usable.
    giveBackDeviceMemory();
    engine.loadModel(m_modelPath, o);
    QTRY_VERIFY_WITH_TIMEOUT(loaded.count() == 2, kTimeoutMs);
    QCOMPARE(engine.model().deviceId, QStringLiteral("cuda:0"));
    QCOMPARE(deviceFailed.count(), 1);
  }
};

QTEST_GUILESS_MAIN(TestCudaLoadFallback)
#include "test_cuda_load_fallback.moc"
