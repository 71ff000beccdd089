#include "widgets/chart_labels.h"

#include <qcustomplot.h>

#include <QFontMetricsF>

#include <algorithm>

namespace iwb::ui {

QRectF labelTextRect(const QCPItemText* label, const LabelSpot& spot) {
  const QPointF at = label->position->pixelPosition();
  const QSizeF size = QFontMetricsF(label->font()).size(0, label->text());
  double x = at.x() - size.width() / 2 + (spot.padding.left() - spot.padding.right()) / 2.0;  // centred
  if (spot.alignment & Qt::AlignLeft) x = at.x() + spot.padding.left();
  if (spot.alignment & Qt::AlignRight) x = at.x() - spot.padding.right() - size.width();
  double y = at.y() - size.height() / 2 + (spot.padding.top() - spot.padding.bottom()) / 2.0;
  if (spot.alignment & Qt::AlignTop) y = at.y() + spot.padding.top();
  if (spot.alignment & Qt::AlignBottom) y = at.y() - spot.padding.bottom() - size.height();
  return {QPointF(x, y), size};
}

QRectF labelTextRect(const QCPItemText* label) {
  return labelTextRect(label, LabelSpot{label->positionAlignment(), label->padding()});
}

QRectF markerRect(const QPointF& center, double diameter) {
  return {center - QPointF(diameter / 2, diameter / 2), QSizeF(diameter, diameter)};
}

void placeChartLabels(QCustomPlot* plot, const std::vector<QCPItemText*>& labels, std::span<const LabelSpot> spots,
                      std::vector<QRectF> obstacles) {
  if (spots.empty()) return;
  const QRectF area = plot->axisRect()->rect();
  for (QCPItemText* label : labels) {
    const LabelSpot* chosen = nullptr;
    QRectF chosenRect;
    for (const LabelSpot& spot : spots) {
      const QRectF rect = labelTextRect(label, spot);
      const bool isFree = area.contains(rect) && std::none_of(obstacles.begin(), obstacles.end(),
                                                              [&](const QRectF& o) { return o.intersects(rect); });
      if (chosen == nullptr || isFree) {
        chosen = &spot;
        chosenRect = rect;
      }
      if (isFree) break;
    }
    label->setPositionAlignment(chosen->alignment);
    label->setPadding(chosen->padding);
    obstacles.push_back(chosenRect);
  }
}

}  // namespace iwb::ui
