// The Quantization tab through its models and signals (offscreen): the Pareto front, the runs
// model's numeric sorting and reference row, CSV export, the side-by-side view with per-layer
// errors, and a real queue on the aidreams model run on the worker thread (quantize, evaluate,
// record), plus cancelling and a failing job marked failed; and the rule of one compute owner:
// a chat reply asked for while the lab's queue runs waits for it on the engine's thread.
#include "aidreams_fixture.h"
#include "worker/engine_controller.h"

#include "iwb/engine/store/results_store.h"
#include "quantlab/pareto.h"
#include "quantlab/quant_charts.h"
#include "quantlab/quant_compare_view.h"
#include "quantlab/quant_lab_panel.h"
#include "quantlab/quant_runs_model.h"

#include <qcustomplot.h>
#include <QSignalSpy>
#include <QSortFilterProxyModel>
#include <QTableView>
#include <QTableWidget>
#include <QTemporaryDir>
#include <QtTest>

using namespace iwb::ui;
using iwb::quant::QuantRun;

namespace {

QuantRun makeRun(qint64 id, const char* type, double mib, double kl, double ppl, double genRate,
                 bool isReference = false) {
  QuantRun r;
  r.id = id;
  r.kind = "lab";
  r.status = iwb::quant::RunStatus::Done;
  r.weight_type = type;
  r.file_bytes = mib * 1048576.0;
  if (!isReference)
    r.kl_mean = kl;
  else
    r.kl_mean = 0.0;
  r.perplexity = ppl;
  r.gen_tokens_per_s = genRate;
  r.is_reference = isReference;
  r.model_path = std::string("/m/") + type + ".gguf";
  return r;
}

}  // namespace

class TestQuantLabPanel : public QObject {
  Q_OBJECT

  QTemporaryDir m_tmp;

 private slots:
  void paretoFrontPoints() {
    // Lower is better on both: (1,5) (2,3) (4,1) form the front; (3,4) and (5,2) are beaten.
    const std::vector<ParetoPoint> p = {{3, 4}, {1, 5}, {2, 3}, {5, 2}, {4, 1}};
    QCOMPARE(iwb::ui::paretoFront(p, true, true), (std::vector<int>{1, 2, 4}));
    // Higher x is better (tokens/s), lower y (perplexity): fast and good wins.
    const std::vector<ParetoPoint> q = {{10, 12}, {20, 13}, {15, 14}, {30, 20}};
    QCOMPARE(iwb::ui::paretoFront(q, false, true), (std::vector<int>{0, 1, 3}));
    QCOMPARE(iwb::ui::paretoFront({}, true, true), std::vector<int>{});
    // Ties: identical points do not dominate each other.
    QCOMPARE(iwb::ui::paretoFront({{1, 1}, {1, 1}}, true, true).size(), size_t{2});
  }

  void modelSortsNumericallyAndExportsCsv() {
    QuantRunsModel model;
    std::vector<QuantRun> runs = {makeRun(1, "F16", 3000, 0, 12.7, 3, true), makeRun(2, "Q8_0", 1600, 7e-4, 12.68, 6),
                                  makeRun(3, "Q2_K", 650, 0.4, 19.5, 9), makeRun(4, "Q4_K_M", 940, 0.03, 13.1, 8)};
    runs[3].is_imatrix = true;
    QuantRun failed = makeRun(5, "Q3_K", 0, 0, 0, 0);
    failed.status = iwb::quant::RunStatus::Failed;
    failed.error = "disk full";
    failed.file_bytes.reset();
    failed.kl_mean.reset();
    failed.perplexity.reset();
    failed.gen_tokens_per_s.reset();
    runs.push_back(failed);
    model.setRuns(runs);
    QSortFilterProxyModel proxy;
    proxy.setSourceModel(&model);
    proxy.setSortRole(QuantRunsModel::SortRole);
    proxy.sort(QuantRunsModel::SizeColumn, Qt::AscendingOrder);
    // 650 < 940 < 1600 < 3000 (as numbers, not text), the failed run (no size) last.
    QCOMPARE(proxy.data(proxy.index(0, QuantRunsModel::TypeColumn)).toString(), QString("Q2_K"));
    QCOMPARE(proxy.data(proxy.index(1, QuantRunsModel::TypeColumn)).toString(), QString("Q4_K_M"));
    QCOMPARE(proxy.data(proxy.index(3, QuantRunsModel::TypeColumn)).toString(), QString("F16 (base)"));
    QCOMPARE(proxy.data(proxy.index(4, QuantRunsModel::StatusColumn)).toString(), QString("failed"));
    proxy.sort(QuantRunsModel::PerplexityColumn, Qt::AscendingOrder);
    QCOMPARE(proxy.data(proxy.index(0, QuantRunsModel::TypeColumn)).toString(), QString("Q8_0"));
    QCOMPARE(model.data(model.index(0, QuantRunsModel::StatusColumn)).toString(), QString("reference"));
    QVERIFY(model.data(model.index(0, 0), Qt::FontRole).value<QFont>().bold());
    QCOMPARE(QuantRunsModel::label(runs[3]), QString("Q4_K_M+im"));

    const QStringList csv = model.toCsv().trimmed().split('\n');
    QCOMPARE(csv.size(), 6);
    QVERIFY(csv[0].startsWith("id,date,status"));
    QVERIFY2(csv[3].contains(",Q2_K,") && csv[3].contains(",0.4,"), qPrintable(csv[3]));
    QVERIFY2(csv[5].contains("failed") && csv[5].contains("\"disk full\""), qPrintable(csv[5]));

    // The new figures' columns: depth speed, KV bytes per position, the sequences that fit.
    QuantRun deep = runs[1];
    deep.gen_depth = 4087;
    deep.depth_gen_tokens_per_s = 4.25;
    deep.kv_bytes_per_token = 28672;
    deep.fit_context = 8192;
    deep.fit_memory_bytes = 8.0 * 1024 * 1024 * 1024;
    deep.fit_sequences = 30;
    deep.ppl_ratio = 1.00364;
    deep.ppl_ratio_error = 0.00118;
    QuantRunsModel one;
    one.setRuns({deep});
    QCOMPARE(one.data(one.index(0, QuantRunsModel::DepthRateColumn)).toString(), QString("4.25 @ 4087"));
    QCOMPARE(one.data(one.index(0, QuantRunsModel::KvBytesColumn)).toString(), QString("28672"));
    QCOMPARE(one.data(one.index(0, QuantRunsModel::FitColumn)).toString(), QString("30 × 8192 in 8 GiB"));
    QCOMPARE(one.data(one.index(0, QuantRunsModel::FitColumn), QuantRunsModel::SortRole).toDouble(), 30.0);
    QVERIFY(one.toCsv().contains(",4087,4.25,"));
    QCOMPARE(one.data(one.index(0, QuantRunsModel::PplRatioColumn)).toString(), QString("1.0036 ± 0.0012"));
    QCOMPARE(one.data(one.index(0, QuantRunsModel::PplRatioColumn), QuantRunsModel::SortRole).toDouble(), 1.00364);
    QVERIFY(one.toCsv().contains(",1.00364,0.00118,"));
    QCOMPARE(model.data(model.index(4, QuantRunsModel::PplRatioColumn)).toString(), QString("–"));  // not measured
  }

  void chartsPutKvAndWeightTypesOnOneMemoryAxis() {
    // Weights plus the KV pool: f16 256 KiB per position, Q8_0 136 KiB, Q4_0 72 KiB; blocks of 16.
    const double f16 = 256 * 1024.0, q8 = 136 * 1024.0, q4 = 72 * 1024.0;
    auto withKv = [](QuantRun r, const char* kv, double bytesPerToken) {
      r.kv_cache_type = kv;
      r.weights_bytes = r.file_bytes;
      r.kv_bytes_per_token = bytesPerToken;
      r.kv_block_size = 16;
      return r;
    };
    QuantRun q4kmIm = makeRun(4, "Q4_K_M", 940, 0.03, 13.1, 8);
    q4kmIm.is_imatrix = true;
    std::vector<QuantRun> runs = {withKv(makeRun(1, "F16", 3000, 0, 12.7, 3, true), "f16", f16),
                                  withKv(makeRun(2, "Q8_0", 1600, 7e-4, 12.68, 6), "f16", f16),
                                  withKv(makeRun(3, "Q2_K", 650, 0.4, 19.5, 9), "f16", f16),
                                  withKv(q4kmIm, "f16", f16),
                                  withKv(makeRun(5, "F16", 3000, 2e-4, 12.69, 3.2), "q8_0", q8),
                                  withKv(makeRun(6, "Q4_K_M", 940, 0.05, 13.3, 8.5), "q4_0", q4),
                                  makeRun(7, "Q5_0", 700, 0.02, 14, 7)};  // recorded before the KV figures
    QCOMPARE(QuantRunsModel::label(runs[4]), QString("F16 KV q8_0"));
    // One sequence of 1024: 906 (Q2_K) .. 3136 MiB (F16 weights, Q8_0 cache).
    QCOMPARE(QuantCharts::memoryBytes(runs[4], 1024, 1), 3000 * 1048576.0 + 1024 * q8);
    QCOMPARE(QuantCharts::memoryBytes(runs[6], 1024, 1), -1.0);
    QCOMPARE(QuantCharts::memoryBytes(runs[5], 1000, 2), 940 * 1048576.0 + 2 * 1008 * q4);  // whole blocks
    QuantCharts charts;
    charts.setMemoryBasis(1024, 1);
    charts.setRuns(runs);
    QCOMPARE(charts.memoryKlFront(), (QStringList{"Q2_K", "Q4_K_M KV q4_0", "Q4_K_M+im", "Q8_0", "F16 KV q8_0"}));
    QCOMPARE(charts.numSkippedForMemory(), 1);
    // Both kinds drawn, apart: circles for the f16 cache, triangles for a quantized one.
    QCustomPlot* plot = charts.memoryKlPlot();
    QCOMPARE(plot->graph(0)->dataCount(), 3);  // Q8_0, Q2_K, Q4_K_M+im (the base has KL 0)
    QCOMPARE(plot->graph(1)->dataCount(), 2);
    QCOMPARE(plot->graph(1)->scatterStyle().shape(), QCPScatterStyle::ssTriangle);
    QVERIFY(plot->graph(1)->name().contains("KV"));
    // Sixteen sequences: the KV pool outweighs the weights, and the quantized caches lead.
    charts.setMemoryBasis(1024, 16);
    QCOMPARE(charts.memoryKlFront(), (QStringList{"Q4_K_M KV q4_0", "Q4_K_M+im", "F16 KV q8_0"}));
    QCOMPARE(charts.speedPerplexityFront(), (QStringList{"Q8_0", "Q4_K_M+im", "Q4_K_M KV q4_0", "Q2_K"}));
    // With depth figures, speed is read there, and runs without them are left out.
    runs[1].gen_depth = runs[5].gen_depth = 4087;
    runs[1].depth_gen_tokens_per_s = 2.0;
    runs[5].depth_gen_tokens_per_s = 5.0;
    charts.setRuns(runs);
    QCOMPARE(charts.speedPerplexityFront(), (QStringList{"Q8_0", "Q4_K_M KV q4_0"}));
    QCOMPARE(charts.speedPerplexityPlot()->yAxis->scaleType(), QCPAxis::stLinear);
    // A broken cache (perplexity x100) turns the perplexity axis logarithmic, and back.
    runs[5].perplexity = 1200.0;
    charts.setRuns(runs);
    QCOMPARE(charts.speedPerplexityPlot()->yAxis->scaleType(), QCPAxis::stLogarithmic);
    runs[5].perplexity = 13.3;
    charts.setRuns(runs);
    QCOMPARE(charts.speedPerplexityPlot()->yAxis->scaleType(), QCPAxis::stLinear);
  }

  void compareViewShowsBothRunsAndLayerErrors() {
    QuantRun a = makeRun(1, "Q4_0", 900, 0.04, 13.2, 8), b = makeRun(2, "Q4_0", 900, 0.03, 13.0, 8);
    b.is_imatrix = true;
    a.kv_bytes_per_token = 1024;  // f16 keys and values
    b.kv_bytes_per_token = 544;   // Q8_0: 34 bytes per 32 values
    std::vector<iwb::quant::QuantizedTensor> ta, tb;
    for (int layer = 0; layer < 3; ++layer) {
      for (const char* kind : {"attn_q", "ffn_down"}) {
        iwb::quant::QuantizedTensor t;
        t.kind = kind;
        t.layer = layer;
        t.relative_rmse = 0.08;
        ta.push_back(t);
        t.relative_rmse = 0.07;
        tb.push_back(t);
      }
    }
    QuantCompareView view;
    view.setRuns(&a, ta, &b, tb);
    QCOMPARE(view.numErrorGraphs(), 4);  // two kinds x two runs
    QTableWidget* t = view.table();
    QCOMPARE(t->horizontalHeaderItem(2)->text(), QString("Q4_0+im"));
    bool sawKl = false, sawKv = false;
    for (int row = 0; row < t->rowCount(); ++row) {
      if (t->item(row, 0)->text() == "KV bytes per token") {
        sawKv = true;
        QVERIFY2(t->item(row, 3)->text().contains("-46.9%"), qPrintable(t->item(row, 3)->text()));
      }
      if (t->item(row, 0)->text() != "KL mean") continue;
      sawKl = true;
      QCOMPARE(t->item(row, 1)->text(), QString("0.04000"));
      QVERIFY2(t->item(row, 3)->text().contains("-25.0%"), qPrintable(t->item(row, 3)->text()));
    }
    QVERIFY(sawKl && sawKv);
  }

  void runsAQueueOnARealModel() {
    if (!iwb::test::hasAidreamsModel()) QSKIP("shared models folder absent: no aidreams model");
    QString why;
    const QString model = iwb::test::convertAidreamsModel(m_tmp.path(), &why);
    QVERIFY2(!model.isEmpty(), qPrintable(why));
    qputenv("IWB_LOGITS_CACHE", m_tmp.filePath("logits").toUtf8());
    const QString db = m_tmp.filePath("results.sqlite");
    QuantLabPanel panel(db, m_tmp.filePath("out"));
    QSignalSpy finished(&panel, &QuantLabPanel::queueFinished);
    QuantLabSettings s;
    s.sourcePath = model;
    s.outputDir = m_tmp.filePath("out");
    s.storePath = db;
    s.context = 64;
    s.numChunks = 3;
    s.numGenTokens = 4;
    s.numThreads = 2;
    // The form's jobs: the base with each KV cache type (one for both, keys/values apart), then
    // each weight type plain, with an imatrix, and with each KV cache type.
    panel.setCheckedTypes({"Q4_0"}, true);
    panel.setKvTypes({"q8_0", "q4_0/fp8_e4m3"}, true);
    QCOMPARE(panel.kvTypes(), (QStringList{"q8_0", "q4_0/fp8_e4m3"}));
    QVector<QuantJob> formJobs = panel.jobs();
    QCOMPARE(formJobs.size(), 6);
    QVERIFY(formJobs[0].type.isEmpty() && formJobs[0].kvCacheType == "q8_0");
    QVERIFY(formJobs[1].type.isEmpty() && formJobs[1].kvCacheType == "q4_0/fp8_e4m3");
    QVERIFY(formJobs[2].type == "Q4_0" && formJobs[2].kvCacheType == "f16");
    QVERIFY(formJobs[3].isImatrix && formJobs[4].kvCacheType == "q8_0" && formJobs[5].kvCacheType == "q4_0/fp8_e4m3");
    panel.setKvTypes({"q5_1", "q4_1", "q4_1/q4_1"});  // the base only; a pair of one type is that type
    formJobs = panel.jobs();
    QCOMPARE(formJobs.size(), 4);
    QCOMPARE(formJobs[0].kvCacheType, QString("q5_1"));
    QCOMPARE(formJobs[1].kvCacheType, QString("q4_1"));
    QVERIFY(formJobs[2].type == "Q4_0" && formJobs[3].isImatrix);
    QCOMPARE(panel.settings().genDepth, qint64(4096));
    QCOMPARE(panel.settings().fitContext, qint64(8192));
    QCOMPARE(panel.settings().fitMemoryBytes, 8.0 * 1024 * 1024 * 1024);

    QVERIFY(panel.startQueue(
        s, {{"Q8_0", false}, {"Q4_0", false}, {"Q4_0", true}, {"IQ9_Z", false}, {"Q8_0", false, "q8_0"}}));
    QVERIFY(!panel.startQueue(s, {{"Q8_0", false}}));  // one queue at a time
    QVERIFY(finished.wait(60000));
    QCOMPARE(finished.first().at(0).toBool(), false);
    QVERIFY2(finished.first().at(1).toString().contains("3 runs done, 2 failed"),
             qPrintable(finished.first().at(1).toString()));

    QuantRunsModel* m = panel.model();
    QCOMPARE(m->rowCount(), 6);  // reference + 5 jobs
    QVERIFY(m->run(0).is_reference);
    QVERIFY(m->run(0).kl_mean.value_or(1) < 1e-6);  // 0 up to the logits cache's 16-bit rounding
    const QuantRun& q8 = m->run(1);
    const QuantRun& q4 = m->run(2);
    const QuantRun& q4im = m->run(3);
    QCOMPARE(q8.status, iwb::quant::RunStatus::Done);
    QVERIFY(q8.kl_mean.value_or(1) < q4.kl_mean.value_or(0));  // 8 bits diverge less than 4
    // Every run's long-context speed (cut to aidreams' trained context), KV bytes per position
    // and the sequences that fit the default budget (8,192 positions in 8 GiB).
    for (const QuantRun* r : {&m->run(0), &q8, &q4}) {
      QVERIFY(r->depth_gen_tokens_per_s.value_or(0) > 0);
      QVERIFY(r->gen_depth > 0 && r->gen_depth < 4096);
      QVERIFY(r->kv_bytes_per_token.value_or(0) > 0);
      QCOMPARE(r->fit_context, qint64(8192));
      QVERIFY(r->fit_sequences.value_or(0) > 1000);  // a 260K model's cache is a few KiB a position
    }
    QCOMPARE(q8.kv_bytes_per_token, m->run(0).kv_bytes_per_token);  // both with the f16 cache
    QVERIFY(q4im.is_imatrix);
    QVERIFY(q4im.kl_mean.has_value());
    QCOMPARE(m->run(4).status, iwb::quant::RunStatus::Failed);
    QVERIFY(m->run(4).error.find("IQ9_Z") != std::string::npos);
    // aidreams' 16-wide heads hold no Q8_0 block: the 8-bit KV run fails and says why.
    QCOMPARE(m->run(5).status, iwb::quant::RunStatus::Failed);
    QCOMPARE(m->run(5).kv_cache_type, std::string("q8_0"));
    QVERIFY2(m->run(5).error.find("multiples of 32") != std::string::npos, m->run(5).error.c_str());
    QVERIFY(panel.baseNote().startsWith("Reference:"));

    panel.compareRuns(q4.id, q4im.id);
    QVERIFY(panel.compareView()->numErrorGraphs() >= 2);
    QCOMPARE(panel.table()->selectionModel()->selectedRows().size(), 2);
    QVERIFY(panel.exportCsv(m_tmp.filePath("runs.csv")));
    QFile csv(m_tmp.filePath("runs.csv"));
    QVERIFY(csv.open(QIODevice::ReadOnly));
    QCOMPARE(csv.readAll().count('\n'), 7);

    // A second queue skips the reference (already measured) and can be cancelled.
    QVERIFY(panel.startQueue(s, {{"Q5_0", false}, {"Q5_1", false}}));
    panel.cancel();
    QVERIFY(finished.wait(60000));
    QCOMPARE(finished.last().at(0).toBool(), true);
    panel.reload();
    for (const QuantRun& r : m->runs()) QVERIFY(r.status != iwb::quant::RunStatus::Running);
  }

  void chatWaitsWhileTheLabHasTheEngineThread() {
    if (!iwb::test::hasAidreamsModel()) QSKIP("shared models folder absent: no aidreams model");
    QString why;
    QVERIFY(QDir().mkpath(m_tmp.filePath("owner")));
    const QString model = iwb::test::convertAidreamsModel(m_tmp.filePath("owner"), &why);
    QVERIFY2(!model.isEmpty(), qPrintable(why));
    qputenv("IWB_LOGITS_CACHE", m_tmp.filePath("owner/logits").toUtf8());
    EngineController engine;
    QVERIFY(iwb::test::loadModelAndWait(engine, model, 30000));
    QuantLabPanel panel(&engine, m_tmp.filePath("owner/results.sqlite"), m_tmp.filePath("owner/out"));
    QCOMPARE(panel.computeThread(), engine.workerThread());

    QStringList order;
    connect(&panel, &QuantLabPanel::queueFinished, this, [&] { order << "lab finished"; });
    connect(&engine, &EngineController::generationStarted, this, [&] { order << "chat started"; });
    QSignalSpy chatFinished(&engine, &EngineController::generationFinished);
    QuantLabSettings s;
    s.sourcePath = model;
    s.outputDir = m_tmp.filePath("owner/out");
    s.storePath = m_tmp.filePath("owner/results.sqlite");
    s.context = 64;
    s.numChunks = 2;
    s.numGenTokens = 4;
    s.numThreads = 2;
    QVERIFY(panel.startQueue(s, {{"Q8_0", false}}));
    GenerationInput chat;
    chat.messages = {{QStringLiteral("user"), QStringLiteral("Once upon a time")}};
    chat.sampling.temperature = 0;
    chat.sampling.maxTokens = 8;
    engine.generate(chat);  // asked for while the lab holds the engine thread
    QVERIFY(chatFinished.wait(60000));
    // Queued behind the lab, not run beside it; and served once the lab is done.
    QCOMPARE(order, (QStringList{"lab finished", "chat started"}));
    const auto stats = chatFinished.first().at(1).value<GenerationStats>();
    QVERIFY2(stats.errorMessage.isEmpty(), qPrintable(stats.errorMessage));
    QVERIFY(stats.numGeneratedTokens > 0);
    QCOMPARE(panel.model()->rowCount(), 2);  // the reference and Q8_0, both recorded
  }
};

QTEST_MAIN(TestQuantLabPanel)
#include "test_quant_lab_panel.moc"
