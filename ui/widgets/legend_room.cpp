// setValueRangeBelowLegend: the value axis chosen at each layout so a top-corner legend covers no data.
#include "widgets/legend_room.h"

#include <qcustomplot.h>

#include <algorithm>
#include <cmath>

namespace iwb::ui {
namespace {

constexpr const char* kRangeProperty = "iwbValueRangeBelowLegend";
constexpr double kGapPx = 6.0;  // between the legend's frame and the highest point's centre

ValueRange storedRange(const QCustomPlot* chart) {
  const QVariantList v = chart->property(kRangeProperty).toList();
  if (v.size() != 5) return {};
  return {v[0].toDouble(), v[1].toDouble(), v[2].toDouble(), v[3].toDouble(), v[4].toDouble()};
}

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

void fitToLayout(QCustomPlot* chart) {
  const ValueRange range = storedRange(chart);
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
  const bool isConnected = chart->property(kRangeProperty).isValid();
  chart->setProperty(kRangeProperty, QVariantList{range.bottom, range.top, range.minimumHeadroom, range.minimumUpper,
                                                  range.maximumUpper});
  if (!isConnected) QObject::connect(chart, &QCustomPlot::afterLayout, chart, [chart] { fitToLayout(chart); });
  chart->yAxis->setRange(range.bottom, upperEnd(range, 0));
}

}  // namespace iwb::ui
