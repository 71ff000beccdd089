// setValueRangeBelowLegend: the value axis chosen at each layout so a top-corner legend covers no data.
#include "widgets/legend_room.h"

#include <qcustomplot.h>

#include <algorithm>
#include <cmath>

namespace iwb::ui {
namespace {

constexpr double kGapPx = 6.0;  // between the legend's frame and the highest point's centre

// Holds a chart's range as a child of the chart (so it lives and dies with it) and refits the
// value axis after each of the chart's layouts.
class LegendRoom : public QObject {
 public:
  explicit LegendRoom(QCustomPlot* chart) : QObject(chart) {
    setObjectName(QStringLiteral("legendRoom"));
    connect(chart, &QCustomPlot::afterLayout, this, [this, chart] { fitToLayout(chart); });
  }
  ValueRange range;

 private:
  void fitToLayout(QCustomPlot* chart) const;
};

// The upper end that puts `range.top` under a legend whose bottom edge is `share` of the axis
// rect's height below its top: on a linear axis a value v sits (upper - v) / (upper - bottom)
// of the height from the top.
double upperEnd(const ValueRange& range, double share) {
  double upper = range.bottom + (range.top - range.bottom) * range.minimumHeadroom;
  if (range.top > range.bottom && share > 0 && share < 0.6) {
    upper = std::max(upper, (range.top - share * range.bottom) / (1.0 - share));
  }
  upper = std::max(upper, range.minimumUpper);
  upper = std::min(upper, range.maximumUpper);
  return upper > range.bottom ? upper : range.bottom + 1.0;
}

void LegendRoom::fitToLayout(QCustomPlot* chart) const {
  const QCPAxisRect* rect = chart->axisRect();
  double share = 0;
  if (chart->legend->visible() && rect->height() > 0 && (chart->legend->layout() == rect->insetLayout()) &&
      (rect->insetLayout()->insetAlignment(0) & Qt::AlignTop)) {
    share = (chart->legend->outerRect().bottom() + kGapPx - rect->top()) / static_cast<double>(rect->height());
  }
  const double upper = upperEnd(range, share);
  if (std::abs(upper - chart->yAxis->range().upper) > 1e-9 * std::max(1.0, std::abs(upper)) ||
      chart->yAxis->range().lower != range.bottom) {
    chart->yAxis->setRange(range.bottom, upper);
  }
}

}  // namespace

void setValueRangeBelowLegend(QCustomPlot* chart, const ValueRange& range) {
  auto* room =
      dynamic_cast<LegendRoom*>(chart->findChild<QObject*>(QStringLiteral("legendRoom"), Qt::FindDirectChildrenOnly));
  if (room == nullptr) room = new LegendRoom(chart);
  room->range = range;
  chart->yAxis->setRange(range.bottom, upperEnd(range, 0));
}

}  // namespace iwb::ui
