// Where the text labels of chart points go, so they stay readable: each label in turn takes
// the first of its candidate spots where its text overlaps no label placed before it and no
// obstacle (the points' markers, the legend) and stays inside the axis rect; when no spot is
// free it keeps the first. Used by the roofline and the quantization lab's charts.
#pragma once

#include <QMargins>
#include <QRectF>

#include <span>
#include <vector>

class QCPItemText;
class QCustomPlot;

namespace iwb::ui {

// A candidate spot: the label's position alignment against its point, and the padding that
// keeps its text off the point's marker.
struct LabelSpot {
  Qt::Alignment alignment;
  QMargins padding;
};

// The text's rectangle (padding excluded) in pixels if `label` took `spot`.
QRectF labelTextRect(const QCPItemText* label, const LabelSpot& spot);
// The same for the spot the label has now.
QRectF labelTextRect(const QCPItemText* label);

// Places `labels` in order. Pixel positions come from the plot's current layout: lay it out
// first (replot(), or updateLayout() in a subclass) after the axes' ranges are set, and place
// again after a resize.
void placeChartLabels(QCustomPlot* plot, const std::vector<QCPItemText*>& labels, std::span<const LabelSpot> spots,
                      std::vector<QRectF> obstacles = {});

// The box of a round marker of `diameter` pixels at `center`, as an obstacle.
QRectF markerRect(const QPointF& center, double diameter);

}  // namespace iwb::ui
