// MemoryPanel: device and context choice, the fit banner, stacked bars and the table.
#include "memory/memory_panel.h"

#include "memory/memory_model.h"
#include "settings/device_choice.h"
#include "worker/engine_controller.h"
#include "worker/generation_values.h"

#include <qcustomplot.h>

#include <QComboBox>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QPushButton>
#include <QSpinBox>
#include <QSplitter>
#include <QTableView>
#include <QVBoxLayout>

#include <algorithm>

namespace iwb::ui {
namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
constexpr qint64 kDefaultContext = 4096;  // the engine's default when the model allows it
constexpr int kRecurrentLayer = 5;        // the chart's recurrent state bars (plottable index)

QCPBars* addLayer(QCustomPlot* chart, const QString& name, const QColor& color) {
  auto* bars = new QCPBars(chart->xAxis, chart->yAxis);
  bars->setName(name);
  bars->setPen(QPen(color.darker(130)));
  bars->setBrush(color);
  bars->setWidth(0.55);
  return bars;
}

}  // namespace

MemoryPanel::MemoryPanel(EngineController* engine, QWidget* parent)
    : QWidget(parent),
      m_engine(engine),
      m_model(new MemoryModel(this)),
      m_deviceBox(new QComboBox),
      m_contextBox(new QSpinBox),
      m_fitLabel(new QLabel),
      m_chart(new QCustomPlot),
      m_table(new QTableView) {
  setObjectName(QStringLiteral("memoryPanel"));
  m_deviceBox->setObjectName(QStringLiteral("memoryDeviceBox"));
  m_contextBox->setObjectName(QStringLiteral("memoryContextBox"));
  m_contextBox->setRange(1, 1 << 20);
  m_contextBox->setValue(static_cast<int>(kDefaultContext));
  m_contextBox->setGroupSeparatorShown(true);
  m_contextBox->setToolTip(tr("Context the KV cache and scratch are estimated for"));
  m_fitLabel->setObjectName(QStringLiteral("memoryFitLabel"));
  m_fitLabel->setWordWrap(true);
  m_fitLabel->setTextFormat(Qt::PlainText);
  m_fitLabel->setMargin(6);
  m_fitLabel->setAutoFillBackground(true);

  auto* refreshButton = new QPushButton(tr("Refresh"));
  refreshButton->setToolTip(tr("Measure again: free memory of the devices, and the application's resident memory"));
  connect(refreshButton, &QPushButton::clicked, this, &MemoryPanel::refresh);
  auto* top = new QHBoxLayout;
  top->addWidget(new QLabel(tr("Device")));
  top->addWidget(m_deviceBox);
  top->addSpacing(12);
  top->addWidget(new QLabel(tr("Context")));
  top->addWidget(m_contextBox);
  top->addStretch(1);
  top->addWidget(refreshButton);

  m_chart->setObjectName(QStringLiteral("memoryChart"));
  m_chart->setMinimumHeight(220);
  m_chart->yAxis->setLabel(tr("GiB"));
  QSharedPointer<QCPAxisTickerText> ticker(new QCPAxisTickerText);
  ticker->addTick(1, tr("Estimate"));
  ticker->addTick(2, tr("Measured"));
  ticker->addTick(3, tr("Available"));
  m_chart->xAxis->setTicker(ticker);
  m_chart->xAxis->setRange(0.4, 3.6);
  m_chart->legend->setVisible(true);
  QFont legendFont = m_chart->font();
  legendFont.setPointSize(8);
  m_chart->legend->setFont(legendFont);
  m_chart->axisRect()->insetLayout()->setInsetAlignment(0, Qt::AlignTop | Qt::AlignLeft);
  // Stacked from the bottom: weights, then what the KV cache and scratch take.
  QCPBars* weights = addLayer(m_chart, tr("weights"), QColor(90, 140, 200));
  QCPBars* kv = addLayer(m_chart, tr("KV cache"), QColor(230, 150, 60));
  QCPBars* scratch = addLayer(m_chart, tr("scratch"), QColor(150, 200, 120));
  QCPBars* heap = addLayer(m_chart, tr("KV cache + scratch + heap (measured)"), QColor(200, 110, 90));
  addLayer(m_chart, tr("available"), QColor(200, 200, 200));  // on its own bar
  // Added last (kRecurrentLayer) so that the layers above keep their indices; stacked on the KV
  // cache, and in the legend only for a model with recurrent layers (updateChart).
  QCPBars* recurrent = addLayer(m_chart, tr("recurrent state"), QColor(170, 130, 200));
  kv->moveAbove(weights);
  recurrent->moveAbove(kv);
  scratch->moveAbove(recurrent);
  heap->moveAbove(scratch);

  m_table->setObjectName(QStringLiteral("memoryTable"));
  m_table->setModel(m_model);
  m_table->verticalHeader()->hide();
  m_table->setAlternatingRowColors(true);
  m_table->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
  m_table->horizontalHeader()->setStretchLastSection(true);

  auto* splitter = new QSplitter(Qt::Vertical);
  splitter->addWidget(m_chart);
  splitter->addWidget(m_table);
  splitter->setStretchFactor(0, 1);
  splitter->setStretchFactor(1, 1);
  auto* layout = new QVBoxLayout(this);
  layout->addLayout(top);
  layout->addWidget(m_fitLabel);
  layout->addWidget(splitter, 1);

  connect(m_deviceBox, &QComboBox::currentIndexChanged, this, &MemoryPanel::selectDevice);
  connect(m_contextBox, &QSpinBox::valueChanged, this, [this](int value) { m_model->setContext(value); });
  connect(m_model, &MemoryModel::changed, this, &MemoryPanel::updateView);
  connect(m_engine, &EngineController::memorySampled, m_model, &MemoryModel::setSample);
  connect(m_engine, &EngineController::modelLoaded, this, [this](const LoadedModel& model) {
    // The engine allocated for its context and on its device, with the options it was loaded
    // with: compare against those, and show the free memory now.
    setEngineOptions(m_engine->lastLoadOptions());
    setContext(model.contextLength);
    refresh();
    if (const int index = m_deviceBox->findData(model.deviceId); index >= 0) m_deviceBox->setCurrentIndex(index);
  });
  connect(m_engine, &EngineController::modelUnloaded, this, &MemoryPanel::refresh);
  m_model->setContext(kDefaultContext);
  refresh();
}

QString MemoryPanel::fitText() const { return m_fitLabel->text(); }

void MemoryPanel::setModelSummary(const iwb::ModelSummary& summary) {
  // Before the engine loads it: the estimate at the context the engine would choose.
  const qint64 trained = summary.hparams.context_length;
  if (m_settingsContext > 0) {
    setContext(m_settingsContext);
  } else if (trained > 0) {
    setContext(std::min(trained, kDefaultContext));
  }
  m_model->setModelSummary(summary);
}

void MemoryPanel::setEngineOptions(const EngineLoadOptions& options) {
  const auto gpus = iwb::list_cuda_devices();
  m_model->setEngineOptions(toEngineOptions(options, gpus && !gpus->empty()));
  m_settingsContext = options.contextLength;
  if (m_settingsContext > 0) setContext(m_settingsContext);
}

void MemoryPanel::setContext(qint64 context) {
  if (context <= 0) return;
  m_contextBox->setValue(static_cast<int>(std::min<qint64>(context, m_contextBox->maximum())));
}

void MemoryPanel::refresh() {
  const QString selected = m_deviceBox->currentData().toString();
  m_devices.clear();
  m_devices.push_back(iwb::describe_cpu_device());
  if (auto gpus = iwb::list_cuda_devices()) {
    for (const auto& gpu : *gpus) m_devices.push_back(gpu);
  }
  {
    const QSignalBlocker blocker(m_deviceBox);
    m_deviceBox->clear();
    for (const auto& d : m_devices) {
      m_deviceBox->addItem(QStringLiteral("%1 — %2").arg(QString::fromStdString(d.id), QString::fromStdString(d.name)),
                           QString::fromStdString(d.id));
    }
    const int index = m_deviceBox->findData(selected);
    m_deviceBox->setCurrentIndex(index >= 0 ? index : 0);
  }
  selectDevice(m_deviceBox->currentIndex());
  m_engine->sampleMemory();
}

void MemoryPanel::selectDevice(int index) {
  if (index < 0 || index >= static_cast<int>(m_devices.size())) return;
  m_model->setDevice(m_devices[static_cast<size_t>(index)]);
}

void MemoryPanel::updateView() {
  m_fitLabel->setText(m_model->fitText());
  QPalette palette = m_fitLabel->palette();
  QColor background = palette.color(QPalette::Window);
  switch (m_model->fit()) {
    case MemoryFit::Fits: background = QColor(220, 240, 220); break;
    case MemoryFit::Tight: background = QColor(250, 235, 200); break;
    case MemoryFit::DoesNotFit: background = QColor(250, 215, 215); break;
    case MemoryFit::Unknown: break;
  }
  palette.setColor(QPalette::Window, background);
  palette.setColor(QPalette::WindowText, QColor(30, 30, 30));
  m_fitLabel->setPalette(palette);
  updateChart();
}

void MemoryPanel::updateChart() {
  auto layer = [this](int i) { return qobject_cast<QCPBars*>(m_chart->plottable(i)); };
  for (int i = 0; i < m_chart->plottableCount(); ++i) layer(i)->data()->clear();
  double top = 0;
  bool hasRecurrentState = false;
  if (const auto e = m_model->estimate()) {
    layer(0)->addData(1, double(e->weight_bytes) / kGiB);
    layer(1)->addData(1, double(e->kv_cache_bytes) / kGiB);
    layer(2)->addData(1, double(e->scratch_bytes) / kGiB);
    layer(kRecurrentLayer)->addData(1, double(e->recurrent_state_bytes) / kGiB);
    hasRecurrentState = e->recurrent_state_bytes > 0;
    top = double(e->total()) / kGiB;
  }
  // The legend in stacking order, with the recurrent state only where the model has one.
  m_chart->legend->clearItems();
  for (const int i : {0, 1, kRecurrentLayer, 2, 3, 4}) {
    if (i != kRecurrentLayer || hasRecurrentState) layer(i)->addToLegend();
  }
  if (m_model->isLoaded() && m_model->sample()->isOnCuda()) {
    // On a GPU the measured bar is the engine's device allocations, layer by layer.
    const MemorySample& s = *m_model->sample();
    layer(0)->addData(2, double(s.deviceWeightsBytes) / kGiB);
    layer(1)->addData(2, double(s.deviceKvPoolBytes) / kGiB);
    layer(2)->addData(2, double(s.deviceScratchBytes + s.deviceWorkspaceBytes) / kGiB);
    top = std::max(top, double(s.deviceEngineBytes()) / kGiB);
  } else if (m_model->isLoaded()) {
    const MemorySample& s = *m_model->sample();
    // Weights: mapped file pages, or the copy read into anonymous memory at load.
    const double file = std::max<qint64>(0, s.fileGrowthBytes() + s.weightsReadBytes) / kGiB;
    const double anon = std::max<qint64>(0, s.anonGrowthBesideWeightsBytes()) / kGiB;
    layer(0)->addData(2, file);
    layer(3)->addData(2, anon);
    top = std::max(top, file + anon);
  }
  const double available = double(m_model->device().free_memory_bytes) / kGiB;
  if (m_availableLabel) {
    m_chart->removeItem(m_availableLabel);
    m_availableLabel = nullptr;
  }
  if (available > 0) {
    layer(4)->addData(3, available);
    // The available bar can dwarf a small model; cap the axis so the model's bars stay readable
    // (the bar then runs off the top, and the table has the number).
    top = std::max(top, std::min(available, std::max(top * 4, 0.5)));
  }
  m_chart->yAxis->setRange(0, top > 0 ? top * 1.15 : 1.0);
  if (available > 0) {
    // The bar may run off the top: its figure is written on it.
    m_availableLabel = new QCPItemText(m_chart);
    m_availableLabel->position->setType(QCPItemPosition::ptPlotCoords);
    m_availableLabel->position->setCoords(3, std::min(available, top * 1.15));
    m_availableLabel->setPositionAlignment(Qt::AlignHCenter | Qt::AlignTop);
    m_availableLabel->setPadding(QMargins(0, 6, 0, 0));
    m_availableLabel->setText(tr("%1 GiB available").arg(available, 0, 'f', 1));
  }
  m_chart->replot(QCustomPlot::rpQueuedReplot);
}

}  // namespace iwb::ui
