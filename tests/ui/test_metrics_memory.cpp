// Tests of the Metrics and Memory tabs' models with hand-computed values: per-request latency
// percentiles, rates, MBU/MFU and the over-time series; the memory estimate against measured
// rows, whether a model fits, and reading /proc/self/status; the `iwb bench` runs table.
#include "iwb/engine/store/results_store.h"
#include "memory/memory_model.h"
#include "memory/memory_panel.h"
#include "metrics/bench_results_model.h"
#include "metrics/metrics_model.h"
#include "metrics/metrics_panel.h"
#include "roofline/machine_ceilings.h"
#include "worker/engine_controller.h"
#include "worker/measurement_values.h"
#include "worker/worker_measurements.h"
#include "worker/worker_requests.h"

#include <qcustomplot.h>
#include <QLabel>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QTest>

#include <cmath>

using namespace iwb::ui;

namespace {

// Five tokens at 0.5, 0.6, 0.8, 0.9 and 1.3 s after the request was added (at session 10 s):
// gaps 0.1, 0.2, 0.1, 0.4 s. Sorted [0.1, 0.1, 0.2, 0.4]; linear interpolation between ranks:
// p50 = 0.1 + 0.5 x 0.1 = 0.15, p90 = 0.2 + 0.7 x 0.2 = 0.34, p99 = 0.2 + 0.97 x 0.2 = 0.394.
RequestMeasurement measurement(quint64 id, double addedAt) {
  RequestMeasurement m;
  m.requestId = id;
  m.modelName = QStringLiteral("test-model");
  m.finishReason = QStringLiteral("end of generation");
  m.addedAtSeconds = addedAt;
  m.numGeneratedTokens = 5;
  m.timing.num_prompt_tokens = 20;
  m.timing.queued_seconds = 0.1;
  m.timing.prompt_seconds = 0.4;  // 20 tokens in 0.4 s: 50 tokens/s
  m.timing.token_seconds = {0.5, 0.6, 0.8, 0.9, 1.3};
  iwb::GenerationCost cost;
  cost.prefill = {2e9, 1e9, 0};  // per prompt token: 1e8 FLOP, 5e7 B
  cost.decode = {4e9, 8e9, 0};   // 4 decode steps: per token 1e9 FLOP, 2e9 B
  cost.num_decode_steps = 4;
  m.cost = cost;
  return m;
}

iwb::ModelSummary summary() {
  iwb::ModelSummary s;
  s.name = "tiny";
  s.architecture = "llama";
  s.tensor_bytes = 1'000'000;
  s.hparams.context_length = 512;
  s.hparams.embedding_length = 64;
  s.hparams.feed_forward_length = 128;
  s.hparams.block_count = 2;
  s.hparams.head_count = 4;
  s.hparams.head_count_kv = 2;
  s.hparams.key_length = 16;
  s.hparams.value_length = 16;
  s.hparams.vocab_size = 100;
  s.totals_by_type["F32"] = {2, 50'000, 200'000};
  s.totals_by_type["Q4_K"] = {5, 1'400'000, 800'000};
  return s;
}

iwb::ComputeDeviceInfo device(uint64_t freeBytes) {
  iwb::ComputeDeviceInfo d;
  d.id = "cpu";
  d.name = "Test CPU";
  d.total_memory_bytes = 16ull << 30;
  d.free_memory_bytes = freeBytes;
  return d;
}

}  // namespace

class TestMetricsMemory : public QObject {
  Q_OBJECT

 private slots:
  void requestRowHasHandComputedMetrics();
  void utilisationNeedsCeilings();
  void busyCpuShare();
  void lowProbeIsPointedOut();
  void chartsKeepPointsFromUnderTheLegend();
  void seriesFollowTokenTimes();
  void oldRequestsLeaveTheTable();
  void memoryEstimateRows();
  void memoryMeasuredBesideEstimate();
  void memoryFits();
  void memoryRecurrentState();
  void procStatusParsing();
  void benchRunsFromTheStore();
};

void TestMetricsMemory::requestRowHasHandComputedMetrics() {
  MetricsModel model;
  model.setCeilings({50e9, 200e9});
  model.addRequest(measurement(7, 10.0));
  QCOMPARE(model.rowCount(), 1);
  const iwb::RequestMetrics& m = model.row(0).metrics;
  QCOMPARE(m.ttft_seconds, 0.5);
  QCOMPARE(m.inter_token.count, qint64(4));
  QCOMPARE(m.inter_token.p50, 0.15);
  QCOMPARE(m.inter_token.p90, 0.34);
  QCOMPARE(m.inter_token.p99, 0.394);
  QCOMPARE(m.prompt_tokens_per_s, 50.0);
  QCOMPARE(m.generation_tokens_per_s, 5.0);  // 4 gaps in 0.8 s
  // Decode: 2e9 B/token x 5 tokens/s over 50 GB/s = 20%; 1e9 FLOP x 5 / 200 GFLOP/s = 2.5%.
  QCOMPARE(*m.decode_mbu, 0.2);
  QCOMPARE(*m.decode_mfu, 0.025);
  // Prefill: 1e8 FLOP/token x 50 tokens/s over 200 GFLOP/s = 2.5%; 5e7 B x 50 / 50 GB/s = 5%.
  QCOMPARE(*m.prefill_mfu, 0.025);
  QCOMPARE(*m.prefill_mbu, 0.05);

  auto text = [&](int column) { return model.data(model.index(0, column)).toString(); };
  QCOMPARE(text(MetricsModel::RequestColumn), QStringLiteral("#7"));
  QCOMPARE(text(MetricsModel::TtftColumn), QStringLiteral("500 ms"));
  QCOMPARE(text(MetricsModel::ItlP50Column), QStringLiteral("150 ms"));
  QCOMPARE(text(MetricsModel::ItlP90Column), QStringLiteral("340 ms"));
  QCOMPARE(text(MetricsModel::ItlP99Column), QStringLiteral("394 ms"));
  QCOMPARE(text(MetricsModel::PromptRateColumn), QStringLiteral("50.0"));
  QCOMPARE(text(MetricsModel::GenerationRateColumn), QStringLiteral("5.0"));
  QCOMPARE(text(MetricsModel::MbuColumn), QStringLiteral("20.0%"));
  QCOMPARE(text(MetricsModel::MfuColumn), QStringLiteral("2.5%"));
}

// The share of a request's parallel regions the pool ran on fewer threads, with the counts in
// the tooltip; a request the worker measured only when it finished (a served one) shows "—";
// the worker's measure() takes the pool counters' growth since the request went in.
void TestMetricsMemory::busyCpuShare() {
  MetricsModel model;
  RequestMeasurement busy = measurement(1, 0.0), quiet = measurement(2, 2.0), unknown = measurement(3, 4.0);
  busy.numParallelRegions = 200;
  busy.numContendedRegions = 50;
  quiet.numParallelRegions = 120;
  quiet.numContendedRegions = 0;
  model.addRequest(busy);
  model.addRequest(quiet);
  model.addRequest(unknown);
  auto text = [&](int row, int role = Qt::DisplayRole) {
    return model.data(model.index(row, MetricsModel::ContentionColumn), role).toString();
  };
  QCOMPARE(text(0), QStringLiteral("25.0%"));
  QVERIFY(text(0, Qt::ToolTipRole).startsWith(QStringLiteral("50 of 200 parallel regions")));
  QCOMPARE(text(1), QStringLiteral("0%"));
  QCOMPARE(text(2), QStringLiteral("—"));
  QCOMPARE(formatContendedShare(busy), text(0));  // the Metrics summary line says it the same way
  QCOMPARE(model.headerData(MetricsModel::ContentionColumn, Qt::Horizontal).toString(), QStringLiteral("Busy CPU"));

  WorkerMeasurements measurements;
  iwb::RequestFinished finished;
  finished.num_generated_tokens = 0;
  WorkerRequests::Entry served;  // no counters at its start
  QCOMPARE(measurements.measure(finished, served, nullptr).numContendedRegions, qint64(-1));
  WorkerRequests::Entry chat;
  chat.poolAtAdd = iwb::thread_pool_stats();
  const RequestMeasurement m = measurements.measure(finished, chat, nullptr);
  QCOMPARE(m.numContendedRegions, qint64(0));  // nothing ran in between
  QCOMPARE(m.numParallelRegions, qint64(0));
}

// A reply whose decode read 2 GB a token (no cache holds that) at 10 GB/s against a stored
// 5 GB/s roof: MBU 200%, so the note under the summary says the probe ran at a slower moment.
// A new probe above the reply's rate takes that back.
void TestMetricsMemory::lowProbeIsPointedOut() {
  QTemporaryDir dir;
  QVERIFY(dir.isValid());
  const QString path = dir.filePath(QStringLiteral("results.sqlite"));
  const auto storeProbe = [&](double readBytesPerS, const char* date) {
    auto store = iwb::ResultsStore::open(path.toStdString());
    if (!store) return false;
    iwb::ProbeResult probe;
    probe.device_id = "cpu";
    probe.date = date;
    probe.read_bytes_per_s = probe.copy_bytes_per_s = readBytesPerS;
    probe.peak_flops = 200e9;
    return (*store)->add_probe(probe).is_ok();
  };
  QVERIFY(storeProbe(5e9, "2026-01-01T00:00:00Z"));
  EngineController engine;
  MachineCeilings ceilings(path);
  ceilings.reload();
  MetricsPanel panel(&engine, &ceilings);
  auto* note = panel.findChild<QLabel*>(QStringLiteral("metricsCeilingsNote"));
  QVERIFY(note);
  QVERIFY2(!note->text().contains(QLatin1String("slower moment")), qPrintable(note->text()));
  emit engine.requestMeasured(measurement(7, 10.0));  // 2e9 B x 5 tokens/s
  QVERIFY2(note->text().contains(QLatin1String("Request #7 read its weights at 10 GB/s")) &&
               note->text().contains(QLatin1String("Measure again")),
           qPrintable(note->text()));
  QVERIFY(storeProbe(20e9, "2026-01-02T00:00:00Z"));
  ceilings.reload();
  QVERIFY2(!note->text().contains(QLatin1String("slower moment")), qPrintable(note->text()));
  QVERIFY(note->text().contains(QLatin1String("20 GB/s")));
}

// Each chart's legend sits in its top left corner; every point is drawn below it, also for a
// chart that got its data while the tab was hidden (the TTFT dot and a steady rate's line were
// drawn behind the legend).
void TestMetricsMemory::chartsKeepPointsFromUnderTheLegend() {
  QTemporaryDir dir;
  QVERIFY(dir.isValid());
  EngineController engine;
  MachineCeilings ceilings(dir.filePath(QStringLiteral("results.sqlite")));
  MetricsPanel panel(&engine, &ceilings);
  panel.resize(1100, 700);
  // Data first, with the panel hidden, as when the chat tab is in front.
  emit engine.tokenTimesReady(7, {10.5, 10.6});
  emit engine.requestMeasured(measurement(7, 10.0));
  panel.show();
  QVERIFY(QTest::qWaitForWindowExposed(&panel));
  for (const char* name : {"tokenRateChart", "latencyChart"}) {
    auto* chart = panel.findChild<QCustomPlot*>(QLatin1String(name));
    QVERIFY(chart);
    chart->replot();
    const QRect legend = chart->legend->outerRect();
    int numPoints = 0;
    for (int g = 0; g < chart->graphCount(); ++g) {
      for (auto it = chart->graph(g)->data()->constBegin(); it != chart->graph(g)->data()->constEnd(); ++it) {
        if (std::isnan(it->value)) continue;
        const double y = chart->yAxis->coordToPixel(it->value);
        QVERIFY2(y > legend.bottom(), qPrintable(QStringLiteral("%1: %2 at %3 px, the legend down to %4")
                                                     .arg(QLatin1String(name))
                                                     .arg(it->value)
                                                     .arg(y)
                                                     .arg(legend.bottom())));
        ++numPoints;
      }
    }
    QVERIFY(numPoints > 0);
  }
}

void TestMetricsMemory::utilisationNeedsCeilings() {
  MetricsModel model;  // never probed: zero ceilings
  model.addRequest(measurement(1, 0.0));
  QVERIFY(!model.row(0).metrics.decode_mbu);
  QCOMPARE(model.data(model.index(0, MetricsModel::MbuColumn)).toString(), QStringLiteral("—"));
  QSignalSpy changed(&model, &QAbstractItemModel::dataChanged);
  model.setCeilings({50e9, 200e9});  // measured later: the rows follow
  QCOMPARE(changed.count(), 1);
  QCOMPARE(*model.row(0).metrics.decode_mbu, 0.2);
  // Over time: one point per request at its last token (0 + 1.3 s), in percent.
  QCOMPARE(model.decodeMbuSeries().size(), 1);
  QCOMPARE(model.decodeMbuSeries()[0], QPointF(1.3, 20.0));
  QCOMPARE(model.prefillMfuSeries()[0], QPointF(1.3, 2.5));

  RequestMeasurement noCost = measurement(2, 5.0);
  noCost.cost.reset();  // a model the cost model cannot describe
  model.addRequest(noCost);
  QVERIFY(!model.row(1).metrics.decode_mbu);
  QCOMPARE(model.row(1).metrics.generation_tokens_per_s, 5.0);
  QCOMPARE(model.decodeMbuSeries().size(), 1);  // no point without the predicted work
}

void TestMetricsMemory::seriesFollowTokenTimes() {
  MetricsModel model;
  QSignalSpy series(&model, &MetricsModel::seriesChanged);
  // Two tokens arrive live, the rest with the finished request.
  model.appendTokenTimes(7, {10.5, 10.6});
  QCOMPARE(series.count(), 1);
  QCOMPARE(model.interTokenSeries().size(), 1);
  model.addRequest(measurement(7, 10.0));
  const QVector<QPointF>& itl = model.interTokenSeries();
  QCOMPARE(itl.size(), 4);
  QCOMPARE(itl[0].x(), 10.6);
  QCOMPARE(itl[0].y(), 100.0);
  QCOMPARE(itl[1].y(), 200.0);
  QCOMPARE(itl[3].x(), 11.3);
  QCOMPARE(itl[3].y(), 400.0);
  // Tokens/s over the last up-to-8 gaps: 1/0.1, 2/0.3, 3/0.4, 4/0.8.
  const QVector<QPointF>& rate = model.tokenRateSeries();
  QCOMPARE(rate.size(), 4);
  QCOMPARE(rate[0].y(), 10.0);
  QCOMPARE(rate[1].y(), 2.0 / 0.3);
  QCOMPARE(rate[2].y(), 7.5);
  QCOMPARE(rate[3].y(), 5.0);
  QCOMPARE(model.ttftSeries().size(), 1);
  QCOMPARE(model.ttftSeries()[0], QPointF(10.5, 500.0));

  // The next request's line starts apart (a NaN between) and its first token is no gap.
  model.appendTokenTimes(8, {20.0, 20.25});
  QCOMPARE(itl.size(), 6);
  QVERIFY(std::isnan(itl[4].y()));
  QCOMPARE(itl[5], QPointF(20.25, 250.0));

  model.clear();
  QCOMPARE(model.rowCount(), 0);
  QVERIFY(model.interTokenSeries().isEmpty());
  QVERIFY(model.ttftSeries().isEmpty());
}

void TestMetricsMemory::oldRequestsLeaveTheTable() {
  MetricsModel model;
  for (int i = 0; i < MetricsModel::kMaxRows + 5; ++i) model.addRequest(measurement(quint64(i + 1), i * 2.0));
  QCOMPARE(model.rowCount(), MetricsModel::kMaxRows);
  QCOMPARE(model.row(0).measurement.requestId, quint64(6));
  QCOMPARE(model.latest()->measurement.requestId, quint64(MetricsModel::kMaxRows + 5));
}

void TestMetricsMemory::memoryEstimateRows() {
  MemoryModel model;
  QVERIFY(!model.estimate());
  QCOMPARE(model.fit(), MemoryFit::Unknown);
  model.setModelSummary(summary());
  model.setContext(256);
  // f16 K and V: 2 layers x 2 KV heads x (16 + 16) x 2 bytes = 256 bytes per position.
  QCOMPARE(model.kvBytesPerPosition(), qint64(256));
  const iwb::MemoryEstimate e = *model.estimate();
  // The engine's pool: four contexts of 256 positions in blocks of 16 (the device's free memory
  // is unknown here, so nothing caps it).
  QCOMPARE(e.kv_cache_bytes, uint64_t(4 * 256 * 256));
  QCOMPARE(model.kvPool()->num_blocks, int64_t(64));
  QCOMPARE(model.findRow(QStringLiteral("Weights"))->estimateBytes, qint64(1'000'000));
  QCOMPARE(model.findRow(QStringLiteral("KV cache"))->estimateBytes, qint64(262'144));
  QVERIFY(model.findRow(QStringLiteral("KV cache"))
              ->source.contains(QStringLiteral("64 blocks of 16 positions, 4 contexts of 256")));
  // Engine Settings: a 100,000-byte budget holds 24 blocks of 16 x 256 bytes.
  iwb::EngineOptions options;
  options.kv_cache_bytes = 100'000;
  model.setEngineOptions(options);
  QCOMPARE(model.findRow(QStringLiteral("KV cache"))->estimateBytes, qint64(24 * 16 * 256));
  model.setEngineOptions({});
  QCOMPARE(model.findRow(QStringLiteral("Scratch"))->estimateBytes, qint64(e.scratch_bytes));
  QCOMPARE(model.findRow(QStringLiteral("Total"))->estimateBytes, qint64(e.total()));
  // Weights by type, from the tensor table.
  QCOMPARE(model.findRow(QStringLiteral("Q4_K (5 tensors)"))->estimateBytes, qint64(800'000));
  QCOMPARE(model.findRow(QStringLiteral("F32 (2 tensors)"))->estimateBytes, qint64(200'000));
  // Nothing measured before the model loads, and the table says so.
  QCOMPARE(model.findRow(QStringLiteral("Weights"))->measuredBytes, qint64(-1));
  QVERIFY(!model.findRow(QStringLiteral("KV cache in use")));
  const int weightsRow = 0;
  QCOMPARE(model.data(model.index(weightsRow, MemoryModel::MeasuredColumn)).toString(), QStringLiteral("—"));
  QCOMPARE(model.data(model.index(weightsRow, MemoryModel::DifferenceColumn)).toString(), QStringLiteral("—"));
}

void TestMetricsMemory::memoryMeasuredBesideEstimate() {
  MemoryModel model;
  model.setModelSummary(summary());
  model.setContext(256);
  MemorySample s;
  s.isValid = true;
  s.baselineAnonBytes = 100'000'000;
  s.baselineFileBytes = 20'000'000;
  s.residentAnonBytes = 100'070'000;  // +70,000 anonymous
  s.residentFileBytes = 20'600'000;   // +600,000 of the mapped file
  s.residentBytes = 120'670'000;
  s.kvPositions = 10;
  s.contextLength = 256;
  model.setSample(s);
  QVERIFY(model.isLoaded());
  const auto* weights = model.findRow(QStringLiteral("Weights"));
  QCOMPARE(weights->measuredBytes, qint64(600'000));
  QCOMPARE(*weights->difference(), qint64(-400'000));  // pages not read yet: shown, not hidden
  const int weightsRow = static_cast<int>(weights - &model.rows().front());
  QCOMPARE(model.data(model.index(weightsRow, MemoryModel::DifferenceColumn)).toString(),
           QStringLiteral("−390.6 KiB (−40.0%)"));
  QCOMPARE(model.findRow(QStringLiteral("KV cache in use"))->estimateBytes, qint64(2'560));
  const auto* anon = model.findRow(QStringLiteral("KV cache, scratch and heap"));
  QCOMPARE(anon->measuredBytes, qint64(70'000));
  QCOMPARE(anon->estimateBytes, model.findRow(QStringLiteral("KV cache"))->estimateBytes +
                                    model.findRow(QStringLiteral("Scratch"))->estimateBytes);
  QCOMPARE(model.findRow(QStringLiteral("Total"))->measuredBytes, qint64(670'000));
  QCOMPARE(model.findRow(QStringLiteral("Process resident (VmRSS)"))->measuredBytes, qint64(120'670'000));

  // Weights read into memory (load mode none, the CPU's default where they fit) are anonymous
  // memory: the weights row counts them, the anonymous row leaves them out, the total is as before.
  MemorySample read = s;
  read.residentAnonBytes = 101'070'000;  // the 1,000,000-byte file read, and the same 70,000
  read.residentFileBytes = 20'000'000;   // no file pages mapped
  read.weightsReadBytes = 1'000'000;
  model.setSample(read);
  QCOMPARE(model.findRow(QStringLiteral("Weights"))->measuredBytes, qint64(1'000'000));
  QCOMPARE(*model.findRow(QStringLiteral("Weights"))->difference(), qint64(0));
  QVERIFY(model.findRow(QStringLiteral("Weights"))->source.contains(QStringLiteral("read into memory")));
  QCOMPARE(model.findRow(QStringLiteral("KV cache, scratch and heap"))->measuredBytes, qint64(70'000));
  QCOMPARE(model.findRow(QStringLiteral("Total"))->measuredBytes, qint64(1'070'000));
  model.setSample(s);

  // The cache grows: the in-use row follows the next sample.
  s.kvPositions = 100;
  model.setSample(s);
  QCOMPARE(model.findRow(QStringLiteral("KV cache in use"))->estimateBytes, qint64(25'600));

  // With the engine's own report, the KV pool and scratch are measured, not inferred.
  s.hasEngineReport = true;
  s.kvPoolBytes = 4 * 65'536;  // a pool of four contexts
  s.kvBytesPerPosition = 256;
  s.kvPositionsTotal = 1024;
  s.kvPositionsUsed = 100;
  s.kvPositionsCached = 32;
  s.scratchBytes = 12'345;
  model.setSample(s);
  const auto* kv = model.findRow(QStringLiteral("KV cache"));
  QCOMPARE(kv->measuredBytes, qint64(262'144));
  QCOMPARE(*kv->difference(), qint64(0));  // the estimate is the engine's own rule: four contexts
  QCOMPARE(model.findRow(QStringLiteral("KV cache in use"))->measuredBytes, qint64(25'600));
  QVERIFY(model.findRow(QStringLiteral("KV cache in use"))->source.contains(QStringLiteral("32 more")));
  QCOMPARE(model.findRow(QStringLiteral("Scratch"))->measuredBytes, qint64(12'345));
  // The estimate's pool rule names Engine Settings' cache type and its blocks.
  QVERIFY2(kv->source.contains(
               QStringLiteral("f16 cache, %1 per block of 16 positions").arg(QLocale().formattedDataSize(16 * 256))),
           qPrintable(kv->source));
  // A quantized cache as the engine reports it: its type and bytes per block and position.
  s.kvCacheType = QStringLiteral("q8_0");
  s.kvBlockSize = 16;
  s.kvBytesPerPosition = 136;  // the report's figure, whatever the shape
  model.setSample(s);
  kv = model.findRow(QStringLiteral("KV cache"));
  QVERIFY2(kv->source.contains(QStringLiteral("q8_0 cache, %1 per block of 16 positions (%2 per position)")
                                   .arg(QLocale().formattedDataSize(16 * 136), QLocale().formattedDataSize(136))),
           qPrintable(kv->source));
  QVERIFY2(!kv->source.contains(QStringLiteral("2 MiB pages")), qPrintable(kv->source));
  // A host pool in 2 MiB pages says how much of it the kernel gave them.
  s.kvHugePageBytes = 4 << 20;
  model.setSample(s);
  kv = model.findRow(QStringLiteral("KV cache"));
  QVERIFY2(kv->source.startsWith(
               QStringLiteral("the engine's paged KV pool, allocated at load (4.0 MiB of it in 2 MiB pages): ")),
           qPrintable(kv->source));
  s.kvHugePageBytes = 0;
  s.hasEngineReport = false;

  // Unloaded: a sample without a context is not a loaded model.
  s.contextLength = 0;
  model.setSample(s);
  QVERIFY(!model.isLoaded());
  QCOMPARE(model.findRow(QStringLiteral("Weights"))->measuredBytes, qint64(-1));
}

void TestMetricsMemory::memoryFits() {
  MemoryModel model;
  model.setModelSummary(summary());
  model.setContext(256);
  const uint64_t need = model.estimate()->total();
  model.setDevice(device(10ull << 30));
  QCOMPARE(model.fit(), MemoryFit::Fits);
  QVERIFY(model.fitText().startsWith(QLatin1String("Fits:")));
  model.setDevice(device(need + need / 10));  // under 20% to spare
  QCOMPARE(model.fit(), MemoryFit::Tight);
  model.setDevice(device(need - 1));
  QCOMPARE(model.fit(), MemoryFit::DoesNotFit);
  QVERIFY(model.fitText().startsWith(QLatin1String("Does not fit")));
  // A longer context needs more: 4096 positions of KV cache no longer fit in what 256 needed.
  model.setDevice(device(need + need / 2));
  QCOMPARE(model.fit(), MemoryFit::Fits);
  model.setContext(4096);
  QCOMPARE(model.fit(), MemoryFit::DoesNotFit);
  model.setDevice(device(0));  // free memory unknown
  QCOMPARE(model.fit(), MemoryFit::Unknown);
}

// A recurrent model (Qwen 3.5's layout: three recurrent layers, then one attending): the KV
// pool of the attention layer alone, and a recurrent state for each sequence the pool's full
// contexts hold, then the engine's live sequences' states once loaded.
void TestMetricsMemory::memoryRecurrentState() {
  iwb::ModelSummary s = summary();
  s.architecture = "qwen35";
  s.hparams.block_count = 4;
  for (int il = 0; il < 4; ++il) {
    const bool isRecurrent = il != 3;
    s.hparams.layer_kv.push_back({isRecurrent ? 0 : 2, 16, 16, false, isRecurrent});
  }
  s.hparams.recurrent_state_bytes_per_sequence = 10'000;
  MemoryModel model;
  model.setModelSummary(s);
  model.setContext(256);
  // f16 K and V of one layer: 2 KV heads x (16 + 16) x 2 bytes = 128 bytes per position.
  QCOMPARE(model.kvBytesPerPosition(), qint64(128));
  QCOMPARE(model.findRow(QStringLiteral("KV cache"))->estimateBytes, qint64(4 * 256 * 128));
  QCOMPARE(model.recurrentSequences(), qint64(4));  // the pool's four contexts
  const auto* recurrent = model.findRow(QStringLiteral("Recurrent state"));
  QVERIFY(recurrent);
  QCOMPARE(recurrent->estimateBytes, qint64(40'000));
  QVERIFY2(recurrent->source.contains(QStringLiteral("4 sequences")), qPrintable(recurrent->source));
  const iwb::MemoryEstimate e = *model.estimate();
  QCOMPARE(model.findRow(QStringLiteral("Total"))->estimateBytes, qint64(e.total()));
  QCOMPARE(e.total(), e.weight_bytes + e.kv_cache_bytes + e.scratch_bytes + 40'000);
  QCOMPARE(model.findRow(QStringLiteral("KV cache, scratch and heap"))->estimateBytes,
           qint64(e.kv_cache_bytes + e.scratch_bytes + 40'000));
  // Engine Settings' running sequences cap how many states the estimate counts.
  iwb::EngineOptions options;
  options.max_running_sequences = 2;
  model.setEngineOptions(options);
  QCOMPARE(model.findRow(QStringLiteral("Recurrent state"))->estimateBytes, qint64(20'000));
  model.setEngineOptions({});

  // Loaded: the engine's report says how many sequences hold a state now.
  MemorySample sample;
  sample.isValid = true;
  sample.contextLength = 256;
  sample.hasEngineReport = true;
  sample.recurrentStateBytes = 30'000;
  sample.recurrentStateBytesPerSequence = 10'000;
  sample.recurrentNumSequences = 3;
  model.setSample(sample);
  recurrent = model.findRow(QStringLiteral("Recurrent state"));
  QCOMPARE(recurrent->measuredBytes, qint64(30'000));
  QVERIFY2(recurrent->source.startsWith(QStringLiteral("3 live sequences × %1").arg(QStringLiteral("9.8 KiB"))),
           qPrintable(recurrent->source));
  QCOMPARE(model.findRow(QStringLiteral("Recurrent-state checkpoints"))->measuredBytes, qint64(0));
  sample.recurrentCheckpointBytes = 20'000;
  sample.recurrentNumCheckpoints = 2;
  model.setSample(sample);
  const MemoryModel::Row* kept = model.findRow(QStringLiteral("Recurrent-state checkpoints"));
  QCOMPARE(kept->measuredBytes, qint64(20'000));
  QCOMPARE(kept->estimateBytes, qint64(-1));
  QVERIFY2(kept->source.startsWith(QStringLiteral("2 states kept")), qPrintable(kept->source));

  // A model without recurrent layers has no such row.
  model.setModelSummary(summary());
  QVERIFY(!model.findRow(QStringLiteral("Recurrent state")));
  QVERIFY(!model.findRow(QStringLiteral("Recurrent-state checkpoints")));
  QCOMPARE(model.recurrentSequences(), qint64(0));

  // The tab's chart stacks the states on the KV cache and names them in its legend, in order.
  EngineController engine;
  MemoryPanel panel(&engine);
  panel.setModelSummary(s);
  panel.setContext(256);
  const auto legendNames = [&] {
    QStringList names;
    for (int i = 0; i < panel.chart()->legend->itemCount(); ++i) {
      names << qobject_cast<QCPPlottableLegendItem*>(panel.chart()->legend->item(i))->plottable()->name();
    }
    return names;
  };
  QCOMPARE(legendNames(), (QStringList{"weights", "KV cache", "recurrent state", "scratch",
                                       "KV cache + scratch + heap (measured)", "available"}));
  auto* states = qobject_cast<QCPBars*>(panel.chart()->plottable(5));
  QCOMPARE(states->barBelow()->name(), QStringLiteral("KV cache"));
  QCOMPARE(states->data()->findBegin(1, false)->value, 40'000.0 / (1 << 30));
  panel.setModelSummary(summary());
  QVERIFY(!legendNames().contains(QStringLiteral("recurrent state")));
}

void TestMetricsMemory::procStatusParsing() {
  const QByteArray text =
      "Name:\ttest\nVmPeak:\t  900000 kB\nVmRSS:\t    5120 kB\nRssAnon:\t    3072 kB\nRssFile:\t    2048 kB\n"
      "RssShmem:\t       0 kB\nThreads:\t3\n";
  const MemorySample s = parseProcStatus(text);
  QVERIFY(s.isValid);
  QCOMPARE(s.residentBytes, qint64(5120) * 1024);
  QCOMPARE(s.residentAnonBytes, qint64(3072) * 1024);
  QCOMPARE(s.residentFileBytes, qint64(2048) * 1024);
  QVERIFY(!parseProcStatus("VmRSS:\t 12 kB\n").isValid);  // no split: not usable
  QVERIFY(!parseProcStatus("garbage").isValid);
  // This process, for real.
  const MemorySample self = readProcessMemory();
  QVERIFY(self.isValid);
  QVERIFY(self.residentBytes > 0);
  QVERIFY(self.residentAnonBytes + self.residentFileBytes <= self.residentBytes);
}

void TestMetricsMemory::benchRunsFromTheStore() {
  QTemporaryDir dir;
  QVERIFY(dir.isValid());
  const QString path = dir.filePath(QStringLiteral("results.sqlite"));
  BenchResultsModel model;
  QVERIFY(model.reload(path));  // a new store: no runs
  QCOMPARE(model.rowCount(), 0);
  {
    auto store = iwb::ResultsStore::open(path.toStdString());
    QVERIFY(store);
    iwb::BenchResult pp;
    pp.date = "2025-03-04T05:06:07Z";
    pp.device_id = "cpu";
    pp.device_name = "Test CPU";
    pp.model_path = "/models/tiny.gguf";
    pp.model_name = "tiny";
    pp.file_type = "Q4_K_M";
    pp.num_threads = 2;
    pp.test = "pp512";
    pp.num_prompt_tokens = 512;
    pp.num_repetitions = 3;
    pp.tokens_per_s_mean = 123.456;
    pp.tokens_per_s_sd = 1.5;
    pp.tokens_per_s = {122.0, 123.0, 125.368};
    pp.mfu = 0.25;
    pp.probe_date = "2025-03-04T05:00:00Z";
    iwb::BenchResult tg = pp;
    tg.date = "2025-03-04T05:07:00Z";
    tg.test = "tg128";
    tg.num_prompt_tokens = 4;
    tg.num_generated_tokens = 128;
    tg.tokens_per_s_mean = 12.0;
    tg.tokens_per_s_sd = 0.25;
    tg.tokens_per_s = {11.75, 12.0, 12.25};
    tg.mfu.reset();
    tg.mbu = 0.43;
    QVERIFY((*store)->add_bench_result(pp));
    QVERIFY((*store)->add_bench_result(tg));
  }
  QVERIFY2(model.reload(path), qPrintable(model.errorMessage()));
  QCOMPARE(model.rowCount(), 2);
  auto text = [&](int row, int column) { return model.data(model.index(row, column)).toString(); };
  // Newest first.
  QCOMPARE(text(0, BenchResultsModel::TestColumn), QStringLiteral("tg128"));
  QCOMPARE(text(0, BenchResultsModel::RateColumn), QStringLiteral("12.00 ± 0.25"));
  QCOMPARE(text(0, BenchResultsModel::MbuColumn), QStringLiteral("43.0%"));
  QCOMPARE(text(0, BenchResultsModel::MfuColumn), QStringLiteral("—"));
  QCOMPARE(text(1, BenchResultsModel::TestColumn), QStringLiteral("pp512"));
  QCOMPARE(text(1, BenchResultsModel::RateColumn), QStringLiteral("123.46 ± 1.50"));
  QCOMPARE(text(1, BenchResultsModel::MfuColumn), QStringLiteral("25.0%"));
  QCOMPARE(text(1, BenchResultsModel::DateColumn), QStringLiteral("2025-03-04 05:06:07"));
  QCOMPARE(text(1, BenchResultsModel::ModelColumn), QStringLiteral("tiny"));
  QCOMPARE(text(1, BenchResultsModel::TypeColumn), QStringLiteral("Q4_K_M"));

  // A file that is not a store: an error, and the rows stay.
  const QString bogus = dir.filePath(QStringLiteral("not-a-db.sqlite"));
  QFile file(bogus);
  QVERIFY(file.open(QIODevice::WriteOnly));
  file.write(QByteArray(4096, 'x'));
  file.close();
  QVERIFY(!model.reload(bogus));
  QVERIFY(!model.errorMessage().isEmpty());
  QCOMPARE(model.rowCount(), 2);
}

QTEST_MAIN(TestMetricsMemory)
#include "test_metrics_memory.moc"
