// The roofline chart: a log-log QCustomPlot of a RooflineModel — the measured roof (bandwidth
// slope, compute ceiling, labelled ridge point), optional dashed datasheet roofs, and the points
// coloured by phase (filled: measured, hollow: predicted), each labelled with its op. Tooltips
// describe the point under the mouse; PNG and SVG export render the chart off screen.
#pragma once

#include <qcustomplot.h>

#include <functional>
#include <vector>

namespace iwb::ui {

class RooflineModel;
struct RooflinePoint;

class RooflinePlot : public QCustomPlot {
  Q_OBJECT

 public:
  explicit RooflinePlot(RooflineModel* model, QWidget* parent = nullptr);

  void setShowsDatasheetRoofs(bool isShown);
  bool showsDatasheetRoofs() const { return m_showsDatasheetRoofs; }

  // The model row of the plotted point nearest `pixel` (widget coordinates) within a few
  // pixels; -1 when none.
  int pointAt(const QPointF& pixel) const;
  // Where a model row's point is drawn now (widget coordinates); null when it is not drawn.
  QPointF pixelOf(int row) const;
  // The tooltip of a point: op, phase, shapes, time, calls, and % of the roof above it.
  static QString pointToolTip(const RooflinePoint& point);

  bool exportPng(const QString& path, int width, int height);
  bool exportSvg(const QString& path, int width, int height);

 public slots:
  // Redraws everything from the model now (points move; the axes follow the data).
  void rebuild();
  // Redraws now if the chart is on screen, else when it is next shown: while another tab is
  // in front, live updates cost nothing (on a small machine the GUI shares cores with the engine).
  void scheduleRebuild();

 protected:
  bool event(QEvent* event) override;
  void showEvent(QShowEvent* event) override;
  void resizeEvent(QResizeEvent* event) override;

 private:
  void addRoof(const QString& name, double bandwidth, double peak, const QPen& pen, double xMin, double xMax);
  void addPointGraphs();
  // Moves the legend to the corner where it covers the fewest points, then each point's label
  // to a side where it covers no other label, point or the legend.
  void placePointLabels();
  // The legend's corner: the first of bottom right, top left, bottom left and top right that
  // covers none of `keepClear` (the points' and the ridge's pixel boxes), else the one that
  // covers the fewest.
  void placeLegend(const std::vector<QRectF>& keepClear);
  // Runs `draw` (an export) with the chart laid out at `size` and the labels placed for it, then
  // places them for the widget again: a side free at the widget's size may not be free at
  // another (a smaller export puts the points closer together). 0 keeps the widget's length.
  bool drawnWithLabelsAt(QSize size, const std::function<bool()>& draw);

  RooflineModel* m_model;
  bool m_showsDatasheetRoofs = false;
  bool m_isStale = false;    // the model changed while the chart was hidden
  QList<int> m_plottedRows;  // model rows drawn, for hit tests
  std::vector<QCPItemText*> m_pointLabels;  // owned by the plot (items), cleared with them
  QCPItemText* m_ridgeLabel = nullptr;
};

}  // namespace iwb::ui
