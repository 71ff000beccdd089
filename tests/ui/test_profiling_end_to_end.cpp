// Profiling a real model end to end: the aidreams 260K llama2.c model (converted to GGUF for
// the test) loaded through the engine controller with "Profile kernels" on; a short reply
// must bring profile snapshots whose roofline has prefill and decode points, the request's
// timings with its predicted work, token times and memory samples — and nothing of the
// profile when profiling is off. Then the main window's Roofline, Metrics and Memory tabs.
#include "aidreams_fixture.h"
#include "worker/engine_controller.h"
#include "main_window/main_window.h"
#include "memory/memory_model.h"
#include "memory/memory_panel.h"
#include "metrics/metrics_model.h"
#include "metrics/metrics_panel.h"
#include "roofline/roofline_model.h"
#include "roofline/roofline_panel.h"

#include <QAction>
#include <QMenuBar>
#include <QSettings>
#include <QSignalSpy>
#include <QStandardPaths>
#include <QTabWidget>
#include <QTemporaryDir>
#include <QTest>

using namespace iwb::ui;
using iwb::OpKind;
using iwb::Phase;

namespace {

constexpr int kTimeoutMs = 30000;
constexpr int kMaxTokens = 12;

GenerationInput greedyInput(const QString& message) {
  GenerationInput input;
  input.messages = {{QStringLiteral("user"), message}};
  input.sampling.temperature = 0;
  input.sampling.maxTokens = kMaxTokens;
  return input;
}

}  // namespace

class TestProfilingEndToEnd : public QObject {
  Q_OBJECT

 private slots:
  void initTestCase();
  void profiledReplyReachesTheRoofline();
  void unprofiledReplyHasTimingsOnly();
  void mainWindowShowsTheTabs();

 private:
  QTemporaryDir m_dir;
  QString m_modelPath;
};

void TestProfilingEndToEnd::initTestCase() {
  QVERIFY(m_dir.isValid());
  QSettings::setDefaultFormat(QSettings::IniFormat);
  QSettings::setPath(QSettings::IniFormat, QSettings::UserScope, m_dir.filePath(QStringLiteral("settings")));
  QCoreApplication::setOrganizationName(QStringLiteral("Inference Workbench Tests"));
  QCoreApplication::setApplicationName(QStringLiteral("test_profiling_end_to_end"));
  QStandardPaths::setTestModeEnabled(true);

  QString why;
  m_modelPath = iwb::test::convertAidreamsModel(m_dir.path(), &why);
  if (m_modelPath.isEmpty()) {
    if (!iwb::test::hasAidreamsModel()) QSKIP(qPrintable(why));
    QFAIL(qPrintable(why));
  }
}

void TestProfilingEndToEnd::profiledReplyReachesTheRoofline() {
  EngineController engine;
  QSignalSpy profiling(&engine, &EngineController::profilingChanged);
  engine.setProfiling(true);  // before the load: the engine gets it as soon as it exists
  QCOMPARE(profiling.count(), 1);
  QVERIFY(engine.isProfiling());
  QVERIFY(iwb::test::loadModelAndWait(engine, m_modelPath, kTimeoutMs));

  QSignalSpy snapshots(&engine, &EngineController::profileSnapshotReady);
  QSignalSpy measured(&engine, &EngineController::requestMeasured);
  QSignalSpy tokenTimes(&engine, &EngineController::tokenTimesReady);
  QSignalSpy memory(&engine, &EngineController::memorySampled);
  QSignalSpy finished(&engine, &EngineController::generationFinished);
  const quint64 id = engine.generate(greedyInput(QStringLiteral("Once upon a time")));
  QVERIFY(QTest::qWaitFor([&] { return finished.count() == 1; }, kTimeoutMs));
  const auto stats = finished.at(0).at(1).value<GenerationStats>();
  QVERIFY2(stats.numGeneratedTokens > 1, qPrintable(stats.finishReason));

  // Snapshots arrived, and the last one (sent when the engine fell idle) holds both phases.
  // The idle flush follows the finished signal through the queue: wait for it.
  QVERIFY(QTest::qWaitFor(
      [&] {
        if (snapshots.isEmpty()) return false;
        const auto s = snapshots.last().at(0).value<iwb::ProfileSnapshot>();
        return s.last_prefill.has_value() && s.last_decode.has_value();
      },
      kTimeoutMs));
  const auto last = snapshots.last().at(0).value<iwb::ProfileSnapshot>();
  QVERIFY(last.last_prefill.has_value());
  QVERIFY(last.last_decode.has_value());
  QCOMPARE(last.running_num_steps, qint64(stats.numGeneratedTokens));  // one prefill + n - 1 decodes
  QCOMPARE(last.last_prefill->num_tokens, stats.numPromptTokens);
  for (const iwb::KernelRecord& r : last.last_decode->kernels) QCOMPARE(r.phase, Phase::Decode);

  RooflineModel roofline;
  roofline.setSnapshot(last);
  const RooflinePoint* prefill = roofline.findPoint(OpKind::Matmul, Phase::Prefill, false);
  const RooflinePoint* decode = roofline.findPoint(OpKind::Matmul, Phase::Decode, false);
  QVERIFY(prefill && decode);
  QVERIFY(prefill->isPlottable() && decode->isPlottable());
  QVERIFY(prefill->seconds > 0 && decode->seconds > 0);
  // The prompt's tokens share each weight read: its matmuls sit well right of the decode's.
  QVERIFY2(prefill->intensity > 2 * decode->intensity,
           qPrintable(QStringLiteral("%1 vs %2").arg(prefill->intensity).arg(decode->intensity)));
  QVERIFY(!prefill->shapes.isEmpty());
  QVERIFY(roofline.findPoint(OpKind::Attention, Phase::Decode, false));
  const qint64 decodeCallsPerStep = decode->numCalls;
  roofline.setSource(RooflineSource::Running);  // rebuilds the points (the pointers above go stale)
  QCOMPARE(roofline.findPoint(OpKind::Matmul, Phase::Decode, false)->numCalls,
           decodeCallsPerStep * (stats.numGeneratedTokens - 1));

  // The request's timings, with the predicted work MBU/MFU need.
  QCOMPARE(measured.count(), 1);
  const auto m = measured.at(0).at(0).value<RequestMeasurement>();
  QCOMPARE(m.requestId, id);
  QCOMPARE(m.numGeneratedTokens, stats.numGeneratedTokens);
  QCOMPARE(static_cast<int>(m.timing.token_seconds.size()), stats.numGeneratedTokens);
  QVERIFY(m.cost.has_value());
  QVERIFY(m.cost->prefill.flops > 0 && m.cost->decode.bytes > 0);
  // Every token's time came live, on the session clock, before the request's measurement.
  int numTimes = 0;
  double previous = 0;
  for (const QList<QVariant>& call : tokenTimes) {
    QCOMPARE(call.at(0).toULongLong(), id);
    for (double t : call.at(1).value<QList<double>>()) {
      QVERIFY(t >= previous);
      previous = t;
      ++numTimes;
    }
  }
  QCOMPARE(numTimes, stats.numGeneratedTokens);
  QVERIFY(qAbs(previous - (m.addedAtSeconds + m.timing.token_seconds.back())) < 1e-9);
  MetricsModel metrics;
  metrics.addRequest(m);
  QCOMPARE(metrics.row(0).metrics.inter_token.count, qint64(stats.numGeneratedTokens - 1));

  // Memory: sampled after the reply with the cache holding the prompt and all but the last token.
  QVERIFY(QTest::qWaitFor([&] { return memory.count() >= 1; }, kTimeoutMs));
  const auto sample = memory.last().at(0).value<MemorySample>();
  QVERIFY(sample.isValid);
  QVERIFY(sample.contextLength > 0);
  QCOMPARE(sample.kvPositions, qint64(stats.numPromptTokens + stats.numGeneratedTokens - 1));

  // After a reset the running aggregate holds only the next reply's steps.
  engine.resetProfile();
  snapshots.clear();
  engine.generate(greedyInput(QStringLiteral("The cat")));
  QVERIFY(QTest::qWaitFor([&] { return finished.count() == 2; }, kTimeoutMs));
  const auto second = finished.at(1).at(1).value<GenerationStats>();
  QVERIFY(snapshots.count() >= 1);
  QCOMPARE(snapshots.last().at(0).value<iwb::ProfileSnapshot>().running_num_steps,
           qint64(second.numGeneratedTokens));
}

void TestProfilingEndToEnd::unprofiledReplyHasTimingsOnly() {
  EngineController engine;
  QVERIFY(!engine.isProfiling());
  QVERIFY(iwb::test::loadModelAndWait(engine, m_modelPath, kTimeoutMs));
  QSignalSpy snapshots(&engine, &EngineController::profileSnapshotReady);
  QSignalSpy measured(&engine, &EngineController::requestMeasured);
  QSignalSpy memory(&engine, &EngineController::memorySampled);
  QSignalSpy finished(&engine, &EngineController::generationFinished);
  engine.generate(greedyInput(QStringLiteral("Hello")));
  QVERIFY(QTest::qWaitFor([&] { return finished.count() == 1; }, kTimeoutMs));
  QCOMPARE(snapshots.count(), 0);
  QCOMPARE(measured.count(), 1);
  // The cache's positions are known without the profiler too.
  const auto stats = finished.at(0).at(1).value<GenerationStats>();
  // The idle sample follows the finished signal through the same queue: wait for it rather
  // than assume it was delivered in the same event batch.
  const qint64 expected = stats.numPromptTokens + stats.numGeneratedTokens - 1;
  QVERIFY(QTest::qWaitFor(
      [&] { return !memory.isEmpty() && memory.last().at(0).value<MemorySample>().kvPositions == expected; },
      kTimeoutMs));

  // Switched on between replies: the next reply is profiled.
  engine.setProfiling(true);
  engine.generate(greedyInput(QStringLiteral("Hello again")));
  QVERIFY(QTest::qWaitFor([&] { return finished.count() == 2; }, kTimeoutMs));
  QVERIFY(snapshots.count() >= 1);
}

void TestProfilingEndToEnd::mainWindowShowsTheTabs() {
  MainWindow window(nullptr, m_dir.filePath(QStringLiteral("window/conversations.sqlite")),
                    m_dir.filePath(QStringLiteral("window/results.sqlite")));
  QStringList names;
  for (int i = 0; i < window.tabs()->count(); ++i) names << window.tabs()->tabText(i);
  for (const char* name : {"Chat", "Model", "Roofline", "Metrics", "Memory"}) {
    QVERIFY2(names.contains(QLatin1String(name)), qPrintable(names.join(QLatin1Char(','))));
  }
  QVERIFY(window.showTab(QStringLiteral("roofline")));
  QCOMPARE(window.tabs()->currentWidget(), window.rooflinePanel());
  QVERIFY(!window.showTab(QStringLiteral("nowhere")));
  QVERIFY(!window.showTab(QString()));
  // Names with a space: as the tab reads, or as one word on a command line.
  QVERIFY(window.tabNames().contains(QStringLiteral("kv-cache")));
  QVERIFY(window.tabNames().contains(QStringLiteral("roofline")));
  for (const char* name : {"kv-cache", "KV Cache", "kv_cache", "kvcache"}) {
    window.showTab(QStringLiteral("chat"));
    QVERIFY2(window.showTab(QLatin1String(name)), name);
    QCOMPARE(window.tabs()->tabText(window.tabs()->currentIndex()).remove(QLatin1Char('&')),
             QStringLiteral("KV Cache"));
  }

  // View → Profile Kernels switches the engine.
  QAction* action = window.rooflinePanel()->profilingAction();
  bool isInViewMenu = false;
  for (QAction* menu : window.menuBar()->actions()) {
    if (menu->menu() && menu->menu()->actions().contains(action)) isInViewMenu = true;
  }
  QVERIFY(isInViewMenu);
  action->trigger();
  QVERIFY(window.engine()->isProfiling());

  // Opening a model: the memory estimate first, then the measured side once the engine has it.
  QSignalSpy loaded(window.engine(), &EngineController::modelLoaded);
  window.openModel(m_modelPath);
  QVERIFY(QTest::qWaitFor([&] { return loaded.count() == 1; }, kTimeoutMs));
  MemoryModel* memory = window.memoryPanel()->model();
  QVERIFY(memory->hasModel());
  QCOMPARE(memory->context(), loaded.at(0).at(0).value<LoadedModel>().contextLength);
  QVERIFY(QTest::qWaitFor([&] { return memory->isLoaded(); }, kTimeoutMs));
  QVERIFY(memory->findRow(QStringLiteral("Weights"))->measuredBytes >= 0);
  QVERIFY2(window.memoryPanel()->fitText().startsWith(QLatin1String("Fits")), qPrintable(window.memoryPanel()->fitText()));

  // A reply fills the Roofline and Metrics tabs.
  QSignalSpy finished(window.engine(), &EngineController::generationFinished);
  window.engine()->generate(greedyInput(QStringLiteral("Once upon a time")));
  QVERIFY(QTest::qWaitFor([&] { return finished.count() == 1; }, kTimeoutMs));
  QVERIFY(QTest::qWaitFor([&] { return window.metricsPanel()->model()->rowCount() == 1; }, kTimeoutMs));
  QVERIFY(window.rooflinePanel()->model()->findPoint(OpKind::Matmul, Phase::Prefill, false));
  QVERIFY(window.rooflinePanel()->model()->findPoint(OpKind::Matmul, Phase::Decode, false));
  QVERIFY(window.metricsPanel()->summaryText().contains(QLatin1String("TTFT")));
  QVERIFY(!window.metricsPanel()->model()->interTokenSeries().isEmpty());
}

QTEST_MAIN(TestProfilingEndToEnd)
#include "test_profiling_end_to_end.moc"
