// QuantCharts: the two scatter charts with their Pareto fronts.
#include "quantlab/quant_charts.h"

#include "quantlab/pareto.h"
#include "quantlab/quant_runs_model.h"

#include <QHBoxLayout>
#include <qcustomplot.h>

namespace iwb::ui {
namespace {

struct Point {
  double x, y;
  QString label;
  bool isReference;
};

// Draws `points` (and the front through them) into `plot`; returns the front's labels.
QStringList draw(QCustomPlot* plot, const std::vector<Point>& points, bool isXLowerBetter, bool isYLowerBetter) {
  plot->clearGraphs();
  plot->clearItems();
  const QColor ink(0x33, 0x66, 0x99), front(0xcc, 0x44, 0x22);
  QCPGraph* all = plot->addGraph();
  all->setLineStyle(QCPGraph::lsNone);
  all->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssCircle, ink.darker(120), ink, 7));
  all->setName(QObject::tr("runs"));
  std::vector<ParetoPoint> pp;
  for (const Point& p : points) {
    all->addData(p.x, p.y);
    pp.push_back({p.x, p.y});
    auto* text = new QCPItemText(plot);
    text->position->setCoords(p.x, p.y);
    text->setPositionAlignment(Qt::AlignLeft | Qt::AlignBottom);
    text->setText(QStringLiteral(" ") + p.label);
    text->setFont(QFont(plot->font().family(), 8, p.isReference ? QFont::Bold : QFont::Normal));
    text->setColor(p.isReference ? Qt::black : ink.darker(150));
  }
  QStringList labels;
  QCPGraph* line = plot->addGraph();
  line->setName(QObject::tr("Pareto front"));
  line->setPen(QPen(front, 2, Qt::DashLine));
  line->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssCircle, QPen(front, 2), Qt::NoBrush, 11));
  QVector<double> xs, ys;
  for (const int i : paretoFront(pp, isXLowerBetter, isYLowerBetter)) {
    xs << points[static_cast<size_t>(i)].x;
    ys << points[static_cast<size_t>(i)].y;
    labels << points[static_cast<size_t>(i)].label;
  }
  line->setData(xs, ys, true);
  plot->rescaleAxes();
  // Room for the labels on the right and top.
  const QCPRange x = plot->xAxis->range(), y = plot->yAxis->range();
  plot->xAxis->setRange(x.lower - 0.05 * x.size(), x.upper + 0.2 * x.size());
  if (plot->yAxis->scaleType() == QCPAxis::stLogarithmic) plot->yAxis->setRange(y.lower / 1.5, y.upper * 2.0);
  else plot->yAxis->setRange(y.lower - 0.05 * y.size(), y.upper + 0.12 * y.size());
  plot->legend->setVisible(true);
  plot->replot();
  return labels;
}

QCustomPlot* makePlot(const QString& title, const QString& x, const QString& y) {
  auto* plot = new QCustomPlot;
  plot->setMinimumSize(280, 220);
  plot->plotLayout()->insertRow(0);
  plot->plotLayout()->addElement(0, 0, new QCPTextElement(plot, title, QFont(plot->font().family(), 10, QFont::Bold)));
  plot->xAxis->setLabel(x);
  plot->yAxis->setLabel(y);
  plot->axisRect()->insetLayout()->setInsetAlignment(0, Qt::AlignTop | Qt::AlignRight);
  return plot;
}

}  // namespace

QuantCharts::QuantCharts(QWidget* parent)
    : QWidget(parent),
      m_sizeKl(makePlot(tr("Size against KL divergence"), tr("file size (MiB)"), tr("mean KL divergence from the base"))),
      m_speedPerplexity(makePlot(tr("Speed against perplexity"), tr("generation tokens/s"), tr("perplexity"))) {
  m_sizeKl->setObjectName(QStringLiteral("sizeKlPlot"));
  m_speedPerplexity->setObjectName(QStringLiteral("speedPerplexityPlot"));
  m_sizeKl->yAxis->setScaleType(QCPAxis::stLogarithmic);
  m_sizeKl->yAxis->setTicker(QSharedPointer<QCPAxisTickerLog>(new QCPAxisTickerLog));
  auto* layout = new QHBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->addWidget(m_sizeKl);
  layout->addWidget(m_speedPerplexity);
}

void QuantCharts::setRuns(const std::vector<iwb::quant::QuantRun>& runs) {
  std::vector<Point> sizeKl, speedPpl;
  for (const iwb::quant::QuantRun& r : runs) {
    if (r.status != iwb::quant::RunStatus::Done) continue;
    const QString label = QuantRunsModel::label(r);
    // The base's KL is 0 (up to the logits cache's rounding): off a log axis, so not a point there.
    if (r.file_bytes && r.kl_mean && *r.kl_mean > 0 && !r.is_reference) sizeKl.push_back({*r.file_bytes / 1048576.0, *r.kl_mean, label, false});
    if (r.gen_tokens_per_s && r.perplexity) speedPpl.push_back({*r.gen_tokens_per_s, *r.perplexity, label, r.is_reference});
  }
  m_sizeKlFront = draw(m_sizeKl, sizeKl, true, true);
  m_speedPerplexityFront = draw(m_speedPerplexity, speedPpl, false, true);
}

}  // namespace iwb::ui
