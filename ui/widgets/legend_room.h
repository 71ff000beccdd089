// Charts whose legend sits in a top corner keep their data below it: the value axis' upper end
// is chosen each time the chart is laid out for drawing (its size on screen, or an export's),
// so the highest value is drawn under the legend's bottom edge. A fixed margin (15% above the
// data) left a steady line or a lone early point behind the legend on a short chart.
#pragma once

#include <limits>

class QCustomPlot;

namespace iwb::ui {

struct ValueRange {
  double bottom = 0;              // the axis' lower end
  double top = 0;                 // the highest value drawn; <= bottom: nothing to keep clear
  double minimumHeadroom = 1.15;  // the upper end is at least top x this
  double minimumUpper = 0;        // ... and at least this (an empty chart's scale)
  double maximumUpper = std::numeric_limits<double>::infinity();  // ... and at most this
};

// Sets the chart's value axis (yAxis) to `range` now, with its minimum headroom, and keeps it
// clear of the legend at every later layout. The first call connects the chart's afterLayout.
void setValueRangeBelowLegend(QCustomPlot* chart, const ValueRange& range);

}  // namespace iwb::ui
