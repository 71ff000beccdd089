// QuantCharts: the two scatter charts with their Pareto fronts; runs with a quantized KV cache
// drawn apart from those with the f16 cache so the two levers read side by side.
#include "quantlab/quant_charts.h"

#include "quantlab/pareto.h"
#include "quantlab/quant_runs_model.h"
#include "widgets/chart_labels.h"

#include <qcustomplot.h>
#include <QHBoxLayout>

#include <algorithm>

namespace iwb::ui {
namespace {

struct Point {
  double x, y;
  QString label;
  bool isReference;
  bool isKvQuantized;  // drawn with the KV marker
};

bool isKvQuantized(const iwb::quant::QuantRun& r) {
  return !r.kv_cache_type.empty() && r.kv_cache_type != "f16" && r.kv_cache_type != "f16/f16";
}

// Each label at the first corner of its point (right above, right below, left above, left
// below) where it overlaps no label placed before it: runs of one weight type with several
// caches land close together. Needs the plot's layout, so it replots first.
void placeLabels(QCustomPlot* plot, const std::vector<QCPItemText*>& texts) {
  plot->replot();
  const LabelSpot corners[] = {{Qt::AlignLeft | Qt::AlignBottom, {}},
                               {Qt::AlignLeft | Qt::AlignTop, {}},
                               {Qt::AlignRight | Qt::AlignBottom, {}},
                               {Qt::AlignRight | Qt::AlignTop, {}}};
  placeChartLabels(plot, texts, corners);
}

// Draws `points` (and the front through them) into `plot`; returns the front's labels.
QStringList draw(QCustomPlot* plot, const std::vector<Point>& points, bool isXLowerBetter, bool isYLowerBetter) {
  plot->clearGraphs();
  plot->clearItems();
  const QColor ink(0x33, 0x66, 0x99), kv(0x2e, 0x8b, 0x57), front(0xcc, 0x44, 0x22);
  QCPGraph* weights = plot->addGraph();
  weights->setLineStyle(QCPGraph::lsNone);
  weights->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssCircle, ink.darker(120), ink, 7));
  weights->setName(QObject::tr("weight types, f16 KV cache"));
  QCPGraph* caches = plot->addGraph();
  caches->setLineStyle(QCPGraph::lsNone);
  caches->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssTriangle, kv.darker(130), kv, 9));
  caches->setName(QObject::tr("quantized KV cache"));
  std::vector<ParetoPoint> pp;
  std::vector<QCPItemText*> texts;
  for (const Point& p : points) {
    (p.isKvQuantized ? caches : weights)->addData(p.x, p.y);
    pp.push_back({p.x, p.y});
    auto* text = new QCPItemText(plot);
    texts.push_back(text);
    text->position->setCoords(p.x, p.y);
    text->setPositionAlignment(Qt::AlignLeft | Qt::AlignBottom);
    text->setText(QStringLiteral(" ") + p.label);
    text->setFont(QFont(plot->font().family(), 8, p.isReference ? QFont::Bold : QFont::Normal));
    text->setColor(p.isReference ? QColor(Qt::black) : (p.isKvQuantized ? kv.darker(160) : ink.darker(150)));
  }
  // An empty series would only crowd the legend.
  if (caches->dataCount() == 0) caches->removeFromLegend();
  if (weights->dataCount() == 0) weights->removeFromLegend();
  QStringList labels;
  QCPGraph* line = plot->addGraph();
  line->setName(QObject::tr("Pareto front"));
  line->setPen(QPen(front, 2, Qt::DashLine));
  line->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssCircle, QPen(front, 2), Qt::NoBrush, 12));
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
  plot->xAxis->setRange(x.lower - 0.05 * x.size(), x.upper + 0.25 * x.size());
  if (plot->yAxis->scaleType() == QCPAxis::stLogarithmic)
    plot->yAxis->setRange(y.lower / 1.5, y.upper * 3.0);
  else
    plot->yAxis->setRange(y.lower - 0.05 * y.size(), y.upper + 0.2 * y.size());
  plot->legend->setVisible(true);
  placeLabels(plot, texts);
  plot->replot();
  return labels;
}

QCustomPlot* makePlot(const QString& x, const QString& y) {
  auto* plot = new QCustomPlot;
  plot->setMinimumSize(280, 220);
  plot->plotLayout()->insertRow(0);
  plot->plotLayout()->addElement(0, 0,
                                 new QCPTextElement(plot, QString(), QFont(plot->font().family(), 10, QFont::Bold)));
  plot->xAxis->setLabel(x);
  plot->yAxis->setLabel(y);
  // The legend in a row of its own under the title: inside the axes it hid points wherever
  // it sat (a run may land in any corner).
  plot->plotLayout()->insertRow(1);
  plot->axisRect()->insetLayout()->take(plot->legend);
  plot->plotLayout()->addElement(1, 0, plot->legend);
  plot->legend->setFillOrder(QCPLegend::foColumnsFirst);
  plot->legend->setBorderPen(Qt::NoPen);
  plot->legend->setFont(QFont(plot->font().family(), 8));
  plot->plotLayout()->setRowStretchFactor(1, 0.001);
  return plot;
}

void setTitle(QCustomPlot* plot, const QString& title) {
  if (auto* element = qobject_cast<QCPTextElement*>(plot->plotLayout()->element(0, 0))) element->setText(title);
}

}  // namespace

QuantCharts::QuantCharts(QWidget* parent)
    : QWidget(parent),
      // Short enough for the axis at the chart's smallest height (the whole sentence was cut
      // off at both ends there); the rest is in the tooltip.
      m_memoryKl(makePlot(QString(), tr("mean KL from the base"))),
      m_speedPerplexity(makePlot(tr("generation tokens/s"), tr("perplexity"))) {
  m_memoryKl->setObjectName(QStringLiteral("memoryKlPlot"));
  m_memoryKl->setToolTip(
      tr("Each run's mean KL divergence of its next-token distributions from the base model's "
         "(the source file's weights with an f16 KV cache), against the memory its weights and "
         "KV cache take."));
  m_speedPerplexity->setObjectName(QStringLiteral("speedPerplexityPlot"));
  m_memoryKl->yAxis->setScaleType(QCPAxis::stLogarithmic);
  m_memoryKl->yAxis->setTicker(QSharedPointer<QCPAxisTickerLog>(new QCPAxisTickerLog));
  auto* layout = new QHBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->addWidget(m_memoryKl, 3);
  layout->addWidget(m_speedPerplexity, 2);
}

void QuantCharts::setMemoryBasis(qint64 context, qint64 numSequences) {
  m_context = std::max<qint64>(1, context);
  m_numSequences = std::max<qint64>(1, numSequences);
  setRuns(m_runs);
}

double QuantCharts::memoryBytes(const iwb::quant::QuantRun& r, qint64 context, qint64 numSequences) {
  if (!r.kv_bytes_per_token) return -1;
  const double weights = r.weights_bytes.value_or(r.file_bytes.value_or(0));
  if (weights <= 0) return -1;
  return weights + iwb::quant::kv_pool_bytes_for(*r.kv_bytes_per_token, r.kv_block_size, context, numSequences);
}

void QuantCharts::setRuns(const std::vector<iwb::quant::QuantRun>& runs) {
  if (&runs != &m_runs) m_runs = runs;
  std::vector<Point> memoryKl, speedPpl;
  // Speed at a context depth where runs measured it (the KV cache's cost shows there), else the
  // short test from an empty context; never both on one axis.
  int64_t depth = 0;
  for (const iwb::quant::QuantRun& r : m_runs) {
    if (r.status == iwb::quant::RunStatus::Done && r.depth_gen_tokens_per_s) depth = std::max(depth, r.gen_depth);
  }
  m_skippedForMemory = 0;
  for (const iwb::quant::QuantRun& r : m_runs) {
    if (r.status != iwb::quant::RunStatus::Done) continue;
    const QString label = QuantRunsModel::label(r);
    const bool kv = isKvQuantized(r);
    // The base's KL is 0 (up to the logits cache's rounding): off a log axis, so not a point there.
    if (r.kl_mean && *r.kl_mean > 0 && !r.is_reference) {
      const double bytes = memoryBytes(r, m_context, m_numSequences);
      if (bytes > 0)
        memoryKl.push_back({bytes / 1048576.0, *r.kl_mean, label, false, kv});
      else
        ++m_skippedForMemory;  // recorded before the KV figures were
    }
    const std::optional<double> rate = depth > 0 ? r.depth_gen_tokens_per_s : r.gen_tokens_per_s;
    if (rate && r.perplexity) speedPpl.push_back({*rate, *r.perplexity, label, r.is_reference, kv});
  }
  setTitle(m_memoryKl, tr("Memory against KL divergence: weights + KV cache of %n sequence(s) of %1 tokens", nullptr,
                          static_cast<int>(m_numSequences))
                           .arg(m_context));
  m_memoryKl->xAxis->setLabel(
      m_skippedForMemory > 0 ? tr("memory (MiB); %n run(s) without KV figures not drawn", nullptr, m_skippedForMemory)
                             : tr("memory (MiB)"));
  setTitle(m_speedPerplexity, depth > 0 ? tr("Speed at depth against perplexity") : tr("Speed against perplexity"));
  m_speedPerplexity->xAxis->setLabel(depth > 0 ? tr("generation tokens/s after %1 tokens in the cache").arg(depth)
                                               : tr("generation tokens/s"));
  // A broken run (a 4-bit cache on a model with large key channels: perplexity x100) would
  // flatten every other point against a linear axis: log scale once the spread passes 4x.
  double lowest = 0, highest = 0;
  for (const Point& p : speedPpl) {
    lowest = lowest > 0 ? std::min(lowest, p.y) : p.y;
    highest = std::max(highest, p.y);
  }
  const bool isLog = lowest > 0 && highest / lowest > 4;
  m_speedPerplexity->yAxis->setScaleType(isLog ? QCPAxis::stLogarithmic : QCPAxis::stLinear);
  m_speedPerplexity->yAxis->setTicker(isLog ? QSharedPointer<QCPAxisTicker>(new QCPAxisTickerLog)
                                            : QSharedPointer<QCPAxisTicker>(new QCPAxisTicker));
  m_memoryKlFront = draw(m_memoryKl, memoryKl, true, true);
  m_speedPerplexityFront = draw(m_speedPerplexity, speedPpl, false, true);
}

}  // namespace iwb::ui
