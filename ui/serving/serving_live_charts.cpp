// ServingLiveCharts: one graph per live series, data appended per sample, axes rescaled.
#include "serving/serving_live_charts.h"

#include "serving/serving_plot.h"

#include <qcustomplot.h>
#include <QGridLayout>

namespace iwb::ui {
namespace {

QCPGraph* addLine(QCustomPlot* plot, const QString& name, const QColor& color, Qt::PenStyle style,
                  QCPAxis* valueAxis = nullptr) {
  QCPGraph* g = plot->addGraph(plot->xAxis, valueAxis != nullptr ? valueAxis : plot->yAxis);
  g->setName(name);
  g->setPen(QPen(color, 2, style));
  return g;
}

}  // namespace

ServingLiveCharts::ServingLiveCharts(QWidget* parent)
    : QWidget(parent),
      m_latency(makeServingPlot(QStringLiteral("liveLatencyPlot"),
                                tr("Latency (last %1 requests)").arg(ServingWorker::kLatencyWindow), tr("seconds"),
                                tr("ms"))),
      m_throughput(makeServingPlot(QStringLiteral("liveThroughputPlot"), tr("Output throughput"), tr("seconds"),
                                   tr("tokens/s"))),
      m_server(makeServingPlot(QStringLiteral("liveServerPlot"), tr("Server: KV cache and requests"), tr("seconds"),
                               tr("KV cache used (%)"))),
      m_acceptance(makeServingPlot(QStringLiteral("liveAcceptancePlot"), tr("Speculative acceptance per position"),
                                   tr("draft position"), tr("accepted (%)"))) {
  auto* grid = new QGridLayout(this);
  grid->setContentsMargins(0, 0, 0, 0);
  grid->addWidget(m_latency, 0, 0);
  grid->addWidget(m_throughput, 0, 1);
  grid->addWidget(m_server, 1, 0);
  grid->addWidget(m_acceptance, 1, 1);
  m_server->yAxis2->setVisible(true);
  m_server->yAxis2->setLabel(tr("requests"));
  m_acceptance->legend->setVisible(false);  // bars need no legend
  QSharedPointer<QCPAxisTickerFixed> ticker(new QCPAxisTickerFixed);
  ticker->setTickStep(1.0);
  ticker->setScaleStrategy(QCPAxisTickerFixed::ssMultiples);
  m_acceptance->xAxis->setTicker(ticker);
  m_acceptanceNote = new QCPItemText(m_acceptance);
  m_acceptanceNote->position->setType(QCPItemPosition::ptAxisRectRatio);
  m_acceptanceNote->position->setCoords(0.5, 0.5);
  m_acceptanceNote->setText(tr("The server reports\nno speculative decoding"));  // two lines: fits the smallest chart
  m_acceptanceNote->setColor(palette().color(QPalette::PlaceholderText));
  clear();
}

void ServingLiveCharts::clear() {
  const QColor ttft = servingRunColor(0), itl = servingRunColor(1), kv = servingRunColor(2);
  m_latency->clearGraphs();
  addLine(m_latency, tr("TTFT p50"), ttft, Qt::DashLine);
  addLine(m_latency, tr("TTFT p99"), ttft, Qt::SolidLine);
  addLine(m_latency, tr("ITL p50"), itl, Qt::DashLine);
  addLine(m_latency, tr("ITL p99"), itl, Qt::SolidLine);
  m_throughput->clearGraphs();
  addLine(m_throughput, tr("output tokens/s"), servingRunColor(0), Qt::SolidLine);
  m_server->clearGraphs();
  addLine(m_server, tr("KV cache used"), kv, Qt::SolidLine);
  addLine(m_server, tr("running"), servingRunColor(0), Qt::SolidLine, m_server->yAxis2);
  addLine(m_server, tr("waiting"), servingRunColor(1), Qt::DashLine, m_server->yAxis2);
  m_acceptance->clearPlottables();
  m_acceptanceBars = new QCPBars(m_acceptance->xAxis, m_acceptance->yAxis);
  m_acceptanceBars->setWidth(0.7);
  m_acceptanceBars->setPen(QPen(servingRunColor(0).darker(130)));
  m_acceptanceBars->setBrush(servingRunColor(0));
  m_acceptance->xAxis->setRange(0.3, 4.7);
  m_acceptance->yAxis->setRange(0, 105);
  m_acceptanceNote->setVisible(true);
  m_numSamples = 0;
  rescale();
}

void ServingLiveCharts::addSample(const ServingLiveSample& s) {
  ++m_numSamples;
  if (s.hasLatency) {
    m_latency->graph(0)->addData(s.seconds, s.ttftP50);
    m_latency->graph(1)->addData(s.seconds, s.ttftP99);
    m_latency->graph(2)->addData(s.seconds, s.itlP50);
    m_latency->graph(3)->addData(s.seconds, s.itlP99);
  }
  m_throughput->graph(0)->addData(s.seconds, s.outputTokensPerS);
  if (s.kvCacheUsage) m_server->graph(0)->addData(s.seconds, 100.0 * *s.kvCacheUsage);
  if (s.numRunning) m_server->graph(1)->addData(s.seconds, *s.numRunning);
  if (s.numWaiting) m_server->graph(2)->addData(s.seconds, *s.numWaiting);
  QVector<double> positions, accepted;
  for (qsizetype i = 0; i < s.acceptancePerPosition.size(); ++i) {
    positions << static_cast<double>(i + 1);
    accepted << 100.0 * s.acceptancePerPosition[i];
  }
  m_acceptanceBars->setData(positions, accepted, true);
  m_acceptanceNote->setVisible(positions.isEmpty());
  m_acceptance->xAxis->setRange(0.3, std::max<double>(4, static_cast<double>(positions.size())) + 0.7);
  rescale();
}

void ServingLiveCharts::rescale() {
  for (QCustomPlot* p : {m_latency, m_throughput, m_server}) {
    p->rescaleAxes();
    if (p->xAxis->range().size() < 1) p->xAxis->setRange(0, 10);
    p->yAxis->setRangeLower(0);
    if (p->yAxis->range().upper < 1) p->yAxis->setRangeUpper(1);
    p->yAxis->setRangeUpper(p->yAxis->range().upper * 1.1);
  }
  m_server->yAxis->setRange(0, 105);
  m_server->yAxis2->setRangeLower(0);
  m_server->yAxis2->setRangeUpper(std::max(4.0, m_server->yAxis2->range().upper * 1.1));
  for (QCustomPlot* p : {m_latency, m_throughput, m_server, m_acceptance}) p->replot(QCustomPlot::rpQueuedReplot);
}

}  // namespace iwb::ui
