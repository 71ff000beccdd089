// ServingSweepCharts: graphs, labels and lines rebuilt from the curves on every change.
#include "serving/serving_sweep_charts.h"

#include "serving/serving_plot.h"

#include <qcustomplot.h>
#include <QGridLayout>
#include <QPainter>
#include <QPixmap>

#include <algorithm>
#include <cmath>

namespace iwb::ui {
namespace {

QCPGraph* addSeries(QCustomPlot* plot, const QString& name, const QColor& color, Qt::PenStyle style,
                    QCPScatterStyle::ScatterShape shape) {
  QCPGraph* g = plot->addGraph();
  g->setName(name);
  g->setPen(QPen(color, 2, style));
  g->setScatterStyle(QCPScatterStyle(shape, color, color, 7));
  return g;
}

// A latency curve joins its points in the order the load was offered (concurrency ascending),
// not by x: a server past its knee can achieve less throughput at a higher concurrency, and
// the line then turns back, which is the point of the chart.
QCPCurve* addCurve(QCustomPlot* plot, const QString& name, const QColor& color, Qt::PenStyle style,
                   QCPScatterStyle::ScatterShape shape, const QVector<double>& x, const QVector<double>& y) {
  auto* c = new QCPCurve(plot->xAxis, plot->yAxis);
  c->setName(name);
  c->setPen(QPen(color, 2, style));
  c->setScatterStyle(QCPScatterStyle(shape, color, color, 7));
  c->setData(x, y);
  return c;
}

void addText(QCustomPlot* plot, double x, double y, const QString& text, const QColor& color, Qt::Alignment align) {
  auto* t = new QCPItemText(plot);
  t->position->setCoords(x, y);
  t->setPositionAlignment(align);
  t->setText(text);
  t->setColor(color);
  t->setFont(QFont(plot->font().family(), 8));
  t->setPadding(QMargins(3, 1, 3, 1));
}

void addSloLine(QCustomPlot* plot, double y, const QString& text) {
  auto* line = new QCPItemStraightLine(plot);
  line->point1->setCoords(0, y);
  line->point2->setCoords(1, y);
  line->setPen(QPen(QColor(0xcc, 0x22, 0x22), 1.5, Qt::DashDotLine));
  addText(plot, 0, y, text, QColor(0xcc, 0x22, 0x22), Qt::AlignLeft | Qt::AlignBottom);
}

}  // namespace

ServingSweepCharts::ServingSweepCharts(QWidget* parent)
    : QWidget(parent),
      m_ttft(makeServingPlot(QStringLiteral("sweepTtftPlot"), tr("TTFT against load"), QString(), tr("ms"))),
      m_itl(
          makeServingPlot(QStringLiteral("sweepItlPlot"), tr("Inter-token latency against load"), QString(), tr("ms"))),
      m_decode(makeServingPlot(QStringLiteral("sweepDecodePlot"), tr("Decode throughput per concurrency"),
                               tr("concurrency"), tr("output tokens/s"))) {
  auto* grid = new QGridLayout(this);
  grid->setContentsMargins(0, 0, 0, 0);
  grid->addWidget(m_ttft, 0, 0);
  grid->addWidget(m_itl, 0, 1);
  grid->addWidget(m_decode, 0, 2);
  // Throughput spans orders of magnitude between a laptop and an H100's bound.
  m_decode->yAxis->setScaleType(QCPAxis::stLogarithmic);
  m_decode->yAxis->setTicker(QSharedPointer<QCPAxisTickerLog>(new QCPAxisTickerLog));
  m_decode->xAxis->setScaleType(QCPAxis::stLogarithmic);
  QSharedPointer<QCPAxisTickerLog> base2(new QCPAxisTickerLog);
  base2->setLogBase(2);
  m_decode->xAxis->setTicker(base2);
  m_decode->legend->setWrap(1);  // long names: the bound's GPU and model
  redraw();
}

void ServingSweepCharts::setCurves(const QVector<ServingCurve>& curves, const iwb::remote::GoodputSlo& slo,
                                   LoadAxis axis) {
  m_curves = curves;
  m_slo = slo;
  m_axis = axis;
  redraw();
}

void ServingSweepCharts::setBound(const DecodeBound& bound) {
  m_bound = bound;
  drawDecode();
}

void ServingSweepCharts::redraw() {
  const QString x = m_axis == LoadAxis::OutputTokensPerS ? tr("achieved output tokens/s") : tr("achieved requests/s");
  m_ttft->xAxis->setLabel(x);
  m_itl->xAxis->setLabel(x);
  drawLatency(m_ttft, true);
  drawLatency(m_itl, false);
  drawDecode();
}

void ServingSweepCharts::drawLatency(QCustomPlot* plot, bool isTtft) {
  plot->clearPlottables();
  plot->clearItems();
  double top = 1;
  for (qsizetype r = 0; r < m_curves.size(); ++r) {
    const ServingCurve& c = m_curves[r];
    const QColor color = servingRunColor(static_cast<int>(r));
    const QVector<double>& p50 = isTtft ? c.ttftP50 : c.itlP50;
    const QVector<double>& p99 = isTtft ? c.ttftP99 : c.itlP99;
    addCurve(plot, tr("%1 p50").arg(c.name), color, Qt::DashLine, QCPScatterStyle::ssCircle, c.load, p50);
    addCurve(plot, tr("%1 p99").arg(c.name), color, Qt::SolidLine, QCPScatterStyle::ssDisc, c.load, p99);
    for (qsizetype i = 0; i < c.load.size(); ++i) {
      top = std::max(top, p99[i]);
      if (c.concurrency[i] > 0) {
        addText(plot, c.load[i], p99[i], QStringLiteral("c=%1").arg(c.concurrency[i]), color,
                Qt::AlignHCenter | Qt::AlignBottom);
      }
    }
    if (c.knee) {
      const auto i = static_cast<qsizetype>(c.knee->index);
      QCPGraph* knee = plot->addGraph();
      knee->setName(r == 0 ? tr("knee") : tr("knee (%1)").arg(c.name));
      knee->setLineStyle(QCPGraph::lsNone);
      knee->setScatterStyle(
          QCPScatterStyle(QCPScatterStyle::ssCircle, QPen(QColor(0xcc, 0x22, 0x22), 2), Qt::NoBrush, 16));
      knee->setData({c.load[i]}, {p99[i]});
    }
  }
  const std::optional<double> slo = isTtft ? m_slo.ttft_ms : m_slo.tpot_ms;
  if (slo && !m_curves.isEmpty()) {
    addSloLine(plot, *slo, isTtft ? tr("SLO TTFT %1 ms").arg(*slo) : tr("SLO TPOT %1 ms").arg(*slo));
    top = std::max(top, *slo);
  }
  plot->rescaleAxes();
  plot->yAxis->setRange(0, top * 1.2);
  const QCPRange x = plot->xAxis->range();
  const double pad = std::max(x.size() * 0.08, std::abs(x.upper) * 0.05 + 1e-9);
  plot->xAxis->setRange(std::max(0.0, x.lower - pad), x.upper + pad);
  // The SLO label sits at the axis's left edge: placed after the range is known.
  for (int i = 0; i < plot->itemCount(); ++i) {
    if (auto* t = qobject_cast<QCPItemText*>(plot->item(i));
        t != nullptr && t->text().startsWith(QLatin1String("SLO"))) {
      t->position->setCoords(plot->xAxis->range().lower, t->position->coords().y());
    }
  }
  plot->replot(QCustomPlot::rpQueuedReplot);
}

void ServingSweepCharts::drawDecode() {
  QCustomPlot* plot = m_decode;
  plot->clearPlottables();
  plot->clearItems();
  double low = 1e300, high = 0, cLow = 1e300, cHigh = 0;
  auto extend = [&](double c, double v) {
    if (c <= 0 || v <= 0) return;
    low = std::min(low, v);
    high = std::max(high, v);
    cLow = std::min(cLow, c);
    cHigh = std::max(cHigh, c);
  };
  for (qsizetype r = 0; r < m_curves.size(); ++r) {
    const ServingCurve& c = m_curves[r];
    QVector<double> xs, ys;
    for (qsizetype i = 0; i < c.concurrency.size(); ++i) {
      if (c.concurrency[i] <= 0 || c.outputTokensPerS[i] <= 0) continue;  // no cap: no place on this axis
      xs << static_cast<double>(c.concurrency[i]);
      ys << c.outputTokensPerS[i];
      extend(xs.back(), ys.back());
    }
    addSeries(plot, c.name, servingRunColor(static_cast<int>(r)), Qt::SolidLine, QCPScatterStyle::ssDisc)
        ->setData(xs, ys);
    // How far the server is from the bound, at each measured concurrency of the first run.
    if (r == 0) {
      for (qsizetype i = 0; i < xs.size(); ++i) {
        const qsizetype j = m_bound.concurrency.indexOf(xs[i]);
        if (j >= 0 && m_bound.tokensPerS[j] > 0) {
          addText(plot, xs[i], ys[i], QStringLiteral("%1%").arg(100.0 * ys[i] / m_bound.tokensPerS[j], 0, 'g', 2),
                  servingRunColor(0), Qt::AlignLeft | Qt::AlignTop);
        }
      }
    }
  }
  if (!m_bound.concurrency.isEmpty()) {
    QCPGraph* bound = addSeries(plot, tr("bound: %1").arg(m_bound.label), QColor(0x55, 0x55, 0x55), Qt::DashLine,
                                QCPScatterStyle::ssTriangle);
    bound->setData(m_bound.concurrency, m_bound.tokensPerS);
    for (qsizetype i = 0; i < m_bound.concurrency.size(); ++i) extend(m_bound.concurrency[i], m_bound.tokensPerS[i]);
  }
  if (high > 0) {
    plot->xAxis->setRange(cLow / 1.5, cHigh * 2);  // room for the share labels on the right
    plot->yAxis->setRange(low / 2, high * 3);
  } else {
    plot->xAxis->setRange(0.7, 70);
    plot->yAxis->setRange(1, 1e4);
  }
  plot->replot(QCustomPlot::rpQueuedReplot);
}

bool ServingSweepCharts::savePng(const QString& path, int width, int height) const {
  const QList<QCustomPlot*> plots = {m_ttft, m_itl, m_decode};
  const int each = width / static_cast<int>(plots.size());
  QPixmap image(each * static_cast<int>(plots.size()), height);
  image.fill(Qt::white);
  QPainter painter(&image);
  for (int i = 0; i < plots.size(); ++i) painter.drawPixmap(i * each, 0, plots[i]->toPixmap(each, height));
  painter.end();
  return image.save(path, "PNG");
}

}  // namespace iwb::ui
