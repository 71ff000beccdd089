// RooflinePlot: drawing the model's roofs and points on log-log axes, hit tests for tooltips,
// and PNG/SVG export.
#include "roofline/roofline_plot.h"

#include "roofline/roofline_model.h"
#include "widgets/chart_labels.h"

#include <QHelpEvent>
#include <QSvgGenerator>
#include <QToolTip>

#include <algorithm>
#include <cmath>
#include <limits>

namespace iwb::ui {
namespace {

constexpr double kHitRadiusPx = 9.0;
constexpr double kMarkerObstaclePx = 12.0;  // the largest marker (a predicted point's ring)

QColor phaseColor(iwb::Phase phase) {
  // Colour-blind safe pair (orange / blue).
  return phase == iwb::Phase::Prefill ? QColor(230, 120, 20) : QColor(30, 110, 200);
}

QSharedPointer<QCPAxisTickerLog> logTicker() {
  QSharedPointer<QCPAxisTickerLog> ticker(new QCPAxisTickerLog);
  ticker->setLogBase(10);
  ticker->setSubTickCount(8);
  return ticker;
}

void setUpLogAxis(QCPAxis* axis, const QString& label) {
  axis->setScaleType(QCPAxis::stLogarithmic);
  axis->setTicker(logTicker());
  axis->setNumberFormat(QStringLiteral("eb"));  // 10^9 with a superscript
  axis->setNumberPrecision(0);
  axis->setLabel(label);
  axis->grid()->setSubGridVisible(true);
  axis->grid()->setSubGridPen(QPen(QColor(230, 230, 230), 0, Qt::DotLine));
}

QCPItemText* addLabel(QCustomPlot* plot, double x, double y, const QString& text, Qt::Alignment alignment,
                      const QColor& color, const QMargins& padding, int pointSize = 8) {
  auto* label = new QCPItemText(plot);
  label->position->setType(QCPItemPosition::ptPlotCoords);
  label->position->setCoords(x, y);
  label->setPositionAlignment(alignment);
  label->setText(text);
  label->setColor(color);
  label->setPadding(padding);  // moves the text off the point it names
  QFont font = plot->font();
  font.setPointSize(pointSize);
  label->setFont(font);
  label->setClipToAxisRect(true);
  return label;
}

}  // namespace

RooflinePlot::RooflinePlot(RooflineModel* model, QWidget* parent) : QCustomPlot(parent), m_model(model) {
  setObjectName(QStringLiteral("rooflinePlot"));
  setUpLogAxis(xAxis, tr("Arithmetic intensity (FLOP/byte)"));
  setUpLogAxis(yAxis, tr("Performance (FLOP/s)"));
  legend->setVisible(true);
  QFont legendFont = font();
  legendFont.setPointSize(8);
  legend->setFont(legendFont);
  legend->setBrush(QColor(255, 255, 255, 220));
  axisRect()->insetLayout()->setInsetAlignment(0, Qt::AlignBottom | Qt::AlignRight);
  setMinimumSize(360, 260);
  connect(m_model, &QAbstractItemModel::modelReset, this, &RooflinePlot::scheduleRebuild);
  connect(m_model, &RooflineModel::roofsChanged, this, &RooflinePlot::scheduleRebuild);
  rebuild();
}

void RooflinePlot::setShowsDatasheetRoofs(bool isShown) {
  if (isShown == m_showsDatasheetRoofs) return;
  m_showsDatasheetRoofs = isShown;
  rebuild();
}

void RooflinePlot::scheduleRebuild() {
  if (isVisible()) rebuild();
  else m_isStale = true;
}

void RooflinePlot::showEvent(QShowEvent* event) {
  QCustomPlot::showEvent(event);
  if (m_isStale) rebuild();
}

void RooflinePlot::rebuild() {
  m_isStale = false;
  clearGraphs();
  clearItems();
  m_plottedRows.clear();
  m_pointLabels.clear();
  m_ridgeLabel = nullptr;

  // Axis ranges that hold every point and the ridge of every roof shown, with some air.
  QList<Roof> roofs;
  if (m_model->measuredRoof()) roofs << *m_model->measuredRoof();
  if (m_model->measuredInt8Roof()) roofs << *m_model->measuredInt8Roof();
  if (m_model->measuredCopyRoof()) roofs << *m_model->measuredCopyRoof();
  if (m_showsDatasheetRoofs) roofs << datasheetRoofs();
  double xMin = 0.05, xMax = 200.0;
  double yMin = std::numeric_limits<double>::infinity(), yMax = 0;
  for (const RooflinePoint& p : m_model->points()) {
    if (!p.isPlottable()) continue;
    xMin = std::min(xMin, p.intensity / 2);
    xMax = std::max(xMax, p.intensity * 2);
    yMin = std::min(yMin, p.flopsPerS / 3);
    yMax = std::max(yMax, p.flopsPerS * 3);
  }
  for (const Roof& roof : roofs) {
    xMax = std::max(xMax, roof.ridgePoint() * 8);
    yMax = std::max(yMax, roof.peakFlops * 3);
  }
  for (const Roof& roof : roofs) yMin = std::min(yMin, roof.bandwidthBytesPerS * xMin);
  if (!std::isfinite(yMin)) yMin = 1e8;
  if (yMax <= yMin) yMax = yMin * 1e4;

  if (m_showsDatasheetRoofs) {
    const QColor colors[] = {QColor(120, 60, 160), QColor(40, 140, 90)};
    const QList<Roof> sheets = datasheetRoofs();
    for (int i = 0; i < sheets.size(); ++i) {
      QPen pen(colors[i % 2], 1.5, Qt::DashLine);
      addRoof(tr("%1\n%2, %3")
                  .arg(sheets[i].label, formatBytesPerSecond(sheets[i].bandwidthBytesPerS),
                       formatFlopsPerSecond(sheets[i].peakFlops)),
              sheets[i].bandwidthBytesPerS, sheets[i].peakFlops, pen, xMin, xMax);
    }
  }
  if (const auto& roof = m_model->measuredInt8Roof()) {
    // Quantized kernels that multiply 8-bit integers can climb above the f32 ceiling up to here.
    addRoof(tr("%1: %2").arg(roof->label, formatFlopsPerSecond(roof->peakFlops).replace(QLatin1String("FLOP"), QLatin1String("OP"))),
            roof->bandwidthBytesPerS, roof->peakFlops, QPen(QColor(90, 90, 90), 1.5, Qt::DotLine), xMin, xMax);
  }
  if (const auto& roof = m_model->measuredCopyRoof()) {
    // The copy bandwidth under the same peak, below the read-only slope: code that writes as much
    // as it reads (and the MBU of older probes) lives under this one.
    addRoof(tr("%1: %2").arg(roof->label, formatBytesPerSecond(roof->bandwidthBytesPerS)), roof->bandwidthBytesPerS,
            roof->peakFlops, QPen(QColor(140, 140, 140), 1.6, Qt::DashLine), xMin, xMax);
  }
  if (const auto& roof = m_model->measuredRoof()) {
    // The roof's figures go in the legend (text on the chart would collide with the points), on
    // a line of their own under its name: on one line they made the box a third of the chart.
    addRoof(
        tr("%1\n%2, %3")
            .arg(roof->label, formatBytesPerSecond(roof->bandwidthBytesPerS), formatFlopsPerSecond(roof->peakFlops)),
        roof->bandwidthBytesPerS, roof->peakFlops, QPen(QColor(40, 40, 40), 2.2), xMin, xMax);
    const QColor ink(40, 40, 40);
    // The ridge point: where an op stops being limited by memory and starts being limited by
    // arithmetic.
    QCPGraph* ridge = addGraph();
    ridge->setLineStyle(QCPGraph::lsNone);
    ridge->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssDiamond, ink, ink, 9));
    ridge->addData(roof->ridgePoint(), roof->peakFlops);
    ridge->removeFromLegend();
    m_ridgeLabel =
        addLabel(this, roof->ridgePoint(), roof->peakFlops, tr("ridge %1 FLOP/byte").arg(roof->ridgePoint(), 0, 'g', 3),
                 Qt::AlignLeft | Qt::AlignTop, ink, QMargins(8, 6, 0, 0));
  }
  addPointGraphs();

  xAxis->setRange(xMin, xMax);
  yAxis->setRange(yMin, yMax);
  placePointLabels();
  replot(QCustomPlot::rpQueuedReplot);
}

void RooflinePlot::placePointLabels() {
  // To the right of the point first (how the chart has always read), then left, above, below
  // and the diagonals: ops of one kind in both phases, or a cheap op beside a busy matmul, sit
  // close enough for their names to run into each other or over the other point.
  static const LabelSpot spots[] = {
      {Qt::AlignLeft | Qt::AlignVCenter, QMargins(8, 0, 0, 0)},
      {Qt::AlignRight | Qt::AlignVCenter, QMargins(0, 0, 8, 0)},
      {Qt::AlignHCenter | Qt::AlignBottom, QMargins(0, 0, 0, 6)},
      {Qt::AlignHCenter | Qt::AlignTop, QMargins(0, 6, 0, 0)},
      {Qt::AlignLeft | Qt::AlignBottom, QMargins(6, 0, 0, 4)},
      {Qt::AlignLeft | Qt::AlignTop, QMargins(6, 4, 0, 0)},
      {Qt::AlignRight | Qt::AlignBottom, QMargins(0, 0, 6, 4)},
      {Qt::AlignRight | Qt::AlignTop, QMargins(0, 4, 6, 0)},
  };
  updateLayout();  // pixels of the axes and the legend for these ranges, without painting
  std::vector<QRectF> obstacles;
  for (int row : m_plottedRows) obstacles.push_back(markerRect(pixelOf(row), kMarkerObstaclePx));
  if (m_ridgeLabel != nullptr) {
    obstacles.push_back(labelTextRect(m_ridgeLabel));
    obstacles.push_back(markerRect(m_ridgeLabel->position->pixelPosition(), kMarkerObstaclePx));
  }
  placeLegend(obstacles);
  if (m_pointLabels.empty()) return;
  if (legend->visible()) obstacles.push_back(legend->outerRect());
  placeChartLabels(this, m_pointLabels, spots, std::move(obstacles));
}

void RooflinePlot::placeLegend(const std::vector<QRectF>& keepClear) {
  if (!legend->visible()) return;
  // Bottom right first (where it has always been; points rarely sit there, slow and
  // compute-bound), then top left (above the bandwidth slope, where only ops served from the
  // caches go). The legend does not move the axes, so the pixels of `keepClear` hold for every
  // corner.
  static const Qt::Alignment corners[] = {Qt::AlignBottom | Qt::AlignRight, Qt::AlignTop | Qt::AlignLeft,
                                          Qt::AlignBottom | Qt::AlignLeft, Qt::AlignTop | Qt::AlignRight};
  QCPLayoutInset* inset = axisRect()->insetLayout();
  Qt::Alignment best = corners[0];
  int fewest = std::numeric_limits<int>::max();
  for (const Qt::Alignment corner : corners) {
    if (inset->insetAlignment(0) != corner) {
      inset->setInsetAlignment(0, corner);
      updateLayout();
    }
    const QRectF box = legend->outerRect();
    const int covered = static_cast<int>(
        std::count_if(keepClear.begin(), keepClear.end(), [&](const QRectF& rect) { return box.intersects(rect); }));
    if (covered < fewest) {
      fewest = covered;
      best = corner;
    }
    if (covered == 0) break;
  }
  if (inset->insetAlignment(0) != best) {
    inset->setInsetAlignment(0, best);
    updateLayout();
  }
}

void RooflinePlot::resizeEvent(QResizeEvent* event) {
  QCustomPlot::resizeEvent(event);
  if (!m_isStale) placePointLabels();  // the points moved in pixels; the labels' room with them
}

void RooflinePlot::addRoof(const QString& name, double bandwidth, double peak, const QPen& pen, double xMin,
                           double xMax) {
  if (bandwidth <= 0 || peak <= 0) return;
  QCPGraph* graph = addGraph();
  graph->setName(name);
  graph->setPen(pen);
  const double ridge = peak / bandwidth;
  // Three points make the roof: the slope from the left edge to the ridge, then flat.
  QVector<double> keys{std::min(xMin, ridge), ridge, std::max(xMax, ridge)};
  QVector<double> values{bandwidth * keys[0], peak, peak};
  graph->setData(keys, values, true);
}

void RooflinePlot::addPointGraphs() {
  struct Series {
    iwb::Phase phase;
    bool isPredicted;
    QString name;
  };
  const Series series[] = {
      {iwb::Phase::Prefill, false, tr("prefill (measured)")},
      {iwb::Phase::Decode, false, tr("decode (measured)")},
      {iwb::Phase::Prefill, true, tr("prefill (predicted)")},
      {iwb::Phase::Decode, true, tr("decode (predicted)")},
  };
  const QList<RooflinePoint>& points = m_model->points();
  for (const Series& s : series) {
    QVector<double> keys, values;
    for (int row = 0; row < points.size(); ++row) {
      const RooflinePoint& p = points[row];
      if (p.phase != s.phase || p.isPredicted != s.isPredicted || !p.isPlottable()) continue;
      keys << p.intensity;
      values << p.flopsPerS;
      m_plottedRows << row;
      // A prediction beside its measured twin needs no second label (the tooltip names it).
      if (s.isPredicted && m_model->findPoint(p.kind, p.phase, false)) continue;
      const QColor color = phaseColor(p.phase);
      m_pointLabels.push_back(addLabel(this, p.intensity, p.flopsPerS, p.opName(), Qt::AlignLeft | Qt::AlignVCenter,
                                       s.isPredicted ? color.lighter(130) : color.darker(115), QMargins(8, 0, 0, 0)));
    }
    if (keys.isEmpty()) continue;  // no legend entry for a series with nothing in it
    QCPGraph* graph = addGraph();
    graph->setName(s.name);
    graph->setLineStyle(QCPGraph::lsNone);
    const QColor color = phaseColor(s.phase);
    if (s.isPredicted) {
      graph->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssCircle, QPen(color, 2), Qt::NoBrush, 12));
    } else {
      graph->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssCircle, QPen(color.darker(120), 1), color, 9));
    }
    graph->setData(keys, values);  // sorts by key; the rows above keep their own order
  }
}

QPointF RooflinePlot::pixelOf(int row) const {
  if (m_isStale || !m_plottedRows.contains(row)) return {};  // rows of a model that has moved on
  const RooflinePoint& p = m_model->point(row);
  return {xAxis->coordToPixel(p.intensity), yAxis->coordToPixel(p.flopsPerS)};
}

int RooflinePlot::pointAt(const QPointF& pixel) const {
  if (m_isStale) return -1;
  int best = -1;
  double bestDistance = kHitRadiusPx;
  for (int row : m_plottedRows) {
    const QPointF delta = pixelOf(row) - pixel;
    const double distance = std::hypot(delta.x(), delta.y());
    if (distance <= bestDistance) {
      bestDistance = distance;
      best = row;
    }
  }
  return best;
}

QString RooflinePlot::pointToolTip(const RooflinePoint& p) {
  QString text = QStringLiteral("<b>%1</b> — %2 (%3)<br>")
                     .arg(p.opName(), p.phaseName(), p.isPredicted ? tr("predicted") : tr("measured"));
  text += tr("%1 FLOP/byte · %2").arg(p.intensity, 0, 'g', 3).arg(formatFlopsPerSecond(p.flopsPerS));
  if (p.isPredicted) {
    text += tr("<br>at the roof: %1 for %2 calls").arg(formatSeconds(p.seconds)).arg(p.numCalls);
  } else {
    text += tr("<br>time %1 over %2 calls").arg(formatSeconds(p.seconds)).arg(p.numCalls);
    if (p.roofFlopsPerS > 0) {
      text += tr("<br><b>%1%</b> of the roof above it (%2)")
                  .arg(100.0 * p.fractionOfRoof(), 0, 'f', 1)
                  .arg(formatFlopsPerSecond(p.roofFlopsPerS));
    }
  }
  if (!p.shapes.isEmpty()) {
    QStringList shown = p.shapes.mid(0, 6);
    if (p.shapes.size() > shown.size()) shown << tr("… %1 more").arg(p.shapes.size() - shown.size());
    for (const QString& shape : shown) text += QStringLiteral("<br>") + shape.toHtmlEscaped();
  }
  return text;
}

bool RooflinePlot::event(QEvent* event) {
  if (event->type() == QEvent::ToolTip) {
    auto* help = static_cast<QHelpEvent*>(event);
    const int row = pointAt(help->pos());
    if (row >= 0) QToolTip::showText(help->globalPos(), pointToolTip(m_model->point(row)), this);
    else QToolTip::hideText();
    return true;
  }
  return QCustomPlot::event(event);
}

bool RooflinePlot::drawnWithLabelsAt(QSize size, const std::function<bool()>& draw) {
  const QRect widgetViewport = viewport();
  if (size.width() <= 0) size.setWidth(widgetViewport.width());
  if (size.height() <= 0) size.setHeight(widgetViewport.height());
  // QCustomPlot lays the chart out again at the export's size when it draws (the same
  // viewport as here), so the places chosen now are the ones drawn.
  setViewport(QRect(QPoint(0, 0), size));
  placePointLabels();
  const bool isWritten = draw();
  setViewport(widgetViewport);
  placePointLabels();
  return isWritten;
}

bool RooflinePlot::exportPng(const QString& path, int width, int height) {
  if (m_isStale) rebuild();
  return drawnWithLabelsAt(QSize(width, height), [&] { return savePng(path, width, height); });
}

bool RooflinePlot::exportSvg(const QString& path, int width, int height) {
  if (m_isStale) rebuild();
  QSvgGenerator generator;
  generator.setFileName(path);
  generator.setSize(QSize(width, height));
  generator.setViewBox(QRect(0, 0, width, height));
  generator.setResolution(logicalDpiX());  // text the same size as on screen and in the PNG
  generator.setTitle(tr("Roofline"));
  generator.setDescription(tr("Inference Workbench roofline chart"));
  return drawnWithLabelsAt(QSize(width, height), [&] {
    QCPPainter painter;
    if (!painter.begin(&generator)) return false;
    toPainter(&painter, width, height);
    return painter.end();
  });
}

}  // namespace iwb::ui
