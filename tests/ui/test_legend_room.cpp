// setValueRangeBelowLegend: at any size the chart is drawn at, the highest value sits below a
// top-corner legend; the bounds given (a pool's size, an empty chart's scale) hold; a legend
// at the bottom asks for no room.
#include "widgets/legend_room.h"

#include <qcustomplot.h>
#include <QTest>

using namespace iwb::ui;

class TestLegendRoom : public QObject {
  Q_OBJECT

  // A chart with a three-row legend in its top left corner and a line up to `top`.
  static void fill(QCustomPlot& chart, double top) {
    chart.legend->setVisible(true);
    chart.axisRect()->insetLayout()->setInsetAlignment(0, Qt::AlignTop | Qt::AlignLeft);
    for (int g = 0; g < 3; ++g) {
      QCPGraph* graph = chart.addGraph();
      graph->setName(QStringLiteral("series %1").arg(g));
      graph->setData({0, 1, 2, 3}, {top * 0.5, top, top, top * 0.9});
    }
    chart.xAxis->setRange(-0.1, 3.1);
  }

 private slots:
  void highestValueBelowTheLegend() {
    QCustomPlot chart;
    fill(chart, 40);
    setValueRangeBelowLegend(&chart, {.bottom = 0, .top = 40});
    QCOMPARE(chart.yAxis->range().upper, 40 * 1.15);  // before any layout: the plain headroom
    chart.show();
    QVERIFY(QTest::qWaitForWindowExposed(&chart));
    for (const QSize size : {QSize(600, 400), QSize(400, 240), QSize(360, 220)}) {
      chart.resize(size);
      QCoreApplication::processEvents();
      QCOMPARE(chart.viewport().size(), size);
      chart.replot();
      const double y = chart.yAxis->coordToPixel(40);
      QVERIFY2(y > chart.legend->outerRect().bottom(),
               qPrintable(QStringLiteral("%1 px under a legend down to %2 at %3x%4")
                              .arg(y)
                              .arg(chart.legend->outerRect().bottom())
                              .arg(size.width())
                              .arg(size.height())));
      QVERIFY(chart.yAxis->range().upper >= 40 * 1.15);
    }
    // An export at another size is laid out again, with room for that size.
    const double onScreen = chart.yAxis->range().upper;
    QPixmap wide = chart.toPixmap(900, 260);
    QVERIFY(!wide.isNull());
    QVERIFY(chart.yAxis->range().upper != onScreen);
    QVERIFY(chart.yAxis->coordToPixel(40) > chart.legend->outerRect().bottom());
  }

  void boundsHold() {
    QCustomPlot chart;
    fill(chart, 90);
    chart.resize(400, 240);
    setValueRangeBelowLegend(&chart, {.bottom = 0, .top = 90, .minimumHeadroom = 1.25, .maximumUpper = 100});
    chart.replot();
    QCOMPARE(chart.yAxis->range().upper, 100.0);  // the pool's size: no room above it
    setValueRangeBelowLegend(&chart, {.bottom = 0, .top = 0, .minimumUpper = 16});
    chart.replot();
    QCOMPARE(chart.yAxis->range().upper, 16.0);  // nothing drawn: the empty chart's scale
    QCOMPARE(chart.yAxis->range().lower, 0.0);
  }

  void legendAtTheBottomNeedsNoRoom() {
    QCustomPlot chart;
    fill(chart, 10);
    chart.axisRect()->insetLayout()->setInsetAlignment(0, Qt::AlignBottom | Qt::AlignRight);
    chart.resize(400, 200);
    setValueRangeBelowLegend(&chart, {.bottom = 0, .top = 10});
    chart.replot();
    QCOMPARE(chart.yAxis->range().upper, 11.5);
  }
};

QTEST_MAIN(TestLegendRoom)
#include "test_legend_room.moc"
