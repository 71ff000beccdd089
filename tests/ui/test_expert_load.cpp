// The Experts tab (issue 21): ExpertLoadModel's per-layer balance from hand-made snapshots (an
// even layer, a layer whose tokens all went to two experts, a dense model), the panel's summary
// and heatmap; then a synthetic qwen3moe generating through the worker thread, whose
// expert-load snapshots reach the panel with every layer's counts summing to k x tokens.
#include "aidreams_fixture.h"
#include "experts/expert_load_model.h"
#include "experts/expert_load_panel.h"
#include "iwb/engine/synth/synth_model.h"
#include "iwb/engine/synth/synth_preset.h"
#include "worker/engine_controller.h"

#include <qcustomplot.h>

#include <QSignalSpy>
#include <QTemporaryDir>
#include <QTest>

#include <cmath>

using namespace iwb::ui;

namespace {

constexpr int kTimeoutMs = 60000;

// 2 layers of 4 experts, 2 per token, 6 tokens: layer 0 spread evenly (3 each), layer 1 sent
// every token to experts 0 and 1.
iwb::ExpertLoadSnapshot handMade() {
  iwb::ExpertLoadSnapshot s;
  s.num_layers = 2;
  s.num_experts = 4;
  s.num_experts_used = 2;
  s.window_steps = 64;
  s.num_steps = 3;
  s.num_tokens = 6;
  s.last_step = 3;
  s.counts = {3, 3, 3, 3, 6, 6, 0, 0};
  return s;
}

}  // namespace

class TestExpertLoad : public QObject {
  Q_OBJECT

 private slots:
  void modelMeasuresEachLayersBalance() {
    ExpertLoadModel model;
    QSignalSpy changed(&model, &ExpertLoadModel::changed);
    model.setSnapshot(handMade());
    QCOMPARE(changed.count(), 1);
    QCOMPARE(model.rowCount(), 2);
    QCOMPARE(model.relativeLoad(0, 2), 1.0);  // 3 tokens against a mean of 6 x 2 / 4 = 3
    QCOMPARE(model.relativeLoad(1, 0), 2.0);
    QCOMPARE(model.relativeLoad(1, 3), 0.0);
    QCOMPARE(model.busiestExpert(1), 0);
    QCOMPARE(model.idleExperts(0), 0);
    QCOMPARE(model.idleExperts(1), 2);
    QCOMPARE(model.mostImbalancedLayer(), 1);
    QCOMPARE(model.index(0, ExpertLoadModel::ImbalanceColumn).data().toString(), QStringLiteral("1.00×"));
    QCOMPARE(model.index(1, ExpertLoadModel::ImbalanceColumn).data().toString(), QStringLiteral("2.00×"));
    QCOMPARE(model.index(1, ExpertLoadModel::BusiestShareColumn).data(Qt::UserRole).toDouble(), 0.5);
    QCOMPARE(model.index(1, ExpertLoadModel::IdleColumn).data().toString(), QStringLiteral("2 of 4"));

    // A dense model: no rows, nothing to rank.
    iwb::ExpertLoadSnapshot dense;
    dense.num_layers = 28;
    model.setSnapshot(dense);
    QCOMPARE(model.rowCount(), 0);
    QVERIFY(!model.isMoe());
    QCOMPARE(model.mostImbalancedLayer(), -1);
  }

  void panelSummarisesAndDrawsTheWindow() {
    EngineController engine;
    ExpertLoadPanel panel(&engine);
    QVERIFY(panel.summaryText().contains(QStringLiteral("No model is loaded")));
    panel.setSnapshot(handMade());
    QVERIFY2(panel.summaryText().contains(QStringLiteral("4 experts per layer, 2 per token")),
             qPrintable(panel.summaryText()));
    QVERIFY2(panel.summaryText().contains(QStringLiteral("layer 1, whose expert 0 took 2.00×")),
             qPrintable(panel.summaryText()));
    auto* map = qobject_cast<QCPColorMap*>(panel.heatmap()->plottable(0));
    QVERIFY(map);
    QCOMPARE(map->data()->keySize(), 4);
    QCOMPARE(map->data()->valueSize(), 2);
    QCOMPARE(map->data()->cell(1, 1), 2.0);
    QCOMPARE(map->data()->cell(3, 1), 0.0);
    // glm4moe's leading dense layer: a blank row (no experts to colour), named in the table.
    iwb::ExpertLoadSnapshot leading = handMade();
    leading.num_dense_layers = 1;
    leading.counts = {0, 0, 0, 0, 6, 6, 0, 0};
    leading.num_tokens = 6;
    panel.setSnapshot(leading);
    QVERIFY2(panel.summaryText().contains(QStringLiteral("Layer 0 has a dense feed-forward block")),
             qPrintable(panel.summaryText()));
    QVERIFY(std::isnan(map->data()->cell(2, 0)));
    QCOMPARE(map->data()->cell(0, 1), 2.0);
    ExpertLoadModel model;
    model.setSnapshot(leading);
    QCOMPARE(model.index(0, ExpertLoadModel::LayerColumn).data().toString(),
             QStringLiteral("layer 0 (dense, no experts)"));
    QCOMPARE(model.index(0, ExpertLoadModel::IdleColumn).data().toString(), QStringLiteral("—"));
    QCOMPARE(model.index(1, ExpertLoadModel::IdleColumn).data().toString(), QStringLiteral("2 of 4"));
    QCOMPARE(model.mostImbalancedLayer(), 1);
    iwb::ExpertLoadSnapshot dense;
    dense.num_layers = 28;
    panel.setSnapshot(dense);
    QVERIFY(panel.summaryText().contains(QStringLiteral("dense")));
  }

  void aMixtureOfExpertsModelReportsItsRouting() {
    QTemporaryDir dir;
    QVERIFY(dir.isValid());
    iwb::synth::SynthOptions options;
    options.shape = *iwb::synth::find_synth_preset("test-qwen3moe");
    options.weight_type = "Q8_0";
    options.seed = 7;
    options.num_threads = 2;
    options.output_path = dir.filePath(QStringLiteral("moe.gguf")).toStdString();
    auto written = iwb::synth::synthesize_model(options);
    QVERIFY2(written.is_ok(), written.error_message().c_str());

    EngineController engine;
    ExpertLoadPanel panel(&engine);
    QSignalSpy loads(&engine, &EngineController::expertLoadReady);
    QVERIFY(iwb::test::loadModelAndWait(engine, QString::fromStdString(options.output_path), kTimeoutMs));
    QSignalSpy finished(&engine, &EngineController::generationFinished);
    QSignalSpy failed(&engine, &EngineController::generationFailed);
    BatchInput batch;
    batch.prompts = {QStringLiteral("one two three four"), QStringLiteral("five six")};
    batch.sampling.temperature = 0;
    batch.sampling.maxTokens = 6;
    QCOMPARE(engine.submitBatch(batch).size(), qsizetype(2));
    QTRY_VERIFY_WITH_TIMEOUT(finished.count() + failed.count() == 2, kTimeoutMs);
    QCOMPARE(failed.count(), 0);
    // The idle snapshot after the batch carries the whole window.
    QTRY_VERIFY_WITH_TIMEOUT(!loads.isEmpty() && loads.last().at(0).value<iwb::ExpertLoadSnapshot>().num_tokens > 0,
                             kTimeoutMs);
    const auto last = loads.last().at(0).value<iwb::ExpertLoadSnapshot>();
    QCOMPARE(last.num_layers, options.shape.num_layers);
    QCOMPARE(last.num_experts, options.shape.num_experts);
    QCOMPARE(last.num_experts_used, options.shape.num_experts_used);
    for (int64_t l = 0; l < last.num_layers; ++l) {
      int64_t sum = 0;
      for (int64_t e = 0; e < last.num_experts; ++e) sum += last.count(l, e);
      QCOMPARE(last.routed(l), sum);
      if (l + 1 < last.num_layers) {
        QCOMPARE(sum, last.num_tokens * last.num_experts_used);
      } else {
        // The last layer's FFN runs on the rows that sample only: the prompts' last tokens
        // and the generated ones, fewer than every token.
        QCOMPARE(sum % last.num_experts_used, int64_t{0});
        QVERIFY(sum > 0 && sum < last.num_tokens * last.num_experts_used);
      }
    }
    QCOMPARE(panel.model()->rowCount(), int(last.num_layers));
    QVERIFY2(panel.summaryText().contains(QStringLiteral("experts per layer")), qPrintable(panel.summaryText()));
  }
};

QTEST_MAIN(TestExpertLoad)
#include "test_expert_load.moc"
