// MetricsPanel: the latest request's figures, the over-time charts and the request table.
#include "metrics/metrics_panel.h"

#include "metrics/bench_results_model.h"
#include "metrics/metrics_model.h"
#include "roofline/machine_ceilings.h"
#include "roofline/roofline_model.h"
#include "widgets/legend_room.h"
#include "worker/engine_controller.h"

#include <qcustomplot.h>

#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QPushButton>
#include <QSplitter>
#include <QTabWidget>
#include <QTableView>
#include <QVBoxLayout>

#include <algorithm>
#include <cmath>

namespace iwb::ui {
namespace {

// stretchColumn takes the width left over (the last column when -1).
QTableView* makeTable(QAbstractItemModel* model, const QString& objectName, int stretchColumn = -1) {
  auto* table = new QTableView;
  table->setObjectName(objectName);
  table->setModel(model);
  table->verticalHeader()->hide();
  table->setAlternatingRowColors(true);
  table->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
  if (stretchColumn >= 0) {
    table->horizontalHeader()->setSectionResizeMode(stretchColumn, QHeaderView::Stretch);
  } else {
    table->horizontalHeader()->setStretchLastSection(true);
  }
  return table;
}

QCustomPlot* makeChart(const QString& objectName, const QString& yLabel) {
  auto* chart = new QCustomPlot;
  chart->setObjectName(objectName);
  chart->xAxis->setLabel(QObject::tr("Session time (s)"));
  chart->yAxis->setLabel(yLabel);
  chart->setMinimumHeight(180);
  chart->legend->setVisible(true);
  QFont font = chart->font();
  font.setPointSize(8);
  chart->legend->setFont(font);
  chart->axisRect()->insetLayout()->setInsetAlignment(0, Qt::AlignTop | Qt::AlignLeft);
  return chart;
}

void setSeries(QCPGraph* graph, const QVector<QPointF>& points) {
  QVector<double> keys, values;
  keys.reserve(points.size());
  values.reserve(points.size());
  for (const QPointF& p : points) {
    keys << p.x();
    values << p.y();  // NaN breaks the line between requests
  }
  graph->setData(keys, values, true);
}

// Ranges over the finite points, from zero up, with a little room; a sensible empty view.
void fitAxes(QCustomPlot* chart, const QList<const QVector<QPointF>*>& series) {
  double xMin = INFINITY, xMax = -INFINITY, yMax = 0;
  for (const auto* points : series) {
    for (const QPointF& p : *points) {
      if (std::isnan(p.y())) continue;
      xMin = std::min(xMin, p.x());
      xMax = std::max(xMax, p.x());
      yMax = std::max(yMax, p.y());
    }
  }
  if (!std::isfinite(xMin)) {
    xMin = 0;
    xMax = 10;
  }
  const double xPad = std::max(0.5, (xMax - xMin) * 0.03);
  chart->xAxis->setRange(xMin - xPad, xMax + xPad);
  // The legend sits in the top left corner: the highest point goes under it (the time to first
  // token's dot and a steady rate's line were drawn behind it).
  setValueRangeBelowLegend(chart, {.bottom = 0, .top = yMax, .minimumUpper = 1.0});
}

}  // namespace

MetricsPanel::MetricsPanel(EngineController* engine, MachineCeilings* ceilings, QWidget* parent)
    : QWidget(parent),
      m_ceilings(ceilings),
      m_model(new MetricsModel(this)),
      m_summary(new QLabel),
      m_ceilingsNote(new QLabel),
      m_rateChart(makeChart(QStringLiteral("tokenRateChart"), tr("Tokens/s"))),
      m_latencyChart(makeChart(QStringLiteral("latencyChart"), tr("Latency (ms)"))),
      m_utilisationChart(makeChart(QStringLiteral("utilisationChart"), tr("Utilisation (%)"))),
      // The model's name takes the spare width: a number column stretched across it reads as empty.
      m_table(makeTable(m_model, QStringLiteral("metricsTable"), MetricsModel::ModelColumn)),
      m_tables(new QTabWidget),
      m_benchModel(new BenchResultsModel(this)) {
  setObjectName(QStringLiteral("metricsPanel"));
  m_summary->setObjectName(QStringLiteral("metricsSummary"));
  m_summary->setTextFormat(Qt::PlainText);
  QFont big = m_summary->font();
  big.setPointSizeF(big.pointSizeF() * 1.2);
  m_summary->setFont(big);
  m_ceilingsNote->setObjectName(QStringLiteral("metricsCeilingsNote"));
  m_ceilingsNote->setTextFormat(Qt::PlainText);
  m_ceilingsNote->setWordWrap(true);

  QCPGraph* rate = m_rateChart->addGraph();
  rate->setName(tr("generation tokens/s (last %1 tokens)").arg(MetricsModel::kRateWindow));
  rate->setPen(QPen(QColor(30, 110, 200), 1.6));
  QCPGraph* itl = m_latencyChart->addGraph();
  itl->setName(tr("inter-token latency"));
  itl->setPen(QPen(QColor(30, 110, 200), 1.2));
  QCPGraph* ttft = m_latencyChart->addGraph();
  ttft->setName(tr("time to first token"));
  ttft->setLineStyle(QCPGraph::lsNone);
  ttft->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssDisc, QColor(230, 120, 20), 8));
  QCPGraph* mbu = m_utilisationChart->addGraph();
  mbu->setName(tr("decode MBU"));
  mbu->setPen(QPen(QColor(30, 110, 200), 1.2));
  mbu->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssDisc, QColor(30, 110, 200), 7));
  QCPGraph* mfu = m_utilisationChart->addGraph();
  mfu->setName(tr("prefill MFU"));
  mfu->setPen(QPen(QColor(230, 120, 20), 1.2));
  mfu->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssDisc, QColor(230, 120, 20), 7));

  m_tables->setDocumentMode(true);
  m_tables->addTab(m_table, tr("Requests"));
  m_tables->addTab(createBenchPage(), tr("Benchmarks (iwb bench)"));
  connect(m_tables, &QTabWidget::currentChanged, this, [this](int index) {
    if (index == 1) reloadBenchResults();  // runs may have been added from the command line
  });

  auto* clearButton = new QPushButton(tr("Clear"));
  connect(clearButton, &QPushButton::clicked, m_model, &MetricsModel::clear);
  auto* top = new QHBoxLayout;
  top->addWidget(m_summary, 1);
  top->addWidget(clearButton);

  auto* charts = new QSplitter(Qt::Horizontal);
  charts->addWidget(m_rateChart);
  charts->addWidget(m_latencyChart);
  charts->addWidget(m_utilisationChart);
  auto* splitter = new QSplitter(Qt::Vertical);
  splitter->addWidget(charts);
  splitter->addWidget(m_tables);
  splitter->setStretchFactor(0, 3);
  splitter->setStretchFactor(1, 2);

  auto* layout = new QVBoxLayout(this);
  layout->addLayout(top);
  layout->addWidget(m_ceilingsNote);
  layout->addWidget(splitter, 1);

  connect(engine, &EngineController::tokenTimesReady, m_model, &MetricsModel::appendTokenTimes);
  connect(engine, &EngineController::requestMeasured, m_model, &MetricsModel::addRequest);
  connect(m_model, &MetricsModel::seriesChanged, this, &MetricsPanel::updateCharts);
  connect(m_model, &QAbstractItemModel::rowsInserted, this, [this] {
    updateSummary();
    m_table->scrollToBottom();
  });
  connect(m_model, &QAbstractItemModel::dataChanged, this, &MetricsPanel::updateSummary);
  connect(m_model, &QAbstractItemModel::modelReset, this, &MetricsPanel::updateSummary);
  auto applyCeilings = [this] {
    m_model->setCeilings(m_ceilings->ceilings());
    const iwb::Ceilings c = m_ceilings->ceilings();
    const auto& probe = m_ceilings->probe();
    const QString bandwidthKind = probe && probe->has_read_bandwidth() ? tr("read-only") : tr("copy");
    QString note = tr("MBU and MFU need this machine's ceilings: measure them in the Roofline tab or run `iwb probe`.");
    if (c.bandwidth_bytes_per_s > 0) {
      note = tr("MBU and MFU against the measured %1 (%2) and %3")
                 .arg(formatBytesPerSecond(c.bandwidth_bytes_per_s), bandwidthKind, formatFlopsPerSecond(c.peak_flops));
      // Quantized weights run as int8 dot products on a CPU: their own, higher roof.
      note +=
          c.peak_int8_ops > 0
              ? tr("; quantized weights against %1 GOP/s of int8 dot products.").arg(c.peak_int8_ops / 1e9, 0, 'f', 0)
              : tr(".");
    }
    m_ceilingsText = note;
    m_ceilingsNote->setText(note);
    updateSummary();  // a new roof may explain or end a reply's MBU above 100%
  };
  connect(m_ceilings, &MachineCeilings::probeChanged, this, applyCeilings);
  applyCeilings();
  updateCharts();
  updateSummary();
}

QWidget* MetricsPanel::createBenchPage() {
  auto* page = new QWidget;
  m_benchMessage = new QLabel;
  m_benchMessage->setTextFormat(Qt::PlainText);
  m_benchMessage->setWordWrap(true);
  auto* reload = new QPushButton(tr("Reload"));
  connect(reload, &QPushButton::clicked, this, &MetricsPanel::reloadBenchResults);
  auto* top = new QHBoxLayout;
  top->addWidget(m_benchMessage, 1);
  top->addWidget(reload);
  auto* layout = new QVBoxLayout(page);
  layout->setContentsMargins(0, 4, 0, 0);
  layout->addLayout(top);
  layout->addWidget(makeTable(m_benchModel, QStringLiteral("benchTable")), 1);
  return page;
}

void MetricsPanel::reloadBenchResults() {
  if (!m_benchModel->reload(m_ceilings->storePath())) {
    m_benchMessage->setText(tr("The benchmark runs cannot be read: %1").arg(m_benchModel->errorMessage()));
  } else if (m_benchModel->rowCount() == 0) {
    m_benchMessage->setText(tr("No benchmark runs yet. Run `iwb bench -m MODEL` to measure prompt processing and "
                               "generation speed; the runs appear here."));
  } else {
    m_benchMessage->setText(tr("%n run(s) from %1, newest first.", nullptr, m_benchModel->rowCount())
                                .arg(m_ceilings->storePath()));
  }
}

void MetricsPanel::updateCharts() {
  setSeries(m_rateChart->graph(0), m_model->tokenRateSeries());
  setSeries(m_latencyChart->graph(0), m_model->interTokenSeries());
  setSeries(m_latencyChart->graph(1), m_model->ttftSeries());
  fitAxes(m_rateChart, {&m_model->tokenRateSeries()});
  fitAxes(m_latencyChart, {&m_model->interTokenSeries(), &m_model->ttftSeries()});
  const QVector<QPointF> mbu = m_model->decodeMbuSeries();
  const QVector<QPointF> mfu = m_model->prefillMfuSeries();
  setSeries(m_utilisationChart->graph(0), mbu);
  setSeries(m_utilisationChart->graph(1), mfu);
  fitAxes(m_utilisationChart, {&mbu, &mfu});
  for (QCustomPlot* chart : {m_rateChart, m_latencyChart, m_utilisationChart}) {
    chart->replot(QCustomPlot::rpQueuedReplot);
  }
}

QString MetricsPanel::summaryText() const { return m_summary->text(); }

void MetricsPanel::updateSummary() {
  const MetricsModel::Row* row = m_model->latest();
  if (!row) {
    m_summary->setText(tr("No requests yet: chat with a model and each reply's latency and throughput appear here."));
    m_ceilingsNote->setText(m_ceilingsText);
    return;
  }
  const iwb::RequestMetrics& m = row->metrics;
  QString text = tr("Request #%1: TTFT %2 ms").arg(row->measurement.requestId).arg(m.ttft_seconds * 1000.0, 0, 'f', 0);
  if (m.inter_token.count > 0) {
    text += tr(" · ITL p50 %1 / p90 %2 / p99 %3 ms")
                .arg(m.inter_token.p50 * 1000.0, 0, 'f', 1)
                .arg(m.inter_token.p90 * 1000.0, 0, 'f', 1)
                .arg(m.inter_token.p99 * 1000.0, 0, 'f', 1);
  }
  text += tr(" · prompt %1 tok/s · generation %2 tok/s · MBU %3 · MFU %4")
              .arg(m.prompt_tokens_per_s, 0, 'f', 1)
              .arg(m.generation_tokens_per_s, 0, 'f', 1)
              .arg(formatFraction(m.decode_mbu), formatFraction(m.prefill_mfu));
  // Said only when it happened: on a quiet machine the figures above need no excuse.
  if (row->measurement.numContendedRegions > 0) {
    text += tr(" · busy CPU %1").arg(formatContendedShare(row->measurement));
  }
  m_summary->setText(text);
  // An MBU over 100% from weights too large for the caches: the CPU's probe caught a slow moment.
  const std::optional<double> above =
      m_ceilings->bandwidthAboveRoof(m.decode_bytes_per_token, m.generation_tokens_per_s);
  m_ceilingsNote->setText(above ? m_ceilingsText + QLatin1Char(' ') +
                                      tr("Request #%1 read its weights at %2, above that: the probe ran at a slower "
                                         "moment (a shared host, a busy core). Measure again in the Roofline tab.")
                                          .arg(row->measurement.requestId)
                                          .arg(formatBytesPerSecond(*above))
                                : m_ceilingsText);
}

}  // namespace iwb::ui
