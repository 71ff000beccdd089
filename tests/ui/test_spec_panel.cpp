// The Speculative tab. Its model from scripted values (rows, the baseline's speedup, overall
// sums, the suggested K, clearing) and the charts drawing them; the settings round trip and a
// bad one refused with its reason; then a real run on the aidreams model through the engine
// controller: prompt lookup turned on, a baseline and a speculative run of the same greedy
// prompt, their reports in the table, per-step signals, the reply view's highlighted drafts.
#include "aidreams_fixture.h"
#include "chat/message_list_model.h"
#include "spec/spec_panel.h"
#include "spec/spec_runs_model.h"
#include "worker/engine_controller.h"

#include "iwb/engine/synth/synth_model.h"
#include "iwb/engine/synth/synth_preset.h"

#include <qcustomplot.h>
#include <QComboBox>
#include <QCoreApplication>
#include <QDoubleSpinBox>
#include <QLabel>
#include <QPlainTextEdit>
#include <QSettings>
#include <QSignalSpy>
#include <QStandardItemModel>
#include <QStandardPaths>
#include <QTemporaryDir>
#include <QTest>

using namespace iwb::ui;

namespace {

constexpr int kTimeoutMs = 60000;

SpeculationReport report(quint64 id, int k, int generated, double seconds, int drafted, int accepted) {
  SpeculationReport r;
  r.requestId = id;
  r.numDraftTokens = k;
  r.drafter = k == 0 ? QStringLiteral("none") : QStringLiteral("lookup");
  r.numGeneratedTokens = generated;
  r.generationSeconds = seconds;
  for (int i = 0; i < drafted; ++i) r.stats.record(k, i < accepted ? k : 0, i < accepted ? k + 1 : 1);
  r.stats.draft_seconds = 0.001 * drafted;
  r.stats.verify_seconds = 0.05 * drafted;
  return r;
}

int barCount(QWidget* panel, const char* plot) {
  auto* p = panel->findChild<QCustomPlot*>(QString::fromLatin1(plot));
  if (p == nullptr || p->plottableCount() == 0) return -1;
  auto* bars = qobject_cast<QCPBars*>(p->plottable(0));
  return bars ? bars->data()->size() : -1;
}

}  // namespace

class TestSpecPanel : public QObject {
  Q_OBJECT

  QTemporaryDir m_settingsDir;

 private slots:
  void initTestCase() {
    QVERIFY(m_settingsDir.isValid());
    QSettings::setDefaultFormat(QSettings::IniFormat);
    QSettings::setPath(QSettings::IniFormat, QSettings::UserScope, m_settingsDir.filePath(QStringLiteral("settings")));
    QCoreApplication::setOrganizationName(QStringLiteral("Inference Workbench Tests"));
    QCoreApplication::setApplicationName(QStringLiteral("test_spec_panel"));
    QStandardPaths::setTestModeEnabled(true);
  }

  void modelRowsSpeedupAndSuggestion() {
    SpecRunsModel model;
    QSignalSpy changed(&model, &SpecRunsModel::statsChanged);
    model.addReport(report(1, 0, 101, 10.0, 0, 0));   // plain: 10 tokens/s
    model.addReport(report(2, 4, 101, 4.0, 20, 15));  // 25 tokens/s
    QCOMPARE(model.rowCount(), 2);
    QCOMPARE(changed.count(), 2);
    QCOMPARE(model.baselineTokensPerSecond(), 10.0);
    QCOMPARE(model.speculativeTokensPerSecond(), 25.0);
    QCOMPARE(model.speedup(), 2.5);
    QCOMPARE(model.index(1, SpecRunsModel::Speedup).data().toString(), QStringLiteral("2.50×"));
    QCOMPARE(model.index(1, SpecRunsModel::Speedup).data(Qt::UserRole).toDouble(), 2.5);
    QCOMPARE(model.index(1, SpecRunsModel::Acceptance).data(Qt::UserRole).toDouble(), 0.75);
    QCOMPARE(model.index(0, SpecRunsModel::Acceptance).data().toString(), QStringLiteral("–"));
    QCOMPARE(model.index(1, SpecRunsModel::VerifyMs).data(Qt::UserRole).toDouble(), 50.0);

    SpeculationStep step;
    step.stats = report(2, 4, 0, 0, 10, 9).stats;
    model.addStep(step);
    model.addStep(step);
    QCOMPARE(model.overall().num_verify_steps, int64_t{20});
    QCOMPARE(model.steps().size(), 2);
    // High acceptance with cheap drafts: speculation pays, K > 0.
    const iwb::spec::DraftLengthSuggestion best = model.suggestion(model.overall(), 8);
    QVERIFY(best.num_draft_tokens > 0);
    QVERIFY(best.tokens_per_second > best.baseline_tokens_per_second);

    model.clear();
    QCOMPARE(model.rowCount(), 0);
    QVERIFY(model.overall().empty());
    QCOMPARE(model.speedup(), 0.0);
  }

  void panelDrawsAndRefusesBadSettings() {
    EngineController engine;
    SpecPanel panel(&engine);
    panel.model()->addReport(report(1, 0, 51, 5.0, 0, 0));
    panel.model()->addReport(report(2, 3, 51, 2.0, 10, 6));
    SpeculationStep step;
    step.stats = report(2, 3, 0, 0, 10, 6).stats;
    panel.model()->addStep(step);
    QCOMPARE(barCount(&panel, "acceptancePlot"), 3);  // positions 1..3
    QCOMPARE(barCount(&panel, "histogramPlot"), 4);   // accepted lengths 0..3
    QCOMPARE(barCount(&panel, "predictedPlot") >= 0, true);
    auto* summary = panel.findChild<QLabel*>(QStringLiteral("specSummary"));
    QVERIFY(summary->text().contains(QStringLiteral("60.0%")));
    QVERIFY(summary->text().contains(QStringLiteral("2.50×")));

    // A draft model without a file: refused before it reaches the engine.
    SpeculationSettings bad;
    bad.kind = QStringLiteral("draft");
    panel.setSettings(bad);
    QSignalSpy changed(&engine, &EngineController::speculationChanged);
    panel.apply();
    auto* status = panel.findChild<QLabel*>(QStringLiteral("specSettingsStatus"));
    QVERIFY2(status->text().contains(QStringLiteral("draft model file")), qPrintable(status->text()));
    QCOMPARE(changed.count(), 0);
    QCOMPARE(panel.settings().kind, QStringLiteral("draft"));
    // p-min goes from its spin box to the engine's config; the drafter's path only where it reads one.
    SpeculationSettings sure;
    sure.kind = QStringLiteral("mtp");
    sure.draftModelPath = QStringLiteral("/models/mtp-glm.gguf");
    sure.minProbability = 0.75;
    panel.setSettings(sure);
    QCOMPARE(panel.findChild<QDoubleSpinBox*>(QStringLiteral("specMinProbability"))->value(), 0.75);
    QCOMPARE(panel.settings(), sure);
    const iwb::Result<iwb::spec::SpeculativeConfig> config = sure.toConfig();
    QVERIFY(config.is_ok());
    QCOMPARE(config->draft_min_probability, 0.75f);
    QCOMPARE(config->draft_model_path, std::string("/models/mtp-glm.gguf"));
    sure.kind = QStringLiteral("lookup");
    QVERIFY(sure.toConfig()->draft_model_path.empty());
    panel.setSettings(bad);
    // Without a model the run is refused with a reason.
    QVERIFY(!panel.runComparison());
    // The tab fits the window's default 1280-pixel width.
    QVERIFY2(panel.minimumSizeHint().width() <= 1200, qPrintable(QString::number(panel.minimumSizeHint().width())));
  }

  // The chat's reply keeps where the accepted draft tokens are, adjacent ones as one run.
  void chatMarksDraftTokens() {
    MessageListModel messages;
    StoredMessage reply;
    reply.id = 7;
    reply.role = QStringLiteral("assistant");
    messages.append(reply, true);
    messages.appendText(0, QStringLiteral("def "));
    messages.appendText(0, QStringLiteral("summarize"));
    messages.markDraft(0, 4, 9);
    messages.appendText(0, QStringLiteral("(x)"));
    messages.markDraft(0, 13, 3);
    messages.markDraft(0, 0, 0);  // nothing
    const auto ranges = messages.index(0).data(MessageListModel::DraftRangesRole).value<QList<QPoint>>();
    QCOMPARE(ranges, (QList<QPoint>{QPoint(4, 12)}));
    QCOMPARE(messages.index(0).data(MessageListModel::RevisionRole).toInt(), 5);
  }

  // The MTP drafter is offered where the loaded model has a multi-token-prediction layer and
  // turned on through the engine like any drafter; greyed out, with the reason, where not.
  void mtpHeadOfferedWhereTheModelHasOne() {
    QTemporaryDir dir;
    auto synthesize = [&](const char* preset, const char* name) {
      iwb::synth::SynthOptions o;
      o.shape = *iwb::synth::find_synth_preset(preset);
      o.weight_type = "F32";
      o.num_threads = 2;
      o.output_path = dir.filePath(QString::fromLatin1(name)).toStdString();
      return iwb::synth::synthesize_model(o).is_ok() ? QString::fromStdString(o.output_path) : QString();
    };
    const QString glm = synthesize("test-glm4moe", "glm.gguf"), qwen = synthesize("test-qwen3", "qwen.gguf");
    QVERIFY(!glm.isEmpty() && !qwen.isEmpty());
    EngineController engine;
    SpecPanel panel(&engine);
    auto* kind = panel.findChild<QComboBox*>(QStringLiteral("specKind"));
    QVERIFY(kind != nullptr);
    auto* items = qobject_cast<QStandardItemModel*>(kind->model());
    QVERIFY(items != nullptr);
    QStandardItem* mtp = items->item(kind->findData(QStringLiteral("mtp")));
    QVERIFY(mtp != nullptr && mtp->isEnabled());  // nothing loaded: not ruled out

    QSignalSpy loaded(&engine, &EngineController::modelLoaded);
    engine.loadModel(glm);
    QVERIFY(QTest::qWaitFor([&] { return loaded.count() > 0; }, kTimeoutMs));
    QCOMPARE(engine.model().numMtpLayers, qint64{1});
    QVERIFY(mtp->isEnabled());
    SpeculationSettings on;
    on.kind = QStringLiteral("mtp");
    on.numDraftTokens = 2;
    panel.setSettings(on);
    QSignalSpy changed(&engine, &EngineController::speculationChanged);
    panel.apply();
    QVERIFY(QTest::qWaitFor([&] { return changed.count() > 0; }, kTimeoutMs));
    QVERIFY2(changed.first().at(1).toString().isEmpty(), qPrintable(changed.first().at(1).toString()));
    QCOMPARE(engine.speculation().kind, QStringLiteral("mtp"));
    panel.setSettings(SpeculationSettings{});
    panel.apply();
    QVERIFY(QTest::qWaitFor([&] { return changed.count() > 1; }, kTimeoutMs));

    engine.loadModel(qwen);
    QVERIFY(QTest::qWaitFor([&] { return loaded.count() > 1; }, kTimeoutMs));
    QCOMPARE(engine.model().numMtpLayers, qint64{0});
    QVERIFY(!mtp->isEnabled());
    QVERIFY(mtp->toolTip().contains(QStringLiteral("no multi-token-prediction layer")));
  }

  void realRunOnAidreams() {
    QTemporaryDir dir;
    QString why;
    const QString path = iwb::test::convertAidreamsModel(dir.path(), &why);
    if (path.isEmpty()) QSKIP(qPrintable(why));
    EngineController engine;
    SpecPanel panel(&engine);
    QSignalSpy loaded(&engine, &EngineController::modelLoaded);
    engine.loadModel(path);
    QVERIFY(QTest::qWaitFor([&] { return loaded.count() > 0; }, kTimeoutMs));

    SpeculationSettings on;
    on.kind = QStringLiteral("lookup");
    on.numDraftTokens = 4;
    panel.setSettings(on);
    QSignalSpy changed(&engine, &EngineController::speculationChanged);
    panel.apply();
    QVERIFY(QTest::qWaitFor([&] { return changed.count() > 0; }, kTimeoutMs));
    QVERIFY2(changed.first().at(1).toString().isEmpty(), qPrintable(changed.first().at(1).toString()));
    QCOMPARE(engine.speculation().kind, QStringLiteral("lookup"));

    panel.findChild<QPlainTextEdit*>()->setPlainText(
        QStringLiteral("The cat sat on the mat. The dog sat on the log. The cat sat on the"));
    QSignalSpy steps(&engine, &EngineController::speculationStepped);
    QSignalSpy finished(&panel, &SpecPanel::comparisonFinished);
    QVERIFY(panel.runComparison());
    QVERIFY(QTest::qWaitFor([&] { return finished.count() > 0; }, kTimeoutMs));
    QVERIFY(QTest::qWaitFor([&] { return panel.model()->rowCount() == 2; }, kTimeoutMs));
    QVERIFY(panel.model()->report(0).isBaseline());
    QVERIFY(!panel.model()->report(1).isBaseline());
    QVERIFY(panel.model()->report(1).stats.num_verify_steps > 0);
    QVERIFY(steps.count() > 0);
    QVERIFY(panel.model()->baselineTokensPerSecond() > 0);
    QVERIFY(panel.model()->speedup() > 0);
    if (panel.model()->report(1).stats.num_accepted > 0) {
      QVERIFY(panel.replyHtml().contains(QStringLiteral("background-color:#c8ecc8")));
    }
    // Turning it off: the chat decodes plainly again.
    SpeculationSettings off;
    panel.setSettings(off);
    panel.apply();
    QVERIFY(QTest::qWaitFor([&] { return changed.count() > 1; }, kTimeoutMs));
    QVERIFY(!engine.speculation().isEnabled());
  }
};

QTEST_MAIN(TestSpecPanel)
#include "test_spec_panel.moc"
