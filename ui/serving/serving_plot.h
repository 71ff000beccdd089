// Small QCustomPlot helpers the Serving tab's charts share: a titled plot, the run colours.
#pragma once

#include <QColor>
#include <QString>

class QCustomPlot;

namespace iwb::ui {

QCustomPlot* makeServingPlot(const QString& objectName, const QString& title, const QString& x, const QString& y);
// Run 0 blue, run 1 orange (two runs side by side), then further distinct hues.
QColor servingRunColor(int run);

}  // namespace iwb::ui
