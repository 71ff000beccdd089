// Where the roofline plot puts its point names and its legend: no name over another name or a
// point, at two window sizes and in exports at other sizes than the window's; the legend in a
// corner that covers no point.
#include "roofline_fixtures.h"

#include "iwb/engine/profile/profile_aggregate.h"
#include "roofline/roofline_model.h"
#include "roofline/roofline_plot.h"
#include "widgets/chart_labels.h"

#include <QImage>
#include <QTemporaryDir>
#include <QTest>

using namespace iwb::ui;
using iwb::OpKind;
using iwb::Phase;
using iwb::test::batch;
using iwb::test::record;
using iwb::test::syntheticProbe;

namespace {

// The roofline of plotLabelsDoNotCollide's ops: the residual add and RoPE of both phases sit a
// few pixels apart, the logits under the decode matmul.
iwb::ProfileSnapshot crowdedSnapshot() {
  iwb::ProfileDecimator decimator(10.0);
  decimator.add(batch(0, Phase::Prefill,
                      {record(OpKind::Add, "add", 1e6, 1.2e7, 1.12e-3), record(OpKind::Rope, "rope", 3e6, 8e6, 1.0e-3),
                       record(OpKind::Matmul, "attn_q", 8e9, 1e9, 0.1)}),
                0.0);
  decimator.add(
      batch(1, Phase::Decode,
            {record(OpKind::Add, "add", 1e6, 1.2e7, 1.25e-3), record(OpKind::Rope, "rope", 3e6, 8.4e6, 1.1e-3),
             record(OpKind::Logits, "output", 2.1e9, 1e9, 0.05), record(OpKind::Matmul, "attn_q", 2.2e9, 1e9, 0.05)}),
      0.01);
  return *decimator.flush(0.02);
}

std::vector<const QCPItemText*> pointLabels(const RooflinePlot& plot) {
  std::vector<const QCPItemText*> labels;
  for (int i = 0; i < plot.itemCount(); ++i) {
    const auto* text = qobject_cast<const QCPItemText*>(plot.item(i));
    if (text != nullptr && !text->text().startsWith(QLatin1String("ridge"))) labels.push_back(text);
  }
  return labels;
}

// Where the plot's point names, as laid out now, cover one another or a point; empty when none.
QString labelCollision(const RooflinePlot& plot, const RooflineModel& model) {
  const std::vector<const QCPItemText*> labels = pointLabels(plot);
  if (static_cast<int>(labels.size()) != model.rowCount()) return QStringLiteral("a point without its name");
  const QSize size = plot.viewport().size();
  std::vector<QRectF> markers;
  for (int row = 0; row < model.rowCount(); ++row) markers.push_back(iwb::ui::markerRect(plot.pixelOf(row), 9.0));
  for (size_t i = 0; i < labels.size(); ++i) {
    const QRectF rect = iwb::ui::labelTextRect(labels[i]);
    for (size_t j = i + 1; j < labels.size(); ++j) {
      if (rect.intersects(iwb::ui::labelTextRect(labels[j]))) {
        return QStringLiteral("%1 over %2 at %3x%4")
            .arg(labels[i]->text(), labels[j]->text())
            .arg(size.width())
            .arg(size.height());
      }
    }
    for (const QRectF& marker : markers) {
      if (rect.intersects(marker)) {
        return QStringLiteral("%1 over a point at %2x%3").arg(labels[i]->text()).arg(size.width()).arg(size.height());
      }
    }
  }
  for (const QRectF& marker : markers) {
    if (plot.legend->visible() && QRectF(plot.legend->outerRect()).intersects(marker)) {
      return QStringLiteral("the legend over a point at %1x%2").arg(size.width()).arg(size.height());
    }
  }
  return {};
}

}  // namespace

class TestRooflineLayout : public QObject {
  Q_OBJECT

 private slots:
  void plotLabelsDoNotCollide();
  void exportedLabelsDoNotCollide();
  void legendMovesOffThePoints();
  void legendStaysNarrow();
};

// Ops whose points sit close together get their names where no name covers another or another
// point: each label moves to a free side of its point (it was always to the right, so the two
// adds' names were drawn on top of each other), and again after a resize.
void TestRooflineLayout::plotLabelsDoNotCollide() {
  RooflineModel model;
  model.setProbe(syntheticProbe());
  model.setSnapshot(crowdedSnapshot());
  RooflinePlot plot(&model);
  for (const QSize size : {QSize(900, 600), QSize(520, 340)}) {
    plot.resize(size);
    plot.show();
    QVERIFY(QTest::qWaitForWindowExposed(&plot));
    QCoreApplication::processEvents();
    const QString collision = labelCollision(plot, model);
    QVERIFY2(collision.isEmpty(), qPrintable(collision));
  }
}

// An export at another size than the widget's draws the names placed for the export's size
// (the sides free in a large window are not all free in a smaller picture), and the widget
// keeps its own placement afterwards.
void TestRooflineLayout::exportedLabelsDoNotCollide() {
  // The norms of both phases at one intensity, the decode one 1.1x faster: in a window of
  // 1800 x 1100 (a large screen) their names fit one above the other on the right; in the
  // panel's 1200 x 800 export they do not.
  iwb::ProfileDecimator decimator(10.0);
  decimator.add(
      batch(0, Phase::Prefill,
            {record(OpKind::RmsNorm, "norm", 1e6, 4e6, 1e-3), record(OpKind::Matmul, "attn_q", 8e9, 1e9, 0.1)}),
      0.0);
  decimator.add(batch(1, Phase::Decode, {record(OpKind::RmsNorm, "norm", 1e6, 4e6, 1e-3 / 1.1)}), 0.01);
  RooflineModel model;
  model.setProbe(syntheticProbe());
  model.setSnapshot(*decimator.flush(0.02));
  RooflinePlot plot(&model);
  plot.resize(1800, 1100);
  plot.show();
  QVERIFY(QTest::qWaitForWindowExposed(&plot));
  QCoreApplication::processEvents();
  const auto alignments = [&] {
    QList<int> sides;
    for (const QCPItemText* label : pointLabels(plot)) sides << static_cast<int>(label->positionAlignment());
    return sides;
  };
  const QList<int> onScreen = alignments();

  QTemporaryDir dir;
  QVERIFY(dir.isValid());
  for (const QSize exported : {QSize(1200, 800), QSize(2400, 1600)}) {
    // QCustomPlot lays the chart out at the export's size as it draws it: check the names there.
    // The last layout at that size is the one painted.
    QString drawn;
    const auto connection = connect(&plot, &QCustomPlot::afterLayout, &plot, [&] {
      if (plot.viewport().size() != exported) return;
      const QString collision = labelCollision(plot, model);
      drawn = collision.isEmpty() ? QStringLiteral("ok") : collision;
    });
    const QString png = dir.filePath(QStringLiteral("roofline-%1.png").arg(exported.width()));
    QVERIFY(plot.exportPng(png, exported.width(), exported.height()));
    QCOMPARE(drawn, QStringLiteral("ok"));
    drawn.clear();
    QVERIFY(plot.exportSvg(dir.filePath(QStringLiteral("roofline-%1.svg").arg(exported.width())), exported.width(),
                           exported.height()));
    QCOMPARE(drawn, QStringLiteral("ok"));
    disconnect(connection);
    QCOMPARE(QImage(png).size(), exported);
    QCOMPARE(plot.viewport().size(), QSize(1800, 1100));
    QCOMPARE(alignments(), onScreen);
    QVERIFY2(labelCollision(plot, model).isEmpty(), qPrintable(labelCollision(plot, model)));
  }
}

// Decode reading its weights faster than the stored read-only roof, with more bytes a step than
// any cache holds, means the probe ran at a slower moment: the status line says so and asks for
// a new measurement. Under the roof, or with weights that fit in the caches, it says nothing.
// The legend sits in the bottom right corner unless a point is there (a slow compute-bound op:
// prefill attention far below the ceiling); then in the first corner that is free, here the
// top left, above the bandwidth slope.
void TestRooflineLayout::legendMovesOffThePoints() {
  RooflineModel model;
  model.setProbe(syntheticProbe());
  model.setSnapshot(crowdedSnapshot());
  RooflinePlot plot(&model);
  plot.resize(900, 600);
  plot.show();
  QVERIFY(QTest::qWaitForWindowExposed(&plot));
  QCoreApplication::processEvents();
  QCOMPARE(plot.axisRect()->insetLayout()->insetAlignment(0), Qt::AlignBottom | Qt::AlignRight);

  iwb::ProfileDecimator decimator(10.0);
  std::optional<iwb::ProfileSnapshot> slow = decimator.add(
      batch(
          0, Phase::Prefill,
          {record(OpKind::Add, "add", 1e6, 1.2e7, 1.12e-3), record(OpKind::Rope, "rope", 1e5, 1e7, 1e-3),
           record(OpKind::Matmul, "attn_q", 8e10, 1e9, 0.5), record(OpKind::Attention, "attention", 3e11, 1e9, 2600.0),
           record(OpKind::Activation, "ffn", 5e10, 1e9, 2.0)}),
      0.0);
  if (!slow) slow = decimator.flush(0.01);
  QVERIFY(slow);
  model.setSnapshot(*slow);
  plot.setShowsDatasheetRoofs(true);  // two more rows: a legend tall enough to reach the lowest points
  plot.rebuild();
  QCoreApplication::processEvents();
  QCOMPARE(plot.axisRect()->insetLayout()->insetAlignment(0), Qt::AlignTop | Qt::AlignLeft);
  const QString collision = labelCollision(plot, model);
  QVERIFY2(collision.isEmpty(), qPrintable(collision));
}

// A probe with every roof (read-only, copy, int8) and the datasheet roofs: the legend takes at
// most a third of the chart's width (a roof's name and figures on two lines, without the probe's
// date, which the panel's header gives: on one line with the date the box took 40% of it).
void TestRooflineLayout::legendStaysNarrow() {
  RooflineModel model;
  iwb::ProbeResult probe = syntheticProbe();
  probe.read_bytes_per_s = 45e9;
  probe.peak_int8_ops = 800e9;
  model.setProbe(probe);
  model.setSnapshot(crowdedSnapshot());
  RooflinePlot plot(&model);
  plot.resize(900, 600);
  plot.setShowsDatasheetRoofs(true);
  plot.show();
  QVERIFY(QTest::qWaitForWindowExposed(&plot));
  plot.rebuild();
  QCoreApplication::processEvents();
  QVERIFY(plot.legend->visible());
  QCOMPARE(plot.legend->itemCount(), 7);  // 3 probe roofs, 2 datasheets, prefill and decode
  for (int i = 0; i < plot.legend->itemCount(); ++i) {
    auto* item = qobject_cast<QCPPlottableLegendItem*>(plot.legend->item(i));
    QVERIFY(item != nullptr);
    QVERIFY2(!item->plottable()->name().contains(QLatin1String("2025-01-02")), qPrintable(item->plottable()->name()));
  }
  const double legendWidth = plot.legend->outerRect().width(), chartWidth = plot.axisRect()->width();
  QVERIFY2(legendWidth <= chartWidth / 3,
           qPrintable(QStringLiteral("legend %1 px wide in a chart of %2 px").arg(legendWidth).arg(chartWidth)));
}

QTEST_MAIN(TestRooflineLayout)
#include "test_roofline_layout.moc"
