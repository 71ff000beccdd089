// SpecCharts: bars for acceptance per position, accepted lengths and predicted tokens/s per K;
// lines for draft and verify milliseconds per step.
#include "spec/spec_charts.h"

#include "widgets/legend_room.h"

#include <QGridLayout>
#include <qcustomplot.h>

namespace iwb::ui {
namespace {

QCustomPlot* makePlot(const QString& name, const QString& title, const QString& x, const QString& y) {
  auto* plot = new QCustomPlot;
  plot->setObjectName(name);
  plot->setMinimumSize(220, 150);  // two rows of charts in a window that fits a 1366 x 768 screen
  plot->plotLayout()->insertRow(0);
  plot->plotLayout()->addElement(0, 0, new QCPTextElement(plot, title, QFont(plot->font().family(), 10, QFont::Bold)));
  plot->xAxis->setLabel(x);
  plot->yAxis->setLabel(y);
  return plot;
}

// Integer ticks 1..n (or 0..n) under bars.
void integerTicks(QCustomPlot* plot) {
  QSharedPointer<QCPAxisTickerFixed> ticker(new QCPAxisTickerFixed);
  ticker->setTickStep(1.0);
  ticker->setScaleStrategy(QCPAxisTickerFixed::ssMultiples);
  plot->xAxis->setTicker(ticker);
}

QCPBars* bars(QCustomPlot* plot, const QColor& color) {
  auto* b = new QCPBars(plot->xAxis, plot->yAxis);
  b->setWidth(0.7);
  b->setPen(QPen(color.darker(130)));
  b->setBrush(color);
  return b;
}

}  // namespace

SpecCharts::SpecCharts(QWidget* parent)
    : QWidget(parent),
      m_acceptance(makePlot(QStringLiteral("acceptancePlot"), tr("Acceptance per draft position"), tr("position"),
                            tr("accepted (%)"))),
      m_histogram(makePlot(QStringLiteral("histogramPlot"), tr("Accepted length per step"), tr("accepted tokens"),
                           tr("steps"))),
      m_times(makePlot(QStringLiteral("timesPlot"), tr("Draft and verify time per step"), tr("step"), tr("ms"))),
      m_predicted(makePlot(QStringLiteral("predictedPlot"), tr("Predicted speed per K"), tr("K (0: no speculation)"),
                           tr("tokens/s"))) {
  auto* grid = new QGridLayout(this);
  grid->setContentsMargins(0, 0, 0, 0);
  grid->addWidget(m_acceptance, 0, 0);
  grid->addWidget(m_histogram, 0, 1);
  grid->addWidget(m_times, 1, 0);
  grid->addWidget(m_predicted, 1, 1);
  for (QCustomPlot* p : {m_acceptance, m_histogram, m_predicted}) integerTicks(p);
  m_times->legend->setVisible(true);
  // One row: the chart is short, and a two-row legend took most of its height from the lines.
  m_times->legend->setFillOrder(QCPLayoutGrid::foColumnsFirst);
  m_times->axisRect()->insetLayout()->setInsetAlignment(0, Qt::AlignTop | Qt::AlignLeft);
  showStats({}, {}, {});
}

void SpecCharts::showStats(const iwb::spec::SpeculationStats& s, const QList<SpeculationStep>& steps,
                           const iwb::spec::DraftLengthSuggestion& suggestion) {
  const QColor blue(0x33, 0x66, 0x99), orange(0xdd, 0x77, 0x22), green(0x33, 0x99, 0x55);

  m_acceptance->clearPlottables();
  QVector<double> xs, ys;
  for (size_t j = 0; j < s.drafted_per_position.size(); ++j) {
    xs << static_cast<double>(j + 1);
    ys << 100.0 * s.position_acceptance(j);
  }
  bars(m_acceptance, blue)->setData(xs, ys, true);
  m_acceptance->xAxis->setRange(0.3, std::max<double>(4, static_cast<double>(xs.size())) + 0.7);
  m_acceptance->yAxis->setRange(0, 105);
  m_acceptance->replot();

  m_histogram->clearPlottables();
  xs.clear();
  ys.clear();
  double top = 1;
  for (size_t n = 0; n < s.accepted_length_histogram.size(); ++n) {
    xs << static_cast<double>(n);
    ys << static_cast<double>(s.accepted_length_histogram[n]);
    top = std::max(top, ys.back());
  }
  bars(m_histogram, green)->setData(xs, ys, true);
  m_histogram->xAxis->setRange(-0.7, std::max<double>(4, static_cast<double>(xs.size())) - 0.3);
  m_histogram->yAxis->setRange(0, top * 1.1);
  m_histogram->replot();

  m_times->clearGraphs();
  QCPGraph* draft = m_times->addGraph();
  draft->setName(tr("draft"));
  draft->setPen(QPen(orange, 2));
  QCPGraph* verify = m_times->addGraph();
  verify->setName(tr("verify"));
  verify->setPen(QPen(blue, 2));
  double most = 1;
  for (qsizetype i = 0; i < steps.size(); ++i) {
    const double d = 1e3 * steps[i].stats.draft_seconds, v = 1e3 * steps[i].stats.verify_seconds;
    draft->addData(static_cast<double>(i), d);
    verify->addData(static_cast<double>(i), v);
    most = std::max({most, d, v});
  }
  m_times->xAxis->setRange(0, std::max<double>(10, static_cast<double>(steps.size())));
  setValueRangeBelowLegend(m_times, {.bottom = 0, .top = most, .minimumUpper = 1.0});  // the legend is top left
  m_times->replot();

  m_predicted->clearPlottables();
  QVector<double> ks, rates, bestK, bestRate;
  double fastest = 1;
  for (size_t k = 0; k < suggestion.predicted_tokens_per_second.size(); ++k) {
    const double rate = suggestion.predicted_tokens_per_second[k];
    fastest = std::max(fastest, rate);
    if (static_cast<int32_t>(k) == suggestion.num_draft_tokens && !s.empty()) {
      bestK << static_cast<double>(k);
      bestRate << rate;
    } else {
      ks << static_cast<double>(k);
      rates << rate;
    }
  }
  bars(m_predicted, blue.lighter(140))->setData(ks, rates, true);
  QCPBars* best = bars(m_predicted, orange);
  best->setData(bestK, bestRate, true);
  m_predicted->xAxis->setRange(-0.7, std::max<double>(8, static_cast<double>(suggestion.predicted_tokens_per_second.size())) - 0.3);
  m_predicted->yAxis->setRange(0, fastest * 1.1);
  m_predicted->replot();
}

}  // namespace iwb::ui
