// The Serving tab without a server: a synthetic sweep's curve data, knee and CSV; the stored-
// runs table's ticks; two stored runs overlaid on the sweep charts and exported (CSV, PNG);
// and the roofline bound drawn beside the measured decode throughput.
#include "remote/remote_endpoints.h"
#include "serving/serving_bound_box.h"
#include "serving/serving_curve.h"
#include "serving/serving_panel.h"
#include "serving/serving_runs_model.h"
#include "serving/serving_sweep_charts.h"

#include "iwb/engine/profile/decode_prediction.h"
#include "iwb/engine/profile/gpu_datasheets.h"
#include "iwb/engine/store/results_store.h"

#include <qcustomplot.h>
#include <QComboBox>
#include <QImage>
#include <QLineEdit>
#include <QPushButton>
#include <QSettings>
#include <QStandardPaths>
#include <QTemporaryDir>
#include <QtTest>

using namespace iwb;
using namespace iwb::ui;

namespace {

remote::LatencyStats stats(double median, double p99) {
  remote::LatencyStats s;
  s.mean = (median + p99) / 2;
  s.median = median;
  s.p90 = (median + p99) / 2;
  s.p99 = p99;
  s.min = median / 2;
  s.max = p99 * 1.1;
  s.count = 10;
  return s;
}

// A sweep over concurrency 1, 2, 4, 8 that saturates after 4: 100, 190, 300, 310 tokens/s while
// p99 ITL goes 10, 11, 13, 30 ms (the knee: c=4, index 2).
remote::BenchServeResult syntheticSweep(const std::string& url, double scale) {
  remote::BenchServeResult r;
  r.config.endpoint.base_url = url;
  r.config.model = "llama-3-8b";
  r.config.input_len = 128;
  r.config.output_len = 64;
  r.config.sweep_concurrency = {1, 2, 4, 8};
  r.server_kind = remote::ServerKind::Vllm;
  r.started_at = "2026-11-27T12:00:00Z";
  const double throughput[] = {100, 190, 300, 310};
  const double itl99[] = {10, 11, 13, 30};
  for (int i = 0; i < 4; ++i) {
    remote::BenchServePoint p;
    p.max_concurrency = int64_t(1) << i;
    p.duration_seconds = 10;
    p.num_completed = 20;
    p.total_input_tokens = 20 * 128;
    p.total_output_tokens = static_cast<int64_t>(throughput[i] * scale * 10);
    p.output_throughput = throughput[i] * scale;
    p.request_throughput = throughput[i] * scale / 64;
    p.total_token_throughput = p.output_throughput * 3;
    p.ttft = stats(20 + 10 * i, 40 + 20 * i);
    p.tpot = stats(itl99[i] * 0.8, itl99[i]);
    p.itl = stats(itl99[i] * 0.7, itl99[i]);
    p.e2el = stats(700, 900);
    if (i == 3) {
      p.num_failed = 2;
      p.errors_by_kind = {{"timeout", 2}};
    }
    remote::ServerSnapshot delta;
    delta.generation_tokens = static_cast<double>(p.total_output_tokens);
    delta.prefix_cache_queries = 1000;
    delta.prefix_cache_hits = 250;
    p.server_delta = delta;
    r.points.push_back(p);
  }
  return r;
}

// Stores a finished run in the store at `path` and returns its id.
int64_t storeRun(const QString& path, const remote::BenchServeResult& result, const std::string& label) {
  auto store = ResultsStore::open(path.toStdString());
  if (!store) qFatal("%s", store.error_message().c_str());
  auto id = (*store)->begin_serve_run(result.config, label);
  if (!id) qFatal("%s", id.error_message().c_str());
  const Status done = (*store)->finish_serve_run(*id, result, "done");
  if (!done.is_ok()) qFatal("%s", done.message().c_str());
  return *id;
}

QCPAbstractPlottable* plottableNamed(QCustomPlot* plot, const QString& name) {
  for (int i = 0; i < plot->plottableCount(); ++i) {
    if (plot->plottable(i)->name() == name) return plot->plottable(i);
  }
  return nullptr;
}

}  // namespace

class TestServingPanel : public QObject {
  Q_OBJECT

 private slots:
  void initTestCase() {
    // The endpoint registry remembers endpoints in QSettings: a settings file of the test's own.
    QStandardPaths::setTestModeEnabled(true);
    QSettings::setDefaultFormat(QSettings::IniFormat);
    QSettings::setPath(QSettings::IniFormat, QSettings::UserScope, m_settingsDir.path());
    QSettings().clear();
  }

  void curveOfASweep() {
    const auto result = syntheticSweep("http://a:8000", 1.0);
    const ServingCurve c = servingCurve(result, LoadAxis::OutputTokensPerS, QStringLiteral("run a"));
    QCOMPARE(c.load, (QVector<double>{100, 190, 300, 310}));
    QCOMPARE(c.concurrency, (QVector<qint64>{1, 2, 4, 8}));
    QCOMPARE(c.ttftP99, (QVector<double>{40, 60, 80, 100}));
    QCOMPARE(c.itlP99, (QVector<double>{10, 11, 13, 30}));
    QCOMPARE(c.itlP50[3], 21.0);
    QVERIFY(c.knee);
    QCOMPARE(c.knee->index, size_t(2));
    const ServingCurve byRequests = servingCurve(result, LoadAxis::RequestsPerS, QString());
    QCOMPARE(byRequests.load[1], 190.0 / 64);
    // With a TTFT SLO of 70 ms the knee is the best point under it: c=2.
    auto withSlo = result;
    withSlo.config.goodput.ttft_ms = 70;
    QCOMPARE(servingCurve(withSlo, LoadAxis::OutputTokensPerS, QString()).knee->index, size_t(1));
    QCOMPARE(pointLabel(result.points[2]), QStringLiteral("c=4"));
    // A point where every request failed is not drawn (and not a knee candidate).
    auto withFailedPoint = result;
    withFailedPoint.points[1].num_completed = 0;
    withFailedPoint.points[1].num_failed = 20;
    const ServingCurve partial = servingCurve(withFailedPoint, LoadAxis::OutputTokensPerS, QString());
    QCOMPARE(partial.concurrency, (QVector<qint64>{1, 4, 8}));
    QCOMPARE(partial.knee->index, size_t(1));  // c=4, now the second drawn point
  }

  void csvHasEveryStatisticOfEveryPoint() {
    const QString csv = servingCsv(syntheticSweep("http://a:8000", 1.0), QStringLiteral("vLLM, tp=2"));
    const QStringList lines = csv.trimmed().split(QLatin1Char('\n'));
    QCOMPARE(lines.size(), 5);  // header + 4 points
    const QStringList header = lines[0].split(QLatin1Char(','));
    for (const char* column : {"max_concurrency", "output_throughput", "goodput", "ttft_p99_ms", "tpot_median_ms",
                               "itl_p90_ms", "e2el_max_ms", "itl_count", "errors", "server_prefix_cache_hit_rate"}) {
      QVERIFY2(header.contains(QLatin1String(column)), column);
    }
    // The label holds a comma: quoted, so every row still has the header's column count
    // once the quoted field is taken as one.
    QVERIFY(lines[1].startsWith(QLatin1String("\"vLLM, tp=2\",http://a:8000,llama-3-8b,")));
    const QStringList last = lines[4].mid(lines[4].indexOf(QLatin1String("\",")) + 2).split(QLatin1Char(','));
    QCOMPARE(last.size() + 1, header.size());
    auto value = [&](const char* column) { return last[header.indexOf(QLatin1String(column)) - 1]; };
    QCOMPARE(value("max_concurrency"), QStringLiteral("8"));
    QCOMPARE(value("output_throughput"), QStringLiteral("310"));
    QCOMPARE(value("itl_p99_ms"), QStringLiteral("30"));
    QCOMPARE(value("failed"), QStringLiteral("2"));
    QCOMPARE(value("errors"), QStringLiteral("timeout:2"));
    QCOMPARE(value("server_prefix_cache_hit_rate"), QStringLiteral("0.25"));
    QCOMPARE(value("server_spec_acceptance_rate"), QString());  // not reported, not 0
  }

  void failuresAreSummarisedWithTheFirstMessage() {
    auto result = syntheticSweep("http://a:8000", 1.0);
    QCOMPARE(failureSummary(result), QStringLiteral("2 of 82 requests failed (2 timeout)"));
    remote::RequestRecord cancelled, refused;
    cancelled.error = {remote::RemoteErrorKind::Cancelled, 0, "cancelled"};
    refused.error = {remote::RemoteErrorKind::HttpError, 400, "HTTP 400: the prompt is 327 tokens"};
    result.points[3].requests = {cancelled, refused};
    QCOMPARE(failureSummary(result),
             QStringLiteral("2 of 82 requests failed (2 timeout). First: HTTP 400: the prompt is 327 tokens"));
    QCOMPARE(failureSummary(remote::BenchServeResult{}), QString());
  }

  void runsTableKeepsAtMostTwoTicked() {
    ServingRunsModel model;
    std::vector<ResultsStore::ServeRunSummary> runs(3);
    for (int i = 0; i < 3; ++i) {
      runs[i].id = i + 1;
      runs[i].status = "done";
      runs[i].label = "run " + std::to_string(i + 1);
      runs[i].num_points = 4;
    }
    model.setRuns(runs);
    QCOMPARE(model.rowCount(), 3);
    QCOMPARE(model.data(model.index(0, ServingRunsModel::Id), Qt::DisplayRole).toLongLong(), 3LL);  // newest first
    QSignalSpy shown(&model, &ServingRunsModel::shownChanged);
    QVERIFY(model.setData(model.index(2, ServingRunsModel::Shown), Qt::Checked, Qt::CheckStateRole));
    model.setShown(2, true);
    model.setShown(3, true);  // the third tick drops the first
    QCOMPARE(model.shownIds(), (QList<qint64>{2, 3}));
    QCOMPARE(model.data(model.index(2, ServingRunsModel::Shown), Qt::CheckStateRole).toInt(), int(Qt::Unchecked));
    QCOMPARE(shown.count(), 3);
    runs.pop_back();  // run 3 gone from the store's list: untick it
    model.setRuns(runs);
    QCOMPARE(model.shownIds(), (QList<qint64>{2}));
  }

  void twoStoredRunsSideBySideAndExported() {
    QTemporaryDir dir;
    const QString db = dir.filePath(QStringLiteral("results.sqlite"));
    const int64_t a = storeRun(db, syntheticSweep("http://a:8000", 1.0), "server A");
    const int64_t b = storeRun(db, syntheticSweep("http://b:8000", 2.0), "server B");
    ServingPanel panel(nullptr, db);
    QCOMPARE(panel.runsModel()->rowCount(), 2);
    panel.runsModel()->setShown(a, true);
    panel.runsModel()->setShown(b, true);
    ServingSweepCharts* charts = panel.sweepCharts();
    QCOMPARE(charts->curves().size(), 2);
    QCOMPARE(charts->curves()[1].load, (QVector<double>{200, 380, 600, 620}));
    auto* p99 = dynamic_cast<QCPCurve*>(plottableNamed(charts->itlPlot(), QStringLiteral("server B p99")));
    QVERIFY(p99);
    QCOMPARE(p99->dataCount(), 4);
    QCOMPARE(p99->data()->at(2)->key, 600.0);  // c=4: 2 x 300 tokens/s
    QCOMPARE(p99->data()->at(2)->value, 13.0);
    auto* knee = dynamic_cast<QCPGraph*>(plottableNamed(charts->ttftPlot(), QStringLiteral("knee")));
    QVERIFY(knee);
    QCOMPARE(knee->data()->at(0)->key, 300.0);  // run A's c=4
    QVERIFY(plottableNamed(charts->decodePlot(), QStringLiteral("server A")));

    const QString csvPath = dir.filePath(QStringLiteral("runs.csv"));
    QString error;
    QVERIFY2(panel.exportCsv(csvPath, &error), qPrintable(error));
    QFile csv(csvPath);
    QVERIFY(csv.open(QIODevice::ReadOnly));
    const QStringList lines = QString::fromUtf8(csv.readAll()).trimmed().split(QLatin1Char('\n'));
    QCOMPARE(lines.size(), 1 + 4 + 4);  // one header, then both runs' points
    QVERIFY(lines[5].startsWith(QLatin1String("server B,http://b:8000,")));

    const QString pngPath = dir.filePath(QStringLiteral("sweep.png"));
    QVERIFY(panel.exportPng(pngPath));
    const QImage png(pngPath);
    QCOMPARE(png.size(), QSize(1500, 420));

    // Unticking leaves one curve; nothing ticked, nothing to export.
    panel.runsModel()->setShown(a, false);
    QCOMPARE(charts->curves().size(), 1);
    panel.runsModel()->setShown(b, false);
    QVERIFY(!panel.exportCsv(csvPath, &error));
    QVERIFY(!error.isEmpty());
  }

  void roofBoundBesideTheMeasuredThroughput() {
    QTemporaryDir dir;
    const QString db = dir.filePath(QStringLiteral("results.sqlite"));
    const int64_t a = storeRun(db, syntheticSweep("http://a:8000", 1.0), "server A");
    ServingPanel panel(nullptr, db);
    panel.boundBox()->setGpu(QStringLiteral("H100 SXM"));
    panel.boundBox()->setPreset(QStringLiteral("llama-3-8b"), QStringLiteral("BF16"));
    panel.runsModel()->setShown(a, true);
    QCPGraph* bound = nullptr;
    for (int i = 0; i < panel.sweepCharts()->decodePlot()->graphCount(); ++i) {
      if (panel.sweepCharts()->decodePlot()->graph(i)->name().startsWith(QLatin1String("bound: H100 SXM"))) {
        bound = panel.sweepCharts()->decodePlot()->graph(i);
      }
    }
    QVERIFY(bound);
    QCOMPARE(bound->dataCount(), 4);  // the run's concurrencies 1, 2, 4, 8
    auto shape = model_shape_preset("llama-3-8b", GgmlType::BF16);
    QVERIFY(shape);
    const GpuDatasheet* h100 = find_gpu_datasheet("H100 SXM");
    // Context of the run's requests: 128 + 64 / 2.
    const auto expected = predict_decode_throughput(*shape, 4, 160, {h100->bandwidth_bytes_per_s, h100->peak_flops});
    QVERIFY(expected);
    QCOMPARE(bound->data()->at(2)->key, 4.0);
    QCOMPARE(bound->data()->at(2)->value, expected->tokens_per_s);
    // A shape that cannot be made: no bound, and the reason shown.
    panel.boundBox()->setGgufPath(dir.filePath(QStringLiteral("missing.gguf")));
    QVERIFY(panel.boundBox()->message().contains(QLatin1String("missing.gguf")));
  }

  void endpointAndModelFromTheConnectedEndpoints() {
    QTemporaryDir dir;
    RemoteEndpoints endpoints(ApiKeyStore::Mode::SessionOnly);
    RemoteEndpointInfo info;
    info.baseUrl = QStringLiteral("http://gpu-box:8000");
    info.displayName = QStringLiteral("vLLM at gpu-box:8000");
    info.models = {QStringLiteral("Qwen3-8B"), QStringLiteral("Qwen3-0.6B")};
    info.defaultModel = QStringLiteral("Qwen3-0.6B");
    info.kind = remote::ServerKind::Vllm;
    info.hasApiKey = true;
    info.endpoint.base_url = "http://gpu-box:8000";
    info.endpoint.api_key = "sk-serving-test";
    endpoints.addOrUpdate(info);
    ServingPanel panel(nullptr, dir.filePath(QStringLiteral("results.sqlite")));
    panel.setEndpoints(&endpoints);
    auto* models = panel.findChild<QComboBox*>(QStringLiteral("servingModelBox"));
    QCOMPARE(models->count(), 2);
    auto made = panel.config();
    QVERIFY2(made, made.error_message().c_str());
    QCOMPARE(made->endpoint.base_url, std::string("http://gpu-box:8000"));
    QCOMPARE(made->model, std::string("Qwen3-0.6B"));                  // the dialog's pick
    QCOMPARE(made->endpoint.api_key, std::string("sk-serving-test"));  // from the registry, never typed
    // Typed the way people type it, it is still the connected endpoint (with its key).
    panel.findChild<QComboBox*>(QStringLiteral("servingEndpointBox"))->setCurrentText(QStringLiteral("gpu-box:8000/"));
    made = panel.config();
    QVERIFY(made);
    QCOMPARE(made->endpoint.api_key, std::string("sk-serving-test"));
    // A new endpoint connected later is offered too.
    info.baseUrl = QStringLiteral("http://other:30000");
    info.endpoint.base_url = "http://other:30000";
    endpoints.addOrUpdate(info);
    QCOMPARE(panel.findChild<QComboBox*>(QStringLiteral("servingEndpointBox"))->count(), 2);
  }

  void unreachableEndpointIsStoredAsFailedWithTheReason() {
    // Port 1 on loopback: nothing listens, every connection is refused at once.
    QTemporaryDir dir;
    const QString db = dir.filePath(QStringLiteral("results.sqlite"));
    ServingPanel panel(nullptr, db);
    remote::BenchServeConfig c;
    c.endpoint.base_url = "http://127.0.0.1:1";
    c.model = "m";
    c.num_prompts = 2;
    c.input_len = 8;
    c.output_len = 4;
    panel.setConfig(c);
    QSignalSpy finished(&panel, &ServingPanel::runFinished);
    QVERIFY(panel.start());
    QTRY_COMPARE_WITH_TIMEOUT(finished.count(), 1, 30000);
    QCOMPARE(finished[0][1].toString(), QStringLiteral("failed"));
    QVERIFY2(
        panel.statusText().contains(QLatin1String("failed")) && panel.statusText().contains(QLatin1String("reached")),
        qPrintable(panel.statusText()));
    QCOMPARE(panel.runsModel()->rowCount(), 1);
    QCOMPARE(panel.runsModel()->data(panel.runsModel()->index(0, ServingRunsModel::Status), Qt::DisplayRole).toString(),
             QStringLiteral("failed"));
    QVERIFY(panel.startButton()->isEnabled());
  }

  void badSettingsAreRefusedWithAReason() {
    QTemporaryDir dir;
    ServingPanel panel(nullptr, dir.filePath(QStringLiteral("results.sqlite")));
    remote::BenchServeConfig c;
    c.model = "m";
    panel.setConfig(c);  // no URL
    QVERIFY(!panel.start());
    QVERIFY(panel.statusText().contains(QLatin1String("URL")));
    c.endpoint.base_url = "http://127.0.0.1:1";
    panel.setConfig(c);
    panel.findChild<QLineEdit*>(QStringLiteral("servingSweepEdit"))->setText(QStringLiteral("1,x"));
    QVERIFY(!panel.start());
    QVERIFY(panel.statusText().contains(QLatin1String("\"x\"")));
    QVERIFY(!panel.isRunning());
  }

 private:
  QTemporaryDir m_settingsDir;
};

QTEST_MAIN(TestServingPanel)
#include "test_serving_panel.moc"
