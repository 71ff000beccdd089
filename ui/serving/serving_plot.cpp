// makeServingPlot and servingRunColor: the look the other panels' charts have (spec_charts.cpp).
#include "serving/serving_plot.h"

#include <qcustomplot.h>

namespace iwb::ui {

QCustomPlot* makeServingPlot(const QString& objectName, const QString& title, const QString& x, const QString& y) {
  auto* plot = new QCustomPlot;
  plot->setObjectName(objectName);
  // Small enough for three sweep charts side by side and two rows of live ones in a window
  // that fits a 1366 x 768 screen; the charts grow with the window.
  plot->setMinimumSize(200, 150);
  plot->plotLayout()->insertRow(0);
  plot->plotLayout()->addElement(0, 0, new QCPTextElement(plot, title, QFont(plot->font().family(), 10, QFont::Bold)));
  plot->xAxis->setLabel(x);
  plot->yAxis->setLabel(y);
  plot->legend->setVisible(true);
  plot->legend->setFont(QFont(plot->font().family(), 8));
  // Below the axes, two entries a row: inside them it hides points (sweep curves go anywhere).
  plot->axisRect()->insetLayout()->take(plot->legend);
  plot->plotLayout()->addElement(2, 0, plot->legend);
  plot->plotLayout()->setRowStretchFactor(2, 0.001);
  plot->legend->setFillOrder(QCPLayoutGrid::foColumnsFirst);
  plot->legend->setWrap(2);
  plot->legend->setBorderPen(Qt::NoPen);
  plot->legend->setMargins(QMargins(4, 0, 4, 2));
  return plot;
}

QColor servingRunColor(int run) {
  static const QColor colors[] = {QColor(0x33, 0x66, 0x99), QColor(0xdd, 0x77, 0x22), QColor(0x33, 0x99, 0x55),
                                  QColor(0x99, 0x33, 0x77)};
  return colors[run % 4];
}

}  // namespace iwb::ui
