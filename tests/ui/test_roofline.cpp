// Tests of the roofline's data and chart without a model: roofs from a probe (the read-only
// bandwidth as the memory roof, the copy bandwidth drawn beside it), points from
// synthetic kernel records with known FLOPs, bytes and seconds (exact coordinates), last steps
// against the running aggregate, % of the roof, CSV export, predicted points from a cost-model
// preset, hit tests and tooltips on the plot, PNG/SVG export, the low-probe note, and "measure
// now" into a store. Where the plot puts its labels and legend: test_roofline_layout.cpp.
#include "roofline_fixtures.h"

#include "iwb/engine/backend/device_info.h"
#include "iwb/engine/profile/cost_model.h"
#include "iwb/engine/profile/profile_aggregate.h"
#include "iwb/engine/store/results_store.h"
#include "roofline/machine_ceilings.h"
#include "roofline/roofline_model.h"
#include "roofline/roofline_panel.h"
#include "roofline/roofline_plot.h"
#include "widgets/chart_labels.h"
#include "worker/engine_controller.h"

#include <QCheckBox>
#include <QComboBox>
#include <QFile>
#include <QImage>
#include <QLabel>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QTest>

#include <algorithm>
#include <cmath>

using namespace iwb::ui;
using iwb::KernelRecord;
using iwb::OpKind;
using iwb::Phase;
using iwb::test::batch;
using iwb::test::record;
using iwb::test::syntheticProbe;

namespace {

// One prefill step and two decode steps, folded by the engine's decimator into one snapshot.
//   prefill matmul: (8e9 + 2e9) FLOP, 2e9 B, 0.2 s -> intensity 5, 5e10 FLOP/s
//   prefill rmsnorm: 4e6 FLOP, 8e6 B, 1e-3 s     -> intensity 0.5, 4e9 FLOP/s
//   decode matmul, step 1: 2e9 FLOP, 1e9 B, 0.05 s; step 2: 2e9 FLOP, 1e9 B, 0.1 s
iwb::ProfileSnapshot syntheticSnapshot() {
  iwb::ProfileDecimator decimator(10.0);
  decimator.add(batch(0, Phase::Prefill,
                      {record(OpKind::Matmul, "attn_q", 8e9, 1e9, 0.1), record(OpKind::Matmul, "ffn_down", 2e9, 1e9, 0.1),
                       record(OpKind::RmsNorm, "attn_norm", 4e6, 8e6, 1e-3)}),
                0.0);
  decimator.add(batch(1, Phase::Decode, {record(OpKind::Matmul, "attn_q", 2e9, 1e9, 0.05)}), 0.01);
  decimator.add(batch(2, Phase::Decode, {record(OpKind::Matmul, "attn_q", 2e9, 1e9, 0.1)}), 0.02);
  auto snapshot = decimator.flush(0.03);
  Q_ASSERT(snapshot.has_value());
  return *snapshot;
}

// Bandwidth 50 GB/s (the better of copy and triad), peak 200 GFLOP/s: ridge at 4 FLOP/byte.
}  // namespace

class TestRoofline : public QObject {
  Q_OBJECT

 private slots:
  void roofsFromProbe();
  void int8RoofFromProbe();
  void quantizedProductsUseTheInt8Roof();
  void readOnlyAndCopyRoofs();
  void pointsHaveExactCoordinates();
  void runningAggregateSumsSteps();
  void fractionOfRoof();
  void csvExport();
  void predictedPointsFromPreset();
  void panelPredictsAPreset();
  void plotHitTestAndTooltip();
  void plotExportsPngAndSvg();
  void panelSaysWhenTheProbeLooksLow();
  void measureNowStoresTheProbe();
  void measureCanBeCancelled();
};

void TestRoofline::roofsFromProbe() {
  RooflineModel model;
  QVERIFY(!model.measuredRoof());
  QSignalSpy roofs(&model, &RooflineModel::roofsChanged);
  model.setProbe(syntheticProbe());
  QCOMPARE(roofs.count(), 1);
  const Roof& roof = *model.measuredRoof();
  QVERIFY(roof.isMeasured);
  QCOMPARE(roof.bandwidthBytesPerS, 50e9);
  QCOMPARE(roof.peakFlops, 200e9);
  QCOMPARE(roof.ridgePoint(), 4.0);
  QCOMPARE(roof.attainableFlops(1.0), 50e9);   // on the slope
  QCOMPARE(roof.attainableFlops(4.0), 200e9);  // the ridge
  QCOMPARE(roof.attainableFlops(100.0), 200e9);  // under the ceiling
  QCOMPARE(roof.label, QStringLiteral("cpu copy"));  // the date is in the panel's header line

  // The datasheet roofs of ANCHORS.md.
  const QList<Roof> sheets = datasheetRoofs();
  QCOMPARE(sheets.size(), 2);
  QCOMPARE(sheets[0].bandwidthBytesPerS, 3.35e12);
  QCOMPARE(sheets[0].peakFlops, 989e12);
  QCOMPARE(sheets[1].bandwidthBytesPerS, 4.8e12);
  QVERIFY(!sheets[0].isMeasured);
  QVERIFY(qAbs(sheets[1].ridgePoint() - 206.0) < 1.0);

  // A probe without figures draws no roof.
  model.setProbe(iwb::ProbeResult{});
  QVERIFY(!model.measuredRoof());
}

void TestRoofline::pointsHaveExactCoordinates() {
  RooflineModel model;
  model.setSnapshot(syntheticSnapshot());
  QCOMPARE(model.source(), RooflineSource::LastSteps);
  QCOMPARE(model.rowCount(), 3);  // prefill matmul, prefill rmsnorm, decode matmul

  const RooflinePoint* prefill = model.findPoint(OpKind::Matmul, Phase::Prefill, false);
  QVERIFY(prefill);
  QCOMPARE(prefill->numCalls, qint64(2));
  QCOMPARE(prefill->intensity, 5.0);
  QCOMPARE(prefill->flopsPerS, 5e10);
  QCOMPARE(prefill->seconds, 0.2);
  QCOMPARE(prefill->shapes, QStringList{QStringLiteral("256x1536 Q4_K, 16 tok")});

  const RooflinePoint* norm = model.findPoint(OpKind::RmsNorm, Phase::Prefill, false);
  QVERIFY(norm);
  QCOMPARE(norm->intensity, 0.5);
  QCOMPARE(norm->flopsPerS, 4e9);

  // Last steps: the newest decode step only.
  const RooflinePoint* decode = model.findPoint(OpKind::Matmul, Phase::Decode, false);
  QVERIFY(decode);
  QCOMPARE(decode->numCalls, qint64(1));
  QCOMPARE(decode->intensity, 2.0);
  QCOMPARE(decode->flopsPerS, 2e10);

  // The table shows the same numbers.
  const int row = static_cast<int>(decode - &model.points().front());
  QCOMPARE(model.data(model.index(row, RooflineModel::OpColumn)).toString(), QStringLiteral("matmul"));
  QCOMPARE(model.data(model.index(row, RooflineModel::PhaseColumn)).toString(), QStringLiteral("decode"));
  QCOMPARE(model.data(model.index(row, RooflineModel::IntensityColumn), Qt::UserRole).toDouble(), 2.0);
  QCOMPARE(model.data(model.index(row, RooflineModel::FlopsColumn)).toString(), QStringLiteral("20 GFLOP/s"));
  QCOMPARE(model.data(model.index(row, RooflineModel::SourceColumn)).toString(), QStringLiteral("measured"));
  QCOMPARE(model.data(model.index(row, RooflineModel::RoofColumn)).toString(), QStringLiteral("—"));  // no probe

  model.clearMeasured();
  QCOMPARE(model.rowCount(), 0);
}

void TestRoofline::runningAggregateSumsSteps() {
  RooflineModel model;
  model.setSnapshot(syntheticSnapshot());
  QSignalSpy reset(&model, &QAbstractItemModel::modelReset);
  model.setSource(RooflineSource::Running);
  QCOMPARE(reset.count(), 1);
  QCOMPARE(model.numProfiledSteps(), qint64(3));
  const RooflinePoint* decode = model.findPoint(OpKind::Matmul, Phase::Decode, false);
  QVERIFY(decode);
  // Both decode steps: 4e9 FLOP over 2e9 B in 0.15 s.
  QCOMPARE(decode->numCalls, qint64(2));
  QCOMPARE(decode->intensity, 2.0);
  QVERIFY(qAbs(decode->flopsPerS - 4e9 / 0.15) < 1.0);
  // The prefill had one step: the same either way.
  QCOMPARE(model.findPoint(OpKind::Matmul, Phase::Prefill, false)->flopsPerS, 5e10);
  model.setSource(RooflineSource::LastSteps);
  QCOMPARE(model.findPoint(OpKind::Matmul, Phase::Decode, false)->flopsPerS, 2e10);
}

void TestRoofline::fractionOfRoof() {
  RooflineModel model;
  model.setSnapshot(syntheticSnapshot());
  model.setProbe(syntheticProbe());
  // Decode matmul at intensity 2: roof = min(200e9, 50e9 x 2) = 100e9; achieved 2e10 -> 20%.
  const RooflinePoint* decode = model.findPoint(OpKind::Matmul, Phase::Decode, false);
  QCOMPARE(decode->roofFlopsPerS, 100e9);
  QCOMPARE(decode->fractionOfRoof(), 0.2);
  // Prefill matmul at intensity 5, past the ridge: roof = the peak 200e9; 5e10 -> 25%.
  const RooflinePoint* prefill = model.findPoint(OpKind::Matmul, Phase::Prefill, false);
  QCOMPARE(prefill->roofFlopsPerS, 200e9);
  QCOMPARE(prefill->fractionOfRoof(), 0.25);
  // RMS norm at 0.5: roof 25e9; 4e9 -> 16%.
  QCOMPARE(model.findPoint(OpKind::RmsNorm, Phase::Prefill, false)->fractionOfRoof(), 0.16);
  const int row = static_cast<int>(decode - &model.points().front());
  QCOMPARE(model.data(model.index(row, RooflineModel::RoofColumn)).toString(), QStringLiteral("20.0%"));
}

void TestRoofline::csvExport() {
  RooflineModel model;
  model.setSnapshot(syntheticSnapshot());
  model.setProbe(syntheticProbe());
  const QStringList lines = model.toCsv().split(QLatin1Char('\n'), Qt::SkipEmptyParts);
  QCOMPARE(lines.size(), 4);  // header + 3 points
  QCOMPARE(lines[0], QStringLiteral("source,phase,op,calls,flops,bytes,seconds,intensity_flop_per_byte,flop_per_s,"
                                    "roof_flop_per_s,percent_of_roof,shapes"));
  // Shapes hold commas, so they are quoted; both prefill matmuls had one shape.
  QVERIFY2(lines.contains(QStringLiteral("measured,prefill,matmul,2,10000000000,2000000000,0.2,5,50000000000,"
                                         "200000000000,25.00,\"256x1536 Q4_K, 16 tok\"")),
           qPrintable(lines.join(QLatin1Char('\n'))));
  QVERIFY(lines.contains(QStringLiteral("measured,decode,matmul,1,2000000000,1000000000,0.1,2,20000000000,"
                                        "100000000000,20.00,\"256x1536 Q4_K, 1 tok\"")));
}

void TestRoofline::predictedPointsFromPreset() {
  auto shape = iwb::model_shape_preset("qwen2.5-0.5b", iwb::GgmlType::F16);
  QVERIFY2(shape, shape ? "" : shape.error_message().c_str());
  iwb::StepScenario decode;
  decode.phase = Phase::Decode;
  decode.num_tokens = 1;
  decode.num_cached_tokens = 511;
  iwb::StepScenario prefill;
  prefill.phase = Phase::Prefill;
  prefill.num_tokens = 128;
  auto decodeRecords = iwb::predict_step(*shape, decode);
  auto prefillRecords = iwb::predict_step(*shape, prefill);
  QVERIFY(decodeRecords && prefillRecords);
  std::vector<KernelRecord> records = *prefillRecords;
  records.insert(records.end(), decodeRecords->begin(), decodeRecords->end());

  RooflineModel model;
  model.setPrediction(records, QStringLiteral("qwen2.5-0.5b F16"));
  QCOMPARE(model.predictionLabel(), QStringLiteral("qwen2.5-0.5b F16"));
  const RooflinePoint* decodeMatmul = model.findPoint(OpKind::Matmul, Phase::Decode, true);
  const RooflinePoint* prefillMatmul = model.findPoint(OpKind::Matmul, Phase::Prefill, true);
  QVERIFY(decodeMatmul && prefillMatmul);
  // F16 matrix-vector: 2 FLOPs per 2-byte weight, plus a little activation traffic: just under 1.
  QVERIFY2(decodeMatmul->intensity > 0.95 && decodeMatmul->intensity < 1.0,
           qPrintable(QString::number(decodeMatmul->intensity)));
  // 128 tokens reuse each weight 128 times: far right of the decode.
  QVERIFY(prefillMatmul->intensity > 50 * decodeMatmul->intensity);
  // The aggregate matches the cost model's totals of the decode's matmuls.
  double flops = 0, bytes = 0;
  int64_t calls = 0;
  for (const KernelRecord& r : *decodeRecords) {
    if (r.kind != OpKind::Matmul) continue;
    flops += r.flops;
    bytes += r.bytes;
    ++calls;
  }
  QCOMPARE(decodeMatmul->numCalls, calls);
  QCOMPARE(decodeMatmul->intensity, flops / bytes);
  // Without a roof a prediction has no height; with one it sits on the roof.
  QVERIFY(!decodeMatmul->isPlottable());
  model.setProbe(syntheticProbe());
  decodeMatmul = model.findPoint(OpKind::Matmul, Phase::Decode, true);
  prefillMatmul = model.findPoint(OpKind::Matmul, Phase::Prefill, true);
  QCOMPARE(decodeMatmul->flopsPerS, 50e9 * decodeMatmul->intensity);  // bandwidth-bound
  QCOMPARE(decodeMatmul->seconds, bytes / 50e9);
  QCOMPARE(prefillMatmul->flopsPerS, 200e9);  // compute-bound
  QCOMPARE(model.data(model.index(static_cast<int>(decodeMatmul - &model.points().front()),
                                  RooflineModel::SourceColumn))
               .toString(),
           QStringLiteral("predicted"));
  model.clearPrediction();
  QCOMPARE(model.rowCount(), 0);
}

void TestRoofline::panelPredictsAPreset() {
  QTemporaryDir dir;
  QVERIFY(dir.isValid());
  EngineController engine;
  MachineCeilings ceilings(dir.filePath(QStringLiteral("results.sqlite")));
  RooflinePanel panel(&engine, &ceilings);
  QVERIFY(panel.selectAnalyticModel(QStringLiteral("llama-3.2-1b")));
  panel.setAnalyticScenario(64, 1, 256);
  QVERIFY(panel.predict());
  QVERIFY(panel.model()->findPoint(OpKind::Matmul, Phase::Prefill, true));
  QVERIFY(panel.model()->findPoint(OpKind::Attention, Phase::Decode, true));
  QVERIFY(panel.model()->predictionLabel().contains(QLatin1String("context 256")));
  QVERIFY(!panel.selectAnalyticModel(QStringLiteral("no-such-preset")));
  // The preset's weight type is the user's: Q8_0 stores 34 bytes per 32 weights, so a decode
  // matrix-vector product does 64 FLOPs per 34 bytes, a little under 1.88 FLOP/byte.
  auto* types = panel.findChild<QComboBox*>(QStringLiteral("analyticWeightTypeBox"));
  QVERIFY(types && types->isEnabled());
  types->setCurrentIndex(types->findData(QStringLiteral("Q8_0")));
  QVERIFY(panel.predict());
  const double q8 = panel.model()->findPoint(OpKind::Matmul, Phase::Decode, true)->intensity;
  QVERIFY2(q8 > 1.75 && q8 < 64.0 / 34.0, qPrintable(QString::number(q8)));

  // The panel's checkbox, its action and the engine agree.
  auto* box = panel.findChild<QCheckBox*>(QStringLiteral("profileKernelsBox"));
  QVERIFY(box);
  box->setChecked(true);
  QVERIFY(engine.isProfiling());
  QVERIFY(panel.profilingAction()->isChecked());
  panel.profilingAction()->setChecked(false);
  QVERIFY(!engine.isProfiling());
  QVERIFY(!box->isChecked());
}

void TestRoofline::plotHitTestAndTooltip() {
  RooflineModel model;
  model.setProbe(syntheticProbe());
  model.setSnapshot(syntheticSnapshot());
  RooflinePlot plot(&model);
  plot.resize(1800, 1100);
  plot.replot();  // lays the axes out now, not at the next event loop turn
  const int decodeRow = static_cast<int>(model.findPoint(OpKind::Matmul, Phase::Decode, false) - &model.points().front());
  const QPointF pixel = plot.pixelOf(decodeRow);
  QVERIFY(plot.rect().contains(pixel.toPoint()));
  QCOMPARE(plot.pointAt(pixel + QPointF(3, -2)), decodeRow);
  QCOMPARE(plot.pointAt(pixel + QPointF(60, 60)), -1);
  // Decode (intensity 2) sits left of and below the prefill matmul (intensity 5, 5e10 FLOP/s).
  const int prefillRow = static_cast<int>(model.findPoint(OpKind::Matmul, Phase::Prefill, false) - &model.points().front());
  QVERIFY(plot.pixelOf(prefillRow).x() > pixel.x());
  QVERIFY(plot.pixelOf(prefillRow).y() < pixel.y());

  const QString tip = RooflinePlot::pointToolTip(model.point(decodeRow));
  QVERIFY2(tip.contains(QLatin1String("matmul")) && tip.contains(QLatin1String("decode")), qPrintable(tip));
  QVERIFY2(tip.contains(QLatin1String("20.0%")), qPrintable(tip));
  QVERIFY2(tip.contains(QLatin1String("256x1536 Q4_K, 1 tok")), qPrintable(tip));
  QVERIFY2(tip.contains(QLatin1String("100 ms")), qPrintable(tip));

  // Roofs, the ridge marker and four point series at most; the datasheet roofs add two graphs.
  const int withoutSheets = plot.graphCount();
  plot.setShowsDatasheetRoofs(true);
  QCOMPARE(plot.graphCount(), withoutSheets + 2);

  // Hidden, the chart does not redraw on every update (and hit tests find nothing stale);
  // shown, it catches up.
  QVERIFY(!plot.isVisible());
  const int graphsBefore = plot.graphCount();
  model.clearMeasured();
  QCOMPARE(plot.graphCount(), graphsBefore);
  QCOMPARE(plot.pointAt(pixel), -1);
  plot.show();
  QVERIFY(QTest::qWaitForWindowExposed(&plot));
  QVERIFY(plot.graphCount() < graphsBefore);  // the point series are gone
  model.setSnapshot(syntheticSnapshot());  // visible: redrawn at once
  QCOMPARE(plot.graphCount(), graphsBefore);
}

void TestRoofline::plotExportsPngAndSvg() {
  QTemporaryDir dir;
  QVERIFY(dir.isValid());
  RooflineModel model;
  model.setProbe(syntheticProbe());
  model.setSnapshot(syntheticSnapshot());
  RooflinePlot plot(&model);
  plot.resize(800, 500);
  const QString png = dir.filePath(QStringLiteral("roofline.png"));
  const QString svg = dir.filePath(QStringLiteral("roofline.svg"));
  QVERIFY(plot.exportPng(png, 1200, 800));
  QVERIFY(plot.exportSvg(svg, 1200, 800));
  const QImage image(png);
  QCOMPARE(image.size(), QSize(1200, 800));
  QFile file(svg);
  QVERIFY(file.open(QIODevice::ReadOnly));
  const QByteArray text = file.readAll();
  QVERIFY(text.contains("<svg"));
  QVERIFY(text.contains("viewBox=\"0 0 1200 800\""));
  QVERIFY(text.size() > 2000);  // axes, roofs and points, not an empty canvas
}

void TestRoofline::panelSaysWhenTheProbeLooksLow() {
  QTemporaryDir dir;
  QVERIFY(dir.isValid());
  const QString path = dir.filePath(QStringLiteral("results.sqlite"));
  {
    auto store = iwb::ResultsStore::open(path.toStdString());
    QVERIFY(store);
    iwb::ProbeResult probe = syntheticProbe();
    probe.read_bytes_per_s = 20e9;
    QVERIFY((*store)->add_probe(probe));
  }
  EngineController engine;
  MachineCeilings ceilings(path);
  ceilings.reload();
  QVERIFY(ceilings.probe());
  RooflinePanel panel(&engine, &ceilings);
  auto* status = panel.findChild<QLabel*>(QStringLiteral("rooflineStatus"));
  QVERIFY(status);
  // One decode step whose matmuls read `scale` x `bytes` in `scale` x `seconds`, after a prefill
  // step. The note needs more bytes a step than twice the caches: some hosts (KVM guests of
  // Intel Xeons) report an L3 of 480 MiB, so the step is scaled past that (the bandwidths stay).
  const double scale =
      std::max(1.0, std::ceil(4.0 * static_cast<double>(iwb::describe_cpu_device().cache_bytes) / 1e9));
  const auto decodeStep = [scale](double unscaledBytes, double unscaledSeconds) {
    const double bytes = unscaledBytes * scale, seconds = unscaledSeconds * scale;
    iwb::ProfileDecimator decimator(10.0);
    decimator.add(batch(0, Phase::Prefill, {record(OpKind::Matmul, "attn_q", 8e9, 1e9, 0.1)}), 0.0);
    decimator.add(batch(1, Phase::Decode,
                        {record(OpKind::Matmul, "ffn_down", bytes, bytes * 0.6, seconds * 0.6),
                         record(OpKind::Logits, "output", bytes, bytes * 0.4, seconds * 0.4),
                         record(OpKind::RmsNorm, "attn_norm", 1e4, 1e9, 1e-6)}),  // not weights: left out
                  0.01);
    return *decimator.flush(0.02);
  };
  emit engine.profileSnapshotReady(decodeStep(1e9, 0.025));  // 40 GB/s over a 20 GB/s roof
  QVERIFY2(status->text().contains(QLatin1String("Decode read its weights at 40 GB/s, above the 20 GB/s roof")) &&
               status->text().contains(QLatin1String("Measure again")),
           qPrintable(status->text()));
  emit engine.profileSnapshotReady(decodeStep(1e9, 0.1));  // 10 GB/s: under the roof
  QVERIFY2(!status->text().contains(QLatin1String("Decode read")), qPrintable(status->text()));
  emit engine.profileSnapshotReady(decodeStep(1e6, 1e-5));  // 100 GB/s from 1 MB: the caches
  QVERIFY2(!status->text().contains(QLatin1String("Decode read")), qPrintable(status->text()));
  // A new probe at 50 GB/s takes the note away from the fast step too.
  emit engine.profileSnapshotReady(decodeStep(1e9, 0.025));
  QVERIFY(status->text().contains(QLatin1String("Decode read")));
  {
    auto store = iwb::ResultsStore::open(path.toStdString());
    QVERIFY(store);
    iwb::ProbeResult probe = syntheticProbe();
    probe.date = "2025-01-03T03:04:05Z";
    probe.read_bytes_per_s = 50e9;
    QVERIFY((*store)->add_probe(probe));
  }
  ceilings.reload();
  QVERIFY2(!status->text().contains(QLatin1String("Decode read")), qPrintable(status->text()));
}

void TestRoofline::measureNowStoresTheProbe() {
  QTemporaryDir dir;
  QVERIFY(dir.isValid());
  const QString path = dir.filePath(QStringLiteral("results.sqlite"));
  MachineCeilings ceilings(path);
  QSignalSpy changed(&ceilings, &MachineCeilings::probeChanged);
  ceilings.reload();
  QCOMPARE(changed.count(), 1);
  QVERIFY(!ceilings.probe());
  QCOMPARE(ceilings.ceilings().peak_flops, 0.0);

  QSignalSpy measuring(&ceilings, &MachineCeilings::measuringChanged);
  iwb::ProbeOptions small;  // a quick, rough measurement: this tests the plumbing, not the machine
  small.num_threads = 1;
  small.buffer_bytes = 8u << 20;
  small.repetitions = 1;
  small.compute_seconds = 0.02;
  ceilings.measure(small);
  QVERIFY(ceilings.isMeasuring());
  QVERIFY(QTest::qWaitFor([&] { return !ceilings.isMeasuring(); }, 30000));
  QCOMPARE(measuring.count(), 2);
  QCOMPARE(changed.count(), 2);
  QVERIFY2(ceilings.errorMessage().isEmpty(), qPrintable(ceilings.errorMessage()));
  QVERIFY(ceilings.probe());
  QVERIFY(ceilings.probe()->bandwidth_bytes_per_s() > 0);
  QVERIFY(ceilings.probe()->peak_flops > 0);

  // It was stored: a fresh reader finds it.
  MachineCeilings again(path);
  again.reload();
  QVERIFY(again.probe());
  QCOMPARE(again.probe()->peak_flops, ceilings.probe()->peak_flops);
  QCOMPARE(again.probe()->date, ceilings.probe()->date);
}

void TestRoofline::measureCanBeCancelled() {
  QTemporaryDir dir;
  QVERIFY(dir.isValid());
  const QString path = dir.filePath(QStringLiteral("results.sqlite"));
  MachineCeilings ceilings(path);
  ceilings.reload();
  QSignalSpy measuring(&ceilings, &MachineCeilings::measuringChanged);
  QSignalSpy changed(&ceilings, &MachineCeilings::probeChanged);
  iwb::ProbeOptions small;
  small.num_threads = 1;
  small.buffer_bytes = 8u << 20;
  small.repetitions = 1;
  small.compute_seconds = 0.02;
  ceilings.measure(small);
  ceilings.cancelMeasure();
  QVERIFY(!ceilings.isMeasuring());
  QCOMPARE(measuring.count(), 2);
  QTest::qWait(1500);  // the probe runs out on its thread: nothing comes of it
  QCOMPARE(changed.count(), 0);
  QVERIFY(!ceilings.probe());
  MachineCeilings again(path);
  again.reload();
  QVERIFY(!again.probe());
}

void TestRoofline::int8RoofFromProbe() {
  iwb::ProbeResult p = syntheticProbe();
  QVERIFY(!iwb::ui::int8RoofFromProbe(p).has_value());  // not measured: no line
  p.peak_int8_ops = 800e9;
  const auto roof = iwb::ui::int8RoofFromProbe(p);
  QVERIFY(roof.has_value());
  QCOMPARE(roof->peakFlops, 800e9);
  QCOMPARE(roof->bandwidthBytesPerS, 50e9);
  QCOMPARE(roof->ridgePoint(), 16.0);
  iwb::ui::RooflineModel model;
  model.setProbe(p);
  QVERIFY(model.measuredInt8Roof().has_value());
  QCOMPARE(model.measuredRoof()->peakFlops, 200e9);  // the f32 roof stays the reference
}

// Matmuls of quantized weights run on int8 dot products: their fraction is of the int8 roof
// where the probe measured one; float weights and attention (f32 arithmetic, whatever the
// cache type) stay against the f32 roof, as does everything without an int8 figure.
void TestRoofline::quantizedProductsUseTheInt8Roof() {
  const double flops = 4e9, bytes = 1e8;  // intensity 40: compute-bound under both roofs
  KernelRecord quantized = record(OpKind::Matmul, "ffn_up", flops, bytes, 0.05);
  quantized.phase = Phase::Prefill;
  KernelRecord attention = record(OpKind::Attention, "attention", flops, bytes, 0.05);
  attention.phase = Phase::Prefill;
  attention.data_type = iwb::GgmlType::Q8_0;  // a quantized cache: still f32 arithmetic
  KernelRecord logits = record(OpKind::Logits, "logits", flops, bytes, 0.05);
  logits.phase = Phase::Prefill;
  logits.data_type = iwb::GgmlType::F16;
  iwb::ProfileSnapshot snapshot;
  iwb::ProfileBatch batch;
  batch.phase = Phase::Prefill;
  batch.kernels = {quantized, attention, logits};
  snapshot.last_prefill = batch;
  snapshot.last_steps = iwb::aggregate_records(batch.kernels);

  iwb::ProbeResult p = syntheticProbe();
  p.peak_int8_ops = 800e9;
  RooflineModel model;
  model.setProbe(p);
  model.setSnapshot(snapshot);
  const RooflinePoint* matmul = model.findPoint(OpKind::Matmul, Phase::Prefill, false);
  const RooflinePoint* attn = model.findPoint(OpKind::Attention, Phase::Prefill, false);
  const RooflinePoint* head = model.findPoint(OpKind::Logits, Phase::Prefill, false);
  QVERIFY(matmul && attn && head);
  QVERIFY(matmul->isQuantized);
  QVERIFY(!attn->isQuantized);
  QVERIFY(!head->isQuantized);
  QCOMPARE(matmul->roofFlopsPerS, 800e9);
  QCOMPARE(attn->roofFlopsPerS, 200e9);
  QCOMPARE(head->roofFlopsPerS, 200e9);
  QCOMPARE(matmul->fractionOfRoof(), 80e9 / 800e9);

  // A prediction of the same records sits on the roofs alike.
  model.setPrediction(batch.kernels, QStringLiteral("mixed"));
  QCOMPARE(model.findPoint(OpKind::Matmul, Phase::Prefill, true)->flopsPerS, 800e9);
  QCOMPARE(model.findPoint(OpKind::Attention, Phase::Prefill, true)->flopsPerS, 200e9);

  // Without an int8 figure every point is against the f32 roof.
  model.setProbe(syntheticProbe());
  QCOMPARE(model.findPoint(OpKind::Matmul, Phase::Prefill, false)->roofFlopsPerS, 200e9);
}

void TestRoofline::readOnlyAndCopyRoofs() {
  // A probe from before the read-only figure: one roof, the copy's.
  RooflineModel model;
  model.setProbe(syntheticProbe());
  QVERIFY(model.measuredRoof()->label.contains(QLatin1String("copy")));
  QVERIFY(!model.measuredCopyRoof());

  // With it: the memory roof is the read-only bandwidth, and the copy roof stays beside it.
  iwb::ProbeResult p = syntheticProbe();
  p.read_bytes_per_s = 80e9;
  model.setProbe(p);
  QCOMPARE(model.measuredRoof()->bandwidthBytesPerS, 80e9);
  QVERIFY(model.measuredRoof()->label.contains(QLatin1String("read-only")));
  QCOMPARE(model.measuredRoof()->ridgePoint(), 2.5);
  QVERIFY(model.measuredCopyRoof().has_value());
  QCOMPARE(model.measuredCopyRoof()->bandwidthBytesPerS, 50e9);  // the better of copy and triad
  QCOMPARE(model.measuredCopyRoof()->peakFlops, 200e9);
  QVERIFY(model.measuredCopyRoof()->label.contains(QLatin1String("copy")));

  // The chart draws both, each named in the legend.
  RooflinePlot plot(&model);
  plot.rebuild();
  QStringList names;
  for (int i = 0; i < plot.graphCount(); ++i) names << plot.graph(i)->name();
  QVERIFY2(names.filter(QStringLiteral("read-only")).size() == 1, qPrintable(names.join(QLatin1String(" | "))));
  QVERIFY2(names.filter(QStringLiteral("cpu copy")).size() == 1, qPrintable(names.join(QLatin1String(" | "))));

  // The panel's roof line names both bandwidths.
  QTemporaryDir dir;
  QVERIFY(dir.isValid());
  const QString path = dir.filePath(QStringLiteral("results.sqlite"));
  {
    auto store = iwb::ResultsStore::open(path.toStdString());
    QVERIFY(store.is_ok());
    QVERIFY((*store)->add_probe(p).is_ok());
  }
  EngineController engine;
  MachineCeilings ceilings(path);
  RooflinePanel panel(&engine, &ceilings);
  ceilings.reload();
  auto* label = panel.findChild<QLabel*>(QStringLiteral("roofLabel"));
  QVERIFY(label);
  QVERIFY2(label->text().contains(QLatin1String("read-only 80 GB/s")) && label->text().contains(QLatin1String("copy 50 GB/s")),
           qPrintable(label->text()));
  QVERIFY(panel.model()->measuredCopyRoof().has_value());
}

QTEST_MAIN(TestRoofline)
#include "test_roofline.moc"
