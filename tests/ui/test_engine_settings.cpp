// Engine load settings: kept in QSettings, edited in the dialog, and applied by the worker
// when the model loads (the KV pool's memory and block size reach the engine); the device
// choice, a failed load on a CUDA device and the CPU reload offered after it.
#include "aidreams_fixture.h"
#include "main_window/main_window.h"
#include "memory/memory_model.h"
#include "memory/memory_panel.h"
#include "model_info/model_details.h"
#include "settings/device_choice.h"
#include "settings/engine_settings.h"
#include "widgets/message_bar.h"
#include "worker/engine_controller.h"

#include <QComboBox>
#include <QDoubleSpinBox>
#include <QLabel>
#include <QStatusBar>
#include <cmath>

#include <QSettings>
#include <QSignalSpy>
#include <QStandardPaths>
#include <QTemporaryDir>
#include <QTest>

using namespace iwb::ui;

namespace {

constexpr int kTimeoutMs = 60000;

// An H100 as list_cuda_devices would describe it.
iwb::ComputeDeviceInfo madeUpGpu() {
  iwb::ComputeDeviceInfo gpu;
  gpu.kind = iwb::ComputeDeviceKind::Cuda;
  gpu.id = "cuda:0";
  gpu.name = "NVIDIA H100 80GB HBM3";
  gpu.total_memory_bytes = 85'479'145'472;  // 79.6 GiB
  gpu.free_memory_bytes = 84'000'000'000;
  return gpu;
}

// True when this machine has a working CUDA device (then the "no GPU" checks do not apply).
bool hasCudaDevice() {
  auto gpus = iwb::list_cuda_devices();
  return gpus && !gpus->empty();
}

// The last pool the worker reported that has blocks in it.
KvMapSnapshot lastPool(const QSignalSpy& snapshots) {
  for (qsizetype i = snapshots.count() - 1; i >= 0; --i) {
    const auto snapshot = snapshots.at(i).at(0).value<KvMapSnapshot>();
    if (!snapshot.isEmpty()) return snapshot;
  }
  return {};
}

}  // namespace

class TestEngineSettings : public QObject {
  Q_OBJECT

 private slots:
  void initTestCase();
  void init() { QSettings().clear(); }
  void settingsRoundTrip();
  void absentSettingsAreEngineDefaults();
  void dialogEditsOptions();
  void workerAppliesKvBudgetAndBlockSize();
  void memoryEstimateMatchesMeasuredKvPool();
  void windowReloadsWithNewSettings();
  void deviceSettingsRoundTrip();
  void deviceListFromMadeUpGpus();
  void dialogListsDevicesAndKeepsTheChoice();
  void engineOptionsOfADeviceChoice();
  void loadedModelSaysWhereItRuns();
  void failedCudaLoadOffersTheCpu();
  void windowOffersTheCpuAfterAFailedCudaLoad();

 private:
  QTemporaryDir m_settingsDir;
  QTemporaryDir m_dir;
  QString m_modelPath;
  QString m_skipReason;
};

void TestEngineSettings::initTestCase() {
  QVERIFY(m_settingsDir.isValid());
  QVERIFY(m_dir.isValid());
  QSettings::setDefaultFormat(QSettings::IniFormat);
  QSettings::setPath(QSettings::IniFormat, QSettings::UserScope, m_settingsDir.path());
  QCoreApplication::setOrganizationName(QStringLiteral("Inference Workbench Tests"));
  QCoreApplication::setApplicationName(QStringLiteral("test_engine_settings"));
  QStandardPaths::setTestModeEnabled(true);
  m_modelPath = iwb::test::convertAidreamsModel(m_dir.path(), &m_skipReason);
  if (m_modelPath.isEmpty() && iwb::test::hasAidreamsModel()) QFAIL(qPrintable(m_skipReason));
}

void TestEngineSettings::settingsRoundTrip() {
  EngineLoadOptions o;
  o.contextLength = 2048;
  o.numThreads = 3;
  o.kvCacheMiB = 96;
  o.kvBlockSize = 8;
  o.maxBatchTokens = 64;
  o.isBatchInvariant = true;
  o.loadMode = QStringLiteral("mmap");
  saveEngineSettings(o);
  const EngineLoadOptions read = loadEngineSettings();
  QCOMPARE(read.loadMode, QStringLiteral("mmap"));
  QCOMPARE(read.contextLength, 2048);
  QCOMPARE(read.numThreads, 3);
  QCOMPARE(read.kvCacheMiB, 96);
  QCOMPARE(read.kvBlockSize, 8);
  QCOMPARE(read.maxBatchTokens, 64);
  QVERIFY(read.isBatchInvariant);
}

void TestEngineSettings::absentSettingsAreEngineDefaults() {
  QSettings().setValue(QStringLiteral("engine/kvBlockSize"), -5);                  // a hand-edited file
  QSettings().setValue(QStringLiteral("engine/loadMode"), QStringLiteral("dio"));  // llama.cpp's, not ours
  const EngineLoadOptions read = loadEngineSettings();
  QCOMPARE(read.loadMode, QStringLiteral("auto"));
  QCOMPARE(read.contextLength, 0);
  QCOMPARE(read.kvCacheMiB, 0);
  QCOMPARE(read.kvBlockSize, 0);
}

void TestEngineSettings::dialogEditsOptions() {
  EngineLoadOptions o;
  o.contextLength = 1024;
  o.kvCacheMiB = 2;
  o.kvBlockSize = 32;
  o.isBatchInvariant = true;
  o.loadMode = QStringLiteral("none");
  // 1 KiB per position: 2 MiB hold 2,048 positions, two contexts of 1,024.
  EngineSettingsDialog dialog(o, 1024);
  QCOMPARE(dialog.options().loadMode, QStringLiteral("none"));
  // The box reaches the engine's options by llama.cpp's names.
  QCOMPARE(toEngineOptions(dialog.options(), false).load_mode, std::string("none"));
  auto* loadMode = dialog.findChild<QComboBox*>(QStringLiteral("loadModeBox"));
  QVERIFY(loadMode);
  loadMode->setCurrentIndex(loadMode->findData(QStringLiteral("mmap")));
  QCOMPARE(dialog.options().loadMode, QStringLiteral("mmap"));
  loadMode->setCurrentIndex(loadMode->findData(QStringLiteral("mlock")));
  QCOMPARE(dialog.options().loadMode, QStringLiteral("mlock"));
  QCOMPARE(dialog.options().contextLength, 1024);
  QCOMPARE(dialog.options().kvCacheMiB, 2);
  QCOMPARE(dialog.options().kvBlockSize, 32);
  QVERIFY(dialog.options().isBatchInvariant);
  QVERIFY2(dialog.kvCapacityText().contains(QLocale().toString(2048)), qPrintable(dialog.kvCapacityText()));
  QVERIFY(dialog.kvCapacityText().contains(QLocale().toString(2.0, 'f', 1)));

  dialog.setOptions(EngineLoadOptions{});
  QCOMPARE(dialog.options().loadMode, QStringLiteral("auto"));
  QCOMPARE(dialog.options().kvCacheMiB, 0);
  QVERIFY(!dialog.options().isBatchInvariant);
  QVERIFY(dialog.kvCapacityText().contains(QStringLiteral("engine sizes")));

  EngineSettingsDialog noModel(o, 0);
  QVERIFY(noModel.kvCapacityText().contains(QStringLiteral("Open a model")));
}

void TestEngineSettings::workerAppliesKvBudgetAndBlockSize() {
  if (m_modelPath.isEmpty()) QSKIP(qPrintable(m_skipReason));
  EngineController engine;
  QSignalSpy loaded(&engine, &EngineController::modelLoaded);
  QSignalSpy snapshots(&engine, &EngineController::kvSnapshotReady);
  EngineLoadOptions o;
  o.kvCacheMiB = 1;
  o.kvBlockSize = 8;
  engine.loadModel(m_modelPath, o);
  QTRY_VERIFY_WITH_TIMEOUT(loaded.count() == 1, kTimeoutMs);
  QTRY_VERIFY_WITH_TIMEOUT(!lastPool(snapshots).isEmpty(), kTimeoutMs);
  const KvMapSnapshot pool = lastPool(snapshots);
  QCOMPARE(pool.stats.block_size, 8);
  // As many blocks as 1 MiB holds, not fewer than one block less (the budget is not wasted).
  const quint64 budget = 1u << 20;
  QVERIFY(pool.bytesPerBlock > 0);
  QCOMPARE(quint64(pool.numBlocks()), budget / pool.bytesPerBlock);

  // The same model with the defaults: 16-token blocks and another pool size.
  QSignalSpy reloaded(&engine, &EngineController::modelLoaded);
  snapshots.clear();
  engine.loadModel(m_modelPath);
  QTRY_VERIFY_WITH_TIMEOUT(reloaded.count() == 1, kTimeoutMs);
  QTRY_VERIFY_WITH_TIMEOUT(!lastPool(snapshots).isEmpty(), kTimeoutMs);
  QCOMPARE(lastPool(snapshots).stats.block_size, 16);
}

void TestEngineSettings::memoryEstimateMatchesMeasuredKvPool() {
  // Issue 19: the Memory tab estimated one context while the pool holds four (+300%). Now the
  // estimate follows the engine's rule and Engine Settings; within 5% of the measured pool.
  if (m_modelPath.isEmpty()) QSKIP(qPrintable(m_skipReason));
  auto details = readModelDetails(m_modelPath);
  QVERIFY(details);
  EngineController engine;
  MemoryPanel panel(&engine);
  panel.setModelSummary(details->summary);
  struct Case {
    const char* name;
    EngineLoadOptions options;
  };
  EngineLoadOptions small;
  small.kvCacheMiB = 1;
  small.kvBlockSize = 8;
  EngineLoadOptions shortContext;
  shortContext.contextLength = 64;
  for (const Case& c : {Case{"defaults", {}}, Case{"1 MiB, blocks of 8", small}, Case{"context 64", shortContext}}) {
    panel.setEngineOptions(c.options);
    const MemoryModel::Row* before = panel.model()->findRow(QStringLiteral("KV cache"));
    QVERIFY(before && before->estimateBytes > 0);
    const qint64 estimateBeforeLoad = before->estimateBytes;
    QSignalSpy loaded(&engine, &EngineController::modelLoaded);
    // The worker samples memory right after it announces the load; the row still shows the
    // previous case's pool until that sample arrives (a CI run read the stale one).
    QSignalSpy sampled(&engine, &EngineController::memorySampled);
    qsizetype samplesAtLoad = -1;
    const QMetaObject::Connection atLoad =
        connect(&engine, &EngineController::modelLoaded, this, [&] { samplesAtLoad = sampled.count(); });
    engine.loadModel(m_modelPath, c.options);
    QTRY_VERIFY_WITH_TIMEOUT(loaded.count() == 1, kTimeoutMs);
    QTRY_VERIFY_WITH_TIMEOUT(samplesAtLoad >= 0 && sampled.count() > samplesAtLoad, kTimeoutMs);
    disconnect(atLoad);
    QVERIFY(panel.model()->findRow(QStringLiteral("KV cache")) &&
            panel.model()->findRow(QStringLiteral("KV cache"))->measuredBytes > 0);
    const MemoryModel::Row* kv = panel.model()->findRow(QStringLiteral("KV cache"));
    const double error = std::abs(double(kv->estimateBytes - kv->measuredBytes)) / double(kv->measuredBytes);
    qInfo("%s: KV estimate %lld bytes before the load, %lld after, measured %lld (%.2f%%); %s", c.name,
          estimateBeforeLoad, kv->estimateBytes, kv->measuredBytes, 100 * error, qPrintable(kv->source));
    QVERIFY2(error <= 0.05, c.name);
    QCOMPARE(estimateBeforeLoad, kv->estimateBytes);  // the load changed nothing the estimate knew
    QVERIFY(kv->source.contains(QStringLiteral("blocks of")));
  }
}

void TestEngineSettings::windowReloadsWithNewSettings() {
  if (m_modelPath.isEmpty()) QSKIP(qPrintable(m_skipReason));
  MainWindow window;
  QSignalSpy snapshots(window.engine(), &EngineController::kvSnapshotReady);
  window.openModel(m_modelPath);
  QTRY_VERIFY_WITH_TIMEOUT(window.engine()->hasModel() && !window.engine()->isLoading(), kTimeoutMs);
  QTRY_VERIFY_WITH_TIMEOUT(!lastPool(snapshots).isEmpty(), kTimeoutMs);
  QCOMPARE(lastPool(snapshots).stats.block_size, 16);

  EngineLoadOptions o;
  o.kvBlockSize = 4;
  o.kvCacheMiB = 1;
  QSignalSpy loaded(window.engine(), &EngineController::modelLoaded);
  snapshots.clear();
  window.applyEngineSettings(o);
  QTRY_VERIFY_WITH_TIMEOUT(loaded.count() == 1, kTimeoutMs);
  QTRY_VERIFY_WITH_TIMEOUT(!lastPool(snapshots).isEmpty(), kTimeoutMs);
  QCOMPARE(lastPool(snapshots).stats.block_size, 4);
  QCOMPARE(loadEngineSettings().kvBlockSize, 4);  // kept for the next start
}

void TestEngineSettings::deviceSettingsRoundTrip() {
  QCOMPARE(loadEngineSettings().device, QStringLiteral("auto"));  // nothing saved yet
  QCOMPARE(loadEngineSettings().kvCacheFraction, 0.0);
  EngineLoadOptions o;
  o.device = QStringLiteral("cuda:1");
  o.kvCacheFraction = 0.85;
  saveEngineSettings(o);
  QCOMPARE(QSettings().value(QStringLiteral("engine/device")).toString(), QStringLiteral("cuda:1"));
  QCOMPARE(loadEngineSettings().device, QStringLiteral("cuda:1"));
  QCOMPARE(loadEngineSettings().kvCacheFraction, 0.85);
  o.device = QStringLiteral("cpu");
  saveEngineSettings(o);
  QCOMPARE(loadEngineSettings().device, QStringLiteral("cpu"));
  // Hand-edited nonsense reads as the defaults.
  QSettings().setValue(QStringLiteral("engine/device"), QStringLiteral("gpu"));
  QSettings().setValue(QStringLiteral("engine/kvCacheFraction"), 1.5);
  QCOMPARE(loadEngineSettings().device, QStringLiteral("auto"));
  QCOMPARE(loadEngineSettings().kvCacheFraction, 0.0);
}

void TestEngineSettings::deviceListFromMadeUpGpus() {
  iwb::ComputeDeviceInfo cpu;
  cpu.name = "Test CPU 9000";
  const DeviceList withGpu = makeDeviceList(cpu, std::vector<iwb::ComputeDeviceInfo>{madeUpGpu()});
  QCOMPARE(withGpu.choices.size(), 3);
  QCOMPARE(withGpu.choices.at(0).id, QStringLiteral("auto"));
  QCOMPARE(withGpu.choices.at(0).label, QStringLiteral("Automatic (CUDA if present)"));
  QCOMPARE(withGpu.choices.at(1).label, QStringLiteral("CPU — Test CPU 9000"));
  QCOMPARE(withGpu.choices.at(2).id, QStringLiteral("cuda:0"));
  QCOMPARE(withGpu.choices.at(2).label, QStringLiteral("cuda:0 — NVIDIA H100 80GB HBM3, 79.6 GiB"));
  QVERIFY(withGpu.cudaUnavailableReason.isEmpty());
  QCOMPARE(withGpu.indexOf(QStringLiteral("cuda:0")), 2);

  const DeviceList noDriver =
      makeDeviceList(cpu, iwb::make_error(iwb::ErrorCode::NotFound, "no CUDA device: driver not found"));
  QCOMPARE(noDriver.choices.size(), 2);
  QCOMPARE(noDriver.cudaUnavailableReason, QStringLiteral("No CUDA device: driver not found"));
  const DeviceList noBuild = makeDeviceList(cpu, iwb::make_error(iwb::ErrorCode::Unsupported, "built without CUDA"));
  QCOMPARE(noBuild.cudaUnavailableReason, QStringLiteral("No CUDA device: built without CUDA"));
  QVERIFY(!makeDeviceList(cpu, std::vector<iwb::ComputeDeviceInfo>{}).cudaUnavailableReason.isEmpty());
}

void TestEngineSettings::dialogListsDevicesAndKeepsTheChoice() {
  EngineLoadOptions o;
  o.device = QStringLiteral("cpu");
  EngineSettingsDialog dialog(o, 0);
  // This machine as it is: the CPU always; a CUDA entry only with a device, else the reason.
  const QStringList ids = dialog.deviceIds();
  QVERIFY(ids.contains(QStringLiteral("auto")));
  QVERIFY(ids.contains(QStringLiteral("cpu")));
  QCOMPARE(dialog.options().device, QStringLiteral("cpu"));
  QVERIFY(dialog.deviceText().startsWith(QStringLiteral("CPU")));
  auto* reason = dialog.findChild<QLabel*>(QStringLiteral("engineDeviceUnavailable"));
  QVERIFY(reason);
  if (hasCudaDevice()) {
    QVERIFY(ids.contains(QStringLiteral("cuda:0")));
    QVERIFY(dialog.deviceUnavailableText().isEmpty());
  } else {
    for (const QString& id : ids) QVERIFY2(!id.startsWith(QStringLiteral("cuda:")), qPrintable(id));
    QVERIFY2(dialog.deviceUnavailableText().startsWith(QStringLiteral("No CUDA device")),
             qPrintable(dialog.deviceUnavailableText()));
    QVERIFY(!reason->isEnabled());  // greyed
  }

  // With a (made-up) GPU the user picks it, and the GPU's KV share becomes editable.
  iwb::ComputeDeviceInfo cpu;
  cpu.name = "Test CPU";
  dialog.setDeviceList(makeDeviceList(cpu, std::vector<iwb::ComputeDeviceInfo>{madeUpGpu()}));
  QCOMPARE(dialog.options().device, QStringLiteral("cpu"));  // the selection survives a new list
  auto* box = dialog.findChild<QComboBox*>(QStringLiteral("engineDeviceBox"));
  auto* fraction = dialog.findChild<QDoubleSpinBox*>(QStringLiteral("kvFractionBox"));
  QVERIFY(box && fraction);
  QVERIFY(!fraction->isEnabled());  // the CPU has no GPU memory to share
  box->setCurrentIndex(box->findData(QStringLiteral("cuda:0")));
  QVERIFY(fraction->isEnabled());
  fraction->setValue(80);
  QCOMPARE(dialog.options().device, QStringLiteral("cuda:0"));
  QCOMPARE(dialog.options().kvCacheFraction, 0.8);
  QVERIFY(dialog.deviceUnavailableText().isEmpty());

  // Saved and read back by a new dialog: the same choice.
  saveEngineSettings(dialog.options());
  EngineSettingsDialog again(loadEngineSettings(), 0);
  again.setDeviceList(makeDeviceList(cpu, std::vector<iwb::ComputeDeviceInfo>{madeUpGpu()}));
  QCOMPARE(again.options().device, QStringLiteral("cuda:0"));
  QCOMPARE(again.options().kvCacheFraction, 0.8);

  // A device chosen earlier that is absent now stays chosen, marked.
  again.setDeviceList(makeDeviceList(cpu, iwb::make_error(iwb::ErrorCode::NotFound, "no CUDA device: none")));
  QCOMPARE(again.options().device, QStringLiteral("cuda:0"));
  QVERIFY(again.deviceText().contains(QStringLiteral("not found now")));
  QCOMPARE(again.deviceUnavailableText(), QStringLiteral("No CUDA device: none"));
  again.setOptions(EngineLoadOptions{});  // Restore Defaults
  QCOMPARE(again.options().device, QStringLiteral("auto"));
}

void TestEngineSettings::engineOptionsOfADeviceChoice() {
  EngineLoadOptions o;
  o.kvCacheFraction = 0.7;
  o.kvBlockSize = 32;
  o.device = QStringLiteral("cuda:0");
  iwb::EngineOptions e = toEngineOptions(o, false);
  QCOMPARE(e.device, std::string("cuda:0"));
  QCOMPARE(e.kv_cache_fraction, 0.7);
  QCOMPARE(e.kv_block_size, 32);
  o.device = QStringLiteral("auto");
  QCOMPARE(toEngineOptions(o, true).kv_cache_fraction, 0.7);   // auto lands on the GPU
  QCOMPARE(toEngineOptions(o, false).kv_cache_fraction, 0.0);  // auto lands on the CPU: its own budget
  o.device = QStringLiteral("cpu");
  QCOMPARE(toEngineOptions(o, true).kv_cache_fraction, 0.0);
  QCOMPARE(toEngineOptions(o, true).device, std::string("cpu"));
}

void TestEngineSettings::loadedModelSaysWhereItRuns() {
  if (m_modelPath.isEmpty()) QSKIP(qPrintable(m_skipReason));
  EngineController engine;
  QSignalSpy loaded(&engine, &EngineController::modelLoaded);
  EngineLoadOptions o;
  o.device = QStringLiteral("cpu");
  engine.loadModel(m_modelPath, o);
  QTRY_VERIFY_WITH_TIMEOUT(loaded.count() == 1, kTimeoutMs);
  QCOMPARE(engine.model().deviceId, QStringLiteral("cpu"));
  QCOMPARE(engine.model().deviceName, QString::fromStdString(iwb::describe_cpu_device().name));
}

void TestEngineSettings::failedCudaLoadOffersTheCpu() {
  if (m_modelPath.isEmpty()) QSKIP(qPrintable(m_skipReason));
  if (hasCudaDevice())
    QSKIP("this machine has a CUDA device: test_ui_cuda_load_fallback makes a cuda:0 load fail here");
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
  QVERIFY2(message.contains(QStringLiteral("CUDA"), Qt::CaseInsensitive), qPrintable(message));
  QCOMPARE(failed.at(0).at(1).toString(), message);
  QVERIFY(!engine.hasModel());
  QVERIFY(!engine.isLoading());

  engine.loadOnCpu(m_modelPath);
  QTRY_VERIFY_WITH_TIMEOUT(loaded.count() == 1, kTimeoutMs);
  QCOMPARE(engine.model().deviceId, QStringLiteral("cpu"));
  QCOMPARE(engine.lastLoadOptions().device, QStringLiteral("cpu"));
  QCOMPARE(engine.lastLoadOptions().kvBlockSize, 8);  // the other settings of the failed load stay
  QCOMPARE(deviceFailed.count(), 1);
}

void TestEngineSettings::windowOffersTheCpuAfterAFailedCudaLoad() {
  if (m_modelPath.isEmpty()) QSKIP(qPrintable(m_skipReason));
  if (hasCudaDevice())
    QSKIP("this machine has a CUDA device: test_ui_cuda_load_fallback makes a cuda:0 load fail here");
  EngineLoadOptions o;
  o.device = QStringLiteral("cuda:0");
  saveEngineSettings(o);
  MainWindow window;
  QSignalSpy failed(window.engine(), &EngineController::modelLoadFailed);
  window.openModel(m_modelPath);
  QTRY_VERIFY_WITH_TIMEOUT(failed.count() == 1, kTimeoutMs);
  MessageBar* bar = window.messageBar();
  QTRY_VERIFY(!bar->isHidden());
  QCOMPARE(bar->kind(), MessageBar::Kind::Error);
  QVERIFY2(bar->title().contains(QStringLiteral("cuda:0")), qPrintable(bar->title()));
  QVERIFY(!bar->detail().isEmpty());
  QCOMPARE(bar->actionText(), QStringLiteral("Load on the CPU"));

  bar->triggerAction();
  QVERIFY(bar->isHidden());
  QTRY_VERIFY_WITH_TIMEOUT(window.engine()->hasModel() && !window.engine()->isLoading(), kTimeoutMs);
  QCOMPARE(window.engine()->model().deviceId, QStringLiteral("cpu"));
  auto* label = window.statusBar()->findChild<QLabel*>(QStringLiteral("deviceLabel"));
  QVERIFY(label);
  QCOMPARE(label->text(), QStringLiteral("CPU"));
  QVERIFY(!label->isHidden());
  QCOMPARE(loadEngineSettings().device, QStringLiteral("cuda:0"));  // the user's choice is not rewritten
}

QTEST_MAIN(TestEngineSettings)
#include "test_engine_settings.moc"
