// RooflinePanel: controls around the roofline chart, wiring to the engine and the machine's
// ceilings, export, and the analytic (cost model) mode.
#include "roofline/roofline_panel.h"

#include "iwb/engine/runtime/engine.h"
#include "roofline/machine_ceilings.h"
#include "roofline/roofline_model.h"
#include "roofline/roofline_plot.h"
#include "worker/engine_controller.h"

#include <QAction>
#include <QCheckBox>
#include <QComboBox>
#include <QFile>
#include <QFileDialog>
#include <QFileInfo>
#include <QFormLayout>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QMenu>
#include <QPushButton>
#include <QSaveFile>
#include <QSpinBox>
#include <QSplitter>
#include <QTableView>
#include <QVBoxLayout>

namespace iwb::ui {
namespace {

constexpr int kExportWidth = 1200;
constexpr int kExportHeight = 800;

// Weight types a preset can be predicted in (the ones the engine runs).
const char* const kPresetTypes[] = {"F16", "BF16", "F32", "Q8_0", "Q6_K", "Q5_K", "Q4_K", "Q4_0"};

}  // namespace

RooflinePanel::RooflinePanel(EngineController* engine, MachineCeilings* ceilings, QWidget* parent)
    : QWidget(parent),
      m_engine(engine),
      m_ceilings(ceilings),
      m_model(new RooflineModel(this)),
      m_plot(new RooflinePlot(m_model)),
      m_table(new QTableView),
      m_profilingAction(new QAction(tr("&Profile Kernels"), this)) {
  setObjectName(QStringLiteral("rooflinePanel"));
  m_profilingAction->setCheckable(true);
  m_profilingAction->setChecked(m_engine->isProfiling());
  m_profilingAction->setStatusTip(tr("Record every kernel the engine runs, for the roofline (costs a little speed)"));

  m_table->setObjectName(QStringLiteral("rooflineTable"));
  m_table->setModel(m_model);
  m_table->verticalHeader()->hide();
  m_table->setAlternatingRowColors(true);
  m_table->setSelectionBehavior(QAbstractItemView::SelectRows);
  m_table->horizontalHeader()->setStretchLastSection(true);
  m_table->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
  m_table->horizontalHeader()->setSectionResizeMode(RooflineModel::ShapesColumn, QHeaderView::Stretch);

  auto* splitter = new QSplitter(Qt::Vertical);
  splitter->addWidget(m_plot);
  splitter->addWidget(m_table);
  splitter->setStretchFactor(0, 3);
  splitter->setStretchFactor(1, 1);

  auto* side = createAnalyticBox();
  auto* body = new QHBoxLayout;
  body->addWidget(splitter, 1);
  body->addWidget(side);

  auto* layout = new QVBoxLayout(this);
  layout->addWidget(createToolbar());
  layout->addLayout(body, 1);

  // The engine's switch and the panel's checkbox and menu action stay one state.
  connect(m_profilingAction, &QAction::toggled, m_engine, &EngineController::setProfiling);
  connect(m_profileBox, &QCheckBox::toggled, m_engine, &EngineController::setProfiling);
  connect(m_engine, &EngineController::profilingChanged, this, [this](bool isEnabled) {
    m_profilingAction->setChecked(isEnabled);
    m_profileBox->setChecked(isEnabled);
    updateStatusLabel();
  });
  connect(m_engine, &EngineController::profileSnapshotReady, this, &RooflinePanel::handleSnapshot);
  connect(m_engine, &EngineController::modelLoaded, this, [this](const LoadedModel& model) {
    // Another model's points would mislead: the engine starts a new aggregate, and so does the chart.
    m_model->clearMeasured();
    updateStatusLabel();
    setOpenedModel(model.path, model.name);
  });

  connect(m_ceilings, &MachineCeilings::probeChanged, this, [this] {
    m_model->setProbe(m_ceilings->probe());
    updateRoofLabel();
    updateStatusLabel();
  });
  connect(m_ceilings, &MachineCeilings::measuringChanged, this, &RooflinePanel::updateRoofLabel);
  connect(m_ceilings, &MachineCeilings::measureFailed, this, &RooflinePanel::updateRoofLabel);
  m_model->setProbe(m_ceilings->probe());
  updateRoofLabel();
  updateStatusLabel();
  updateAnalyticControls();
}

QWidget* RooflinePanel::createToolbar() {
  auto* bar = new QWidget;
  auto* row = new QHBoxLayout(bar);
  row->setContentsMargins(0, 0, 0, 0);

  m_profileBox = new QCheckBox(tr("Profile kernels"));
  m_profileBox->setObjectName(QStringLiteral("profileKernelsBox"));
  m_profileBox->setChecked(m_engine->isProfiling());
  m_profileBox->setToolTip(m_profilingAction->statusTip());

  m_sourceBox = new QComboBox;
  m_sourceBox->setObjectName(QStringLiteral("rooflineSourceBox"));
  m_sourceBox->addItem(tr("Last steps"), static_cast<int>(RooflineSource::LastSteps));
  m_sourceBox->addItem(tr("Running aggregate"), static_cast<int>(RooflineSource::Running));
  m_sourceBox->setToolTip(tr("Last steps: the newest prefill and decode steps. Running aggregate: every profiled "
                             "step since the last reset."));
  connect(m_sourceBox, &QComboBox::currentIndexChanged, this, [this] {
    m_model->setSource(static_cast<RooflineSource>(m_sourceBox->currentData().toInt()));
  });

  auto* resetButton = new QPushButton(tr("Reset"));
  resetButton->setToolTip(tr("Forget the points measured so far"));
  connect(resetButton, &QPushButton::clicked, this, [this] {
    m_engine->resetProfile();
    m_model->clearMeasured();
    updateStatusLabel();
  });

  m_datasheetBox = new QCheckBox(tr("GPU datasheet roofs"));
  m_datasheetBox->setObjectName(QStringLiteral("datasheetRoofsBox"));
  m_datasheetBox->setToolTip(tr("Dashed roofs of an H100 SXM and an H200, from their datasheets, for comparison"));
  connect(m_datasheetBox, &QCheckBox::toggled, m_plot, &RooflinePlot::setShowsDatasheetRoofs);

  m_exportButton = new QPushButton(tr("Export"));
  auto* exportMenu = new QMenu(m_exportButton);
  exportMenu->addAction(tr("Chart as PNG…"), this, [this] {
    const QString path = QFileDialog::getSaveFileName(this, tr("Export Roofline"), QStringLiteral("roofline.png"),
                                                      tr("PNG images (*.png)"));
    if (!path.isEmpty()) reportExport(exportPng(path), path);
  });
  exportMenu->addAction(tr("Chart as SVG…"), this, [this] {
    const QString path = QFileDialog::getSaveFileName(this, tr("Export Roofline"), QStringLiteral("roofline.svg"),
                                                      tr("SVG images (*.svg)"));
    if (!path.isEmpty()) reportExport(exportSvg(path), path);
  });
  exportMenu->addAction(tr("Points as CSV…"), this, [this] {
    const QString path = QFileDialog::getSaveFileName(this, tr("Export Roofline Points"),
                                                      QStringLiteral("roofline.csv"), tr("CSV files (*.csv)"));
    if (!path.isEmpty()) reportExport(exportCsv(path), path);
  });
  m_exportButton->setMenu(exportMenu);

  m_roofLabel = new QLabel;
  m_roofLabel->setObjectName(QStringLiteral("roofLabel"));
  m_roofLabel->setTextFormat(Qt::PlainText);
  // Two bandwidths, a peak and a ridge make a long line: it wraps rather than widening the window.
  m_roofLabel->setWordWrap(true);
  m_measureButton = new QPushButton(tr("Measure now"));
  m_measureButton->setObjectName(QStringLiteral("measureButton"));
  m_measureButton->setToolTip(tr("Measure this machine's memory bandwidth and peak arithmetic (takes a few seconds; "
                                 "same as `iwb probe`)"));
  connect(m_measureButton, &QPushButton::clicked, this, [this] { m_ceilings->measure(); });
  m_statusLabel = new QLabel;
  m_statusLabel->setObjectName(QStringLiteral("rooflineStatus"));
  m_statusLabel->setTextFormat(Qt::PlainText);
  m_statusLabel->setWordWrap(true);  // a note on the probe makes it long

  row->addWidget(m_profileBox);
  row->addWidget(m_sourceBox);
  row->addWidget(resetButton);
  row->addWidget(m_datasheetBox);
  row->addWidget(m_exportButton);
  row->addSpacing(12);
  row->addWidget(m_roofLabel, 1);
  row->addWidget(m_measureButton);
  auto* column = new QWidget;
  auto* columnLayout = new QVBoxLayout(column);
  columnLayout->setContentsMargins(0, 0, 0, 0);
  columnLayout->addWidget(bar);
  columnLayout->addWidget(m_statusLabel);
  return column;
}

QWidget* RooflinePanel::createAnalyticBox() {
  auto* box = new QGroupBox(tr("Analytic prediction"));
  box->setObjectName(QStringLiteral("analyticBox"));
  box->setToolTip(tr("Where each op of a model would sit under the measured roof, from the cost model, without "
                     "running it (hollow markers)"));
  m_analyticModelBox = new QComboBox;
  m_analyticModelBox->setObjectName(QStringLiteral("analyticModelBox"));
  for (const std::string& name : iwb::model_shape_preset_names()) {
    m_analyticModelBox->addItem(QString::fromStdString(name), QString::fromStdString(name));
  }
  m_weightTypeBox = new QComboBox;
  m_weightTypeBox->setObjectName(QStringLiteral("analyticWeightTypeBox"));
  m_weightTypeBox->addItem(tr("as stored"), QString());  // the opened file's own types
  for (const char* type : kPresetTypes) m_weightTypeBox->addItem(QString::fromLatin1(type), QString::fromLatin1(type));
  connect(m_analyticModelBox, &QComboBox::currentIndexChanged, this, &RooflinePanel::updateAnalyticControls);

  auto makeSpin = [](int min, int max, int value, const QString& toolTip) {
    auto* spin = new QSpinBox;
    spin->setRange(min, max);
    spin->setValue(value);
    spin->setToolTip(toolTip);
    spin->setGroupSeparatorShown(true);
    return spin;
  };
  m_prefillBox = makeSpin(1, 32768, 128, tr("Prompt tokens processed by one prefill step, from an empty cache"));
  m_decodeBatchBox = makeSpin(1, 1024, 1, tr("Tokens one decode step computes (the batch size)"));
  m_contextBox = makeSpin(0, 1 << 20, 512, tr("Positions already in the KV cache when the decode step runs"));

  auto* predictButton = new QPushButton(tr("Predict"));
  predictButton->setObjectName(QStringLiteral("predictButton"));
  connect(predictButton, &QPushButton::clicked, this, &RooflinePanel::predict);
  auto* clearButton = new QPushButton(tr("Clear"));
  connect(clearButton, &QPushButton::clicked, this, [this] {
    m_model->clearPrediction();
    m_analyticMessage->clear();
  });
  m_analyticMessage = new QLabel;
  m_analyticMessage->setObjectName(QStringLiteral("analyticMessage"));
  m_analyticMessage->setWordWrap(true);
  m_analyticMessage->setTextFormat(Qt::PlainText);

  auto* form = new QFormLayout(box);
  form->addRow(tr("Model"), m_analyticModelBox);
  form->addRow(tr("Weights"), m_weightTypeBox);
  form->addRow(tr("Prefill tokens"), m_prefillBox);
  form->addRow(tr("Decode batch"), m_decodeBatchBox);
  form->addRow(tr("Context"), m_contextBox);
  auto* buttons = new QHBoxLayout;
  buttons->addWidget(predictButton);
  buttons->addWidget(clearButton);
  form->addRow(buttons);
  form->addRow(m_analyticMessage);
  box->setMaximumWidth(280);
  return box;
}

void RooflinePanel::setOpenedModel(const QString& path, const QString& name) {
  if (path == m_openedPath) return;
  m_openedPath = path;
  m_openedName = name.isEmpty() ? QFileInfo(path).completeBaseName() : name;
  m_openedShape.reset();
  m_openedShapeError.clear();
  if (!path.isEmpty()) {
    // Reads the header and the norm vectors only: quick even for a large file.
    auto shape = iwb::model_shape_from_gguf(path.toStdString());
    if (shape) m_openedShape = std::move(*shape);
    else m_openedShapeError = QString::fromStdString(shape.error_message());
  }
  // The opened model is the first choice, marked by an empty preset name.
  const int existing = m_analyticModelBox->findData(QString());
  if (existing >= 0) m_analyticModelBox->removeItem(existing);
  if (!path.isEmpty()) {
    m_analyticModelBox->insertItem(0, tr("Opened: %1").arg(m_openedName), QString());
    m_analyticModelBox->setCurrentIndex(0);
  }
  updateAnalyticControls();
}

void RooflinePanel::updateAnalyticControls() {
  // An opened file has its own weight types per layer; a preset takes one from the user.
  const bool isPreset = !m_analyticModelBox->currentData().toString().isEmpty();
  if (!isPreset) m_weightTypeBox->setCurrentIndex(0);
  else if (m_weightTypeBox->currentIndex() == 0) m_weightTypeBox->setCurrentIndex(1);
  m_weightTypeBox->setEnabled(isPreset);
}

bool RooflinePanel::selectAnalyticModel(const QString& presetName) {
  const int index = m_analyticModelBox->findData(presetName);
  if (index < 0) return false;
  m_analyticModelBox->setCurrentIndex(index);
  return true;
}

void RooflinePanel::setAnalyticScenario(int prefillTokens, int decodeBatch, int context) {
  m_prefillBox->setValue(prefillTokens);
  m_decodeBatchBox->setValue(decodeBatch);
  m_contextBox->setValue(context);
}

bool RooflinePanel::predict() {
  const QString preset = m_analyticModelBox->currentData().toString();
  iwb::ModelShape shape;
  if (preset.isEmpty()) {
    if (!m_openedShape) {
      m_analyticMessage->setText(m_openedShapeError.isEmpty()
                                     ? tr("Open a model, or pick a preset.")
                                     : tr("The opened model cannot be described: %1").arg(m_openedShapeError));
      return false;
    }
    shape = *m_openedShape;
  } else {
    const auto type = iwb::ggml_type_from_name(m_weightTypeBox->currentData().toString().toStdString());
    auto made = iwb::model_shape_preset(preset.toStdString(), type.value_or(iwb::GgmlType::F16));
    if (!made) {
      m_analyticMessage->setText(QString::fromStdString(made.error_message()));
      return false;
    }
    shape = std::move(*made);
  }
  iwb::StepScenario prefill;
  prefill.phase = iwb::Phase::Prefill;
  prefill.num_tokens = m_prefillBox->value();
  prefill.num_cached_tokens = 0;
  prefill.max_batch_tokens = iwb::EngineOptions{}.max_batch_tokens;  // as the engine runs it
  iwb::StepScenario decode;
  decode.phase = iwb::Phase::Decode;
  decode.num_tokens = m_decodeBatchBox->value();
  decode.num_cached_tokens = m_contextBox->value();
  auto prefillRecords = iwb::predict_step(shape, prefill);
  auto decodeRecords = iwb::predict_step(shape, decode);
  if (!prefillRecords || !decodeRecords) {
    m_analyticMessage->setText(QString::fromStdString(!prefillRecords ? prefillRecords.error_message()
                                                                      : decodeRecords.error_message()));
    return false;
  }
  std::vector<iwb::KernelRecord> records = std::move(*prefillRecords);
  records.insert(records.end(), decodeRecords->begin(), decodeRecords->end());
  const QString label = tr("%1 · prefill %2 tokens · decode %3 at context %4")
                            .arg(QString::fromStdString(shape.name))
                            .arg(prefill.num_tokens)
                            .arg(decode.num_tokens)
                            .arg(decode.num_cached_tokens);
  m_model->setPrediction(records, label);
  m_analyticMessage->setText(m_model->measuredRoof()
                                 ? label
                                 : tr("%1\nThe points sit on the roof: measure this machine to place them.").arg(label));
  return true;
}

void RooflinePanel::handleSnapshot(const iwb::ProfileSnapshot& snapshot) {
  // Kernels that ran on a GPU go under that GPU's roofs (its newest probe), not the CPU's.
  m_ceilings->setDeviceId(profiledDeviceId(snapshot));
  m_model->setSnapshot(snapshot);
  updateStatusLabel();
}

void RooflinePanel::updateRoofLabel() {
  const auto& probe = m_ceilings->probe();
  if (m_ceilings->isMeasuring()) {
    m_roofLabel->setText(tr("Measuring this machine's bandwidth and peak arithmetic…"));
  } else if (probe) {
    // Both bandwidths: decode reads only (read-only roof, what MBU divides by); a copy also writes.
    const QString bandwidths =
        probe->has_read_bandwidth()
            ? tr("read-only %1 (decode), copy %2;")
                  .arg(formatBytesPerSecond(probe->read_bytes_per_s), formatBytesPerSecond(probe->stream_bytes_per_s()))
            : tr("copy %1 (no read-only figure: measure again);").arg(formatBytesPerSecond(probe->stream_bytes_per_s()));
    m_roofLabel->setText(tr("Roofs: %1 — %2 %3 (%4), ridge %5 FLOP/byte, measured %6")
                             .arg(QString::fromStdString(probe->device_name.empty() ? probe->device_id
                                                                                     : probe->device_name))
                             .arg(bandwidths)
                             .arg(formatFlopsPerSecond(probe->peak_flops))
                             .arg(QString::fromStdString(probe->peak_flops_kind))
                             .arg(probe->ridge_point(), 0, 'g', 3)
                             .arg(QString::fromStdString(probe->date).left(10)));
  } else {
    const QString device = m_ceilings->deviceId();
    m_roofLabel->setText(!m_ceilings->errorMessage().isEmpty()
                             ? tr("No roofs: %1").arg(m_ceilings->errorMessage())
                         : device == QLatin1String("cpu")
                             ? tr("This machine has not been measured yet: no roofs to draw.")
                             : tr("%1 has not been measured yet (iwb probe, or Measure now): no roofs to draw.")
                                   .arg(device));
  }
  m_measureButton->setEnabled(!m_ceilings->isMeasuring());
  m_measureButton->setText(probe ? tr("Measure again") : tr("Measure now"));
}

void RooflinePanel::updateStatusLabel() {
  if (m_model->hasMeasured()) {
    QString text =
        tr("%n profiled step(s) since the last reset.", nullptr, static_cast<int>(m_model->numProfiledSteps()));
    // A probe taken while the machine was slower (a shared host's neighbours, a busy core) puts
    // the roof under what decode then reached: points above it, MBU over 100%.
    std::optional<double> above;
    if (const std::optional<DecodeWeightReads> reads = m_model->newestDecodeWeightReads()) {
      above = m_ceilings->bandwidthAboveRoof(reads->bytes, 1.0 / reads->seconds);
    }
    if (above) {
      text += QLatin1Char(' ') +
              tr("Decode read its weights at %1, above the %2 roof: the probe ran at a slower moment than this run "
                 "(a shared host, a busy core). Measure again.")
                  .arg(formatBytesPerSecond(*above), formatBytesPerSecond(m_model->measuredRoof()->bandwidthBytesPerS));
    }
    m_statusLabel->setText(text);
    m_statusLabel->setToolTip(above ? tr("More bytes a step than this CPU's caches hold, so they came from memory, "
                                         "faster than the probe measured it.")
                                    : QString());
  } else if (m_engine->isProfiling()) {
    m_statusLabel->setText(tr("Profiling is on: the points appear while the model generates (Chat tab)."));
  } else {
    m_statusLabel->setText(tr("Turn on \"Profile kernels\", then chat: each kernel kind becomes a point."));
  }
}

void RooflinePanel::reportExport(bool isWritten, const QString& path) {
  m_statusLabel->setText(isWritten ? tr("Saved %1").arg(QFileInfo(path).fileName())
                                   : tr("Could not write %1").arg(path));
}

bool RooflinePanel::exportPng(const QString& path) { return m_plot->exportPng(path, kExportWidth, kExportHeight); }

bool RooflinePanel::exportSvg(const QString& path) { return m_plot->exportSvg(path, kExportWidth, kExportHeight); }

bool RooflinePanel::exportCsv(const QString& path) {
  QSaveFile file(path);
  if (!file.open(QIODevice::WriteOnly | QIODevice::Text)) return false;
  file.write(m_model->toCsv().toUtf8());
  return file.commit();
}

}  // namespace iwb::ui
