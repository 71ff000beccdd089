// Engine load settings: kept in QSettings, edited in the dialog, and applied by the worker
// when the model loads (the KV pool's memory and block size reach the engine).
#include "aidreams_fixture.h"
#include "engine/engine_controller.h"
#include "main_window/main_window.h"
#include "settings/engine_settings.h"

#include <QSettings>
#include <QSignalSpy>
#include <QStandardPaths>
#include <QTemporaryDir>
#include <QTest>

using namespace iwb::ui;

namespace {

constexpr int kTimeoutMs = 60000;

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
  void windowReloadsWithNewSettings();

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
  saveEngineSettings(o);
  const EngineLoadOptions read = loadEngineSettings();
  QCOMPARE(read.contextLength, 2048);
  QCOMPARE(read.numThreads, 3);
  QCOMPARE(read.kvCacheMiB, 96);
  QCOMPARE(read.kvBlockSize, 8);
  QCOMPARE(read.maxBatchTokens, 64);
  QVERIFY(read.isBatchInvariant);
}

void TestEngineSettings::absentSettingsAreEngineDefaults() {
  QSettings().setValue(QStringLiteral("engine/kvBlockSize"), -5);  // a hand-edited file
  const EngineLoadOptions read = loadEngineSettings();
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
  // 1 KiB per position: 2 MiB hold 2,048 positions, two contexts of 1,024.
  EngineSettingsDialog dialog(o, 1024);
  QCOMPARE(dialog.options().contextLength, 1024);
  QCOMPARE(dialog.options().kvCacheMiB, 2);
  QCOMPARE(dialog.options().kvBlockSize, 32);
  QVERIFY(dialog.options().isBatchInvariant);
  QVERIFY2(dialog.kvCapacityText().contains(QLocale().toString(2048)), qPrintable(dialog.kvCapacityText()));
  QVERIFY(dialog.kvCapacityText().contains(QLocale().toString(2.0, 'f', 1)));

  dialog.setOptions(EngineLoadOptions{});
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

QTEST_MAIN(TestEngineSettings)
#include "test_engine_settings.moc"
