// QuantLabPanel: the form, where the queue runs, the runs table, charts and comparison.
#include "quantlab/quant_lab_panel.h"

#include "worker/engine_controller.h"
#include "iwb/engine/synth/quant_mix.h"
#include "quantlab/quant_charts.h"
#include "quantlab/quant_compare_view.h"
#include "quantlab/quant_runs_model.h"
#include "store/results_store_access.h"

#include <QCheckBox>
#include <QFile>
#include <QFileDialog>
#include <QFileInfo>
#include <QFormLayout>
#include <QGridLayout>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QItemSelectionModel>
#include <QLabel>
#include <QLineEdit>
#include <QProgressBar>
#include <QPushButton>
#include <QSortFilterProxyModel>
#include <QSpinBox>
#include <QSplitter>
#include <QStandardPaths>
#include <QTabWidget>
#include <QTableView>
#include <QThread>
#include <QVBoxLayout>

namespace iwb::ui {
namespace {

// The types the form offers, in size order (the mixes beside their base type).
const char* const kTypes[] = {"Q8_0", "Q6_K", "Q5_K_M", "Q5_K", "Q5_1", "Q5_0", "Q4_K_M",
                              "Q4_K", "Q4_1", "Q4_0", "Q3_K", "Q2_K"};

}  // namespace

QuantLabPanel::QuantLabPanel(const QString& storePath, const QString& outputDir, QWidget* parent)
    : QuantLabPanel(nullptr, storePath, outputDir, parent) {}

QuantLabPanel::QuantLabPanel(EngineController* engine, const QString& storePath, const QString& outputDir,
                             QWidget* parent)
    : QWidget(parent),
      m_storePath(ResultsStoreAccess(storePath).path()),
      m_outputDir(outputDir.isEmpty()
                      ? QStandardPaths::writableLocation(QStandardPaths::AppLocalDataLocation) + QStringLiteral("/quantlab")
                      : outputDir),
      m_ownThread(engine != nullptr ? nullptr : new QThread(this)),
      m_computeThread(engine != nullptr ? engine->workerThread() : m_ownThread),
      m_engine(engine),
      m_worker(new QuantWorker),
      m_model(new QuantRunsModel(this)),
      m_proxy(new QSortFilterProxyModel(this)),
      m_table(new QTableView),
      m_charts(new QuantCharts),
      m_compare(new QuantCompareView) {
  setObjectName(QStringLiteral("quantLabPanel"));
  m_worker->moveToThread(m_computeThread);
  connect(m_computeThread, &QThread::finished, m_worker, &QObject::deleteLater);
  if (m_ownThread != nullptr) {
    m_ownThread->setObjectName(QStringLiteral("quant lab"));
    m_ownThread->start();
  }

  m_proxy->setSourceModel(m_model);
  m_proxy->setSortRole(QuantRunsModel::SortRole);
  m_table->setObjectName(QStringLiteral("quantRunsTable"));
  m_table->setModel(m_proxy);
  m_table->setSortingEnabled(true);
  m_table->setSelectionBehavior(QAbstractItemView::SelectRows);
  m_table->setSelectionMode(QAbstractItemView::ExtendedSelection);
  m_table->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
  m_table->verticalHeader()->setVisible(false);
  m_table->setAlternatingRowColors(true);

  auto* views = new QTabWidget;
  views->addTab(m_charts, tr("Charts"));
  views->addTab(m_compare, tr("Side by side"));
  auto* splitter = new QSplitter(Qt::Vertical);
  splitter->addWidget(m_table);
  splitter->addWidget(views);
  splitter->setStretchFactor(0, 2);
  splitter->setStretchFactor(1, 3);

  auto* layout = new QVBoxLayout(this);
  layout->addWidget(createForm());
  layout->addWidget(splitter, 1);

  connect(m_table->selectionModel(), &QItemSelectionModel::selectionChanged, this, &QuantLabPanel::onSelectionChanged);
  connectWorker();
  reload();
}

QuantLabPanel::~QuantLabPanel() {
  if (m_worker) m_worker->cancel();
  if (m_ownThread != nullptr) {
    m_ownThread->quit();
    m_ownThread->wait();  // the worker is deleted as the thread finishes
  } else if (m_worker) {
    // On the engine's thread: deleted there once the cancelled queue has returned.
    m_worker->deleteLater();
  }
}

void QuantLabPanel::connectWorker() {
  connect(m_worker, &QuantWorker::progressed, this, [this](const iwb::quant::LabProgress& p) {
    m_progress->setValue(static_cast<int>(p.fraction * 1000));
    m_stage->setText(QString::fromStdString(p.message));
  });
  connect(m_worker, &QuantWorker::runRecorded, this, &QuantLabPanel::reload);
  connect(m_worker, &QuantWorker::itemFinished, this, [this](const iwb::quant::LabItemOutcome& o) {
    if (o.status != iwb::quant::RunStatus::Failed) return;
    emit statusMessage(tr("%1 failed: %2").arg(QString::fromStdString(o.label), QString::fromStdString(o.error)));
  });
  connect(m_worker, &QuantWorker::queueFinished, this, [this](const iwb::quant::LabReport& report) {
    finishQueue(report.was_cancelled, QString::fromStdString(report.summary()));
  });
  connect(m_worker, &QuantWorker::queueFailed, this, [this](const QString& message) { finishQueue(false, message); });
}

void QuantLabPanel::finishQueue(bool wasCancelled, const QString& summary) {
  m_isRunning = false;
  m_run->setEnabled(true);
  m_cancel->setEnabled(false);
  m_stage->setText(summary);
  reload();
  emit statusMessage(summary);
  emit queueFinished(wasCancelled, summary);
}

QWidget* QuantLabPanel::createForm() {
  auto* form = new QWidget;
  auto* grid = new QGridLayout(form);
  grid->setContentsMargins(0, 0, 0, 0);
  m_source = new QLineEdit;
  m_source->setObjectName(QStringLiteral("sourceModel"));
  m_source->setPlaceholderText(tr("GGUF model to quantize (F32/F16/BF16; a quantized file is dequantized to F16 first)"));
  auto* browse = new QPushButton(tr("Browse…"));
  connect(browse, &QPushButton::clicked, this, [this] {
    const QString path = QFileDialog::getOpenFileName(this, tr("Source Model"), m_source->text(), tr("GGUF models (*.gguf)"));
    if (!path.isEmpty()) m_source->setText(path);
  });
  grid->addWidget(new QLabel(tr("Source:")), 0, 0);
  grid->addWidget(m_source, 0, 1, 1, 6);
  grid->addWidget(browse, 0, 7);

  auto* types = new QHBoxLayout;
  for (const char* t : kTypes) {
    auto* box = new QCheckBox(QString::fromLatin1(t));
    box->setChecked(QString::fromLatin1(t) == QLatin1String("Q4_K_M") || QString::fromLatin1(t) == QLatin1String("Q8_0"));
    m_typeBoxes[QString::fromLatin1(t)] = box;
    types->addWidget(box);
  }
  types->addStretch();
  grid->addWidget(new QLabel(tr("Types:")), 1, 0);
  grid->addLayout(types, 1, 1, 1, 7);

  m_imatrix = new QCheckBox(tr("also with an importance matrix"));
  m_kv8 = new QCheckBox(tr("also with the KV cache:"));
  m_kv8->setToolTip(tr("Each item run again with a quantized KV cache (keys/values as llama.cpp's -ctk/-ctv); "
                       "block types need head sizes that are multiples of 32"));
  m_kvType = new QComboBox;
  // Keys/values; one name: both alike. q8_0 first: the default, about half the KV memory.
  m_kvType->addItems({QStringLiteral("q8_0"), QStringLiteral("q8_0/q4_0"), QStringLiteral("fp8_e4m3"),
                      QStringLiteral("q5_1"), QStringLiteral("q5_0"), QStringLiteral("q4_1"), QStringLiteral("q4_0")});
  m_kvType->setToolTip(tr("KV cache type, keys/values"));
  m_context = new QSpinBox;
  m_context->setRange(16, 8192);
  m_context->setValue(512);
  m_chunks = new QSpinBox;
  m_chunks->setRange(0, 1000);
  m_chunks->setValue(4);
  m_chunks->setSpecialValueText(tr("all"));
  m_threads = new QSpinBox;
  m_threads->setRange(0, 256);
  m_threads->setSpecialValueText(tr("all cores"));
  m_evalText = new QLineEdit;
  m_evalText->setPlaceholderText(tr("built-in text"));
  auto* options = new QHBoxLayout;
  options->addWidget(m_imatrix);
  options->addWidget(m_kv8);
  options->addWidget(m_kvType);
  options->addWidget(new QLabel(tr("Context:")));
  options->addWidget(m_context);
  options->addWidget(new QLabel(tr("Chunks:")));
  options->addWidget(m_chunks);
  options->addWidget(new QLabel(tr("Threads:")));
  options->addWidget(m_threads);
  options->addWidget(new QLabel(tr("Text:")));
  options->addWidget(m_evalText, 1);
  grid->addLayout(options, 2, 1, 1, 7);

  m_run = new QPushButton(tr("Run queue"));
  m_run->setObjectName(QStringLiteral("runQueue"));
  m_cancel = new QPushButton(tr("Cancel"));
  m_cancel->setEnabled(false);
  auto* exportButton = new QPushButton(tr("Export CSV…"));
  auto* reloadButton = new QPushButton(tr("Reload"));
  m_progress = new QProgressBar;
  m_progress->setRange(0, 1000);
  m_progress->setValue(0);
  m_stage = new QLabel;
  m_note = new QLabel;
  m_note->setObjectName(QStringLiteral("baseNote"));
  m_note->setWordWrap(true);
  connect(m_run, &QPushButton::clicked, this, qOverload<>(&QuantLabPanel::startQueue));
  connect(m_cancel, &QPushButton::clicked, this, &QuantLabPanel::cancel);
  connect(reloadButton, &QPushButton::clicked, this, &QuantLabPanel::reload);
  connect(exportButton, &QPushButton::clicked, this, [this] {
    const QString path = QFileDialog::getSaveFileName(this, tr("Export Runs"), QStringLiteral("quantization-runs.csv"),
                                                      tr("CSV files (*.csv)"));
    if (!path.isEmpty() && !exportCsv(path)) emit statusMessage(tr("Cannot write %1").arg(path));
  });
  auto* actions = new QHBoxLayout;
  actions->addWidget(m_run);
  actions->addWidget(m_cancel);
  actions->addWidget(m_progress, 1);
  actions->addWidget(m_stage, 2);
  actions->addWidget(reloadButton);
  actions->addWidget(exportButton);
  grid->addLayout(actions, 3, 0, 1, 8);
  grid->addWidget(m_note, 4, 0, 1, 8);
  return form;
}

QuantLabSettings QuantLabPanel::settings() const {
  QuantLabSettings s;
  s.sourcePath = m_source->text().trimmed();
  s.outputDir = m_outputDir;
  s.storePath = m_storePath;
  s.evalTextPath = m_evalText->text().trimmed();
  s.context = m_context->value();
  s.numChunks = m_chunks->value();
  s.numThreads = m_threads->value();
  return s;
}

QVector<QuantJob> QuantLabPanel::jobs() const {
  QVector<QuantJob> out;
  const QString f16 = QStringLiteral("f16"), q8 = m_kvType->currentText();
  if (m_kv8->isChecked()) out.append({QString(), false, q8});  // the base with the 8-bit cache
  for (const char* t : kTypes) {
    if (!m_typeBoxes.at(QString::fromLatin1(t))->isChecked()) continue;
    out.append({QString::fromLatin1(t), false, f16});
    if (m_imatrix->isChecked()) out.append({QString::fromLatin1(t), true, f16});
    if (m_kv8->isChecked()) out.append({QString::fromLatin1(t), false, q8});
  }
  return out;
}

void QuantLabPanel::setSourcePath(const QString& path) { m_source->setText(path); }

void QuantLabPanel::suggestSourcePath(const QString& path) {
  if (m_source->text().trimmed().isEmpty()) m_source->setText(path);
}

void QuantLabPanel::setCheckedTypes(const QStringList& types, bool withImatrix, bool withKv8) {
  for (auto& [name, box] : m_typeBoxes) box->setChecked(types.contains(name));
  m_imatrix->setChecked(withImatrix);
  m_kv8->setChecked(withKv8);
}

bool QuantLabPanel::startQueue() { return startQueue(settings(), jobs()); }

bool QuantLabPanel::startQueue(const QuantLabSettings& s, const QVector<QuantJob>& jobs) {
  if (m_isRunning) return false;
  if (s.sourcePath.isEmpty() || !QFileInfo::exists(s.sourcePath)) {
    emit statusMessage(tr("Choose a source model first"));
    return false;
  }
  if (!m_worker) return false;  // the engine thread is gone
  m_isRunning = true;
  m_worker->clearCancel();
  m_run->setEnabled(false);
  m_cancel->setEnabled(true);
  m_progress->setValue(0);
  m_stage->setText(tr("Starting…"));
  QMetaObject::invokeMethod(m_worker, "runQueue", Qt::QueuedConnection, Q_ARG(iwb::ui::QuantLabSettings, s),
                            Q_ARG(QVector<iwb::ui::QuantJob>, jobs));
  if (m_engine && m_engine->hasModel()) {
    emit statusMessage(tr("The quantization lab has the engine until its queue ends: chat replies wait for it"));
  }
  return true;
}

void QuantLabPanel::cancel() {
  if (m_worker) m_worker->cancel();
  m_stage->setText(tr("Cancelling…"));
}

bool QuantLabPanel::exportCsv(const QString& path) {
  QFile f(path);
  if (!f.open(QIODevice::WriteOnly | QIODevice::Truncate)) return false;
  return f.write(m_model->toCsv().toUtf8()) >= 0;
}

QString QuantLabPanel::baseNote() const { return m_note->text(); }

void QuantLabPanel::reload() {
  // Keep the selected runs across the reload.
  QList<qint64> selected;
  for (const QModelIndex& i : m_table->selectionModel()->selectedRows()) {
    selected << m_proxy->data(i, QuantRunsModel::RunIdRole).toLongLong();
  }
  if (!m_model->reload(m_storePath)) emit statusMessage(tr("Results store: %1").arg(m_model->errorMessage()));
  updateViews();
  if (selected.size() >= 2) compareRuns(selected[0], selected[1]);
  else if (selected.size() == 1) compareRuns(selected[0], -1);
}

void QuantLabPanel::updateViews() {
  m_charts->setRuns(m_model->runs());
  // Say what the reference is, and when it is a dequantized copy of a quantized file.
  QString note;
  for (const iwb::quant::QuantRun& r : m_model->runs()) {
    if (!r.is_reference) continue;
    note = tr("Reference: %1 (%2).").arg(QFileInfo(QString::fromStdString(r.model_path)).fileName(),
                                        QString::fromStdString(r.weight_type));
    if (!r.note.empty()) {
      note += QLatin1Char(' ') + QString::fromStdString(r.note) + QLatin1Char('.');
    } else if (const QString from = m_model->dequantizedFrom(r); !from.isEmpty()) {
      note += tr(" Dequantized from %1, a quantized file (the only one at hand): every error here is measured "
                 "against that, not against the original unquantized weights.").arg(from);
    }
  }
  if (note.isEmpty() && !m_model->runs().empty()) note = tr("No reference run yet: the queue evaluates the base first.");
  m_note->setText(note);
}

void QuantLabPanel::compareRuns(qint64 first, qint64 second) {
  const int a = m_model->rowOfRun(first), b = m_model->rowOfRun(second);
  const ResultsStoreAccess store(m_storePath);
  auto tensors = [&](int row) {
    if (row < 0) return std::vector<iwb::quant::QuantizedTensor>{};
    auto t = store.tensorErrors(m_model->run(row).id);
    return t ? *t : std::vector<iwb::quant::QuantizedTensor>{};
  };
  m_compare->setRuns(a >= 0 ? &m_model->run(a) : nullptr, tensors(a), b >= 0 ? &m_model->run(b) : nullptr, tensors(b));
  // Mirror the comparison in the table's selection without re-entering.
  const QSignalBlocker blocker(m_table->selectionModel());
  m_table->clearSelection();
  for (const int row : {a, b}) {
    if (row < 0) continue;
    const QModelIndex index = m_proxy->mapFromSource(m_model->index(row, 0));
    m_table->selectionModel()->select(index, QItemSelectionModel::Select | QItemSelectionModel::Rows);
  }
}

void QuantLabPanel::onSelectionChanged() {
  const QModelIndexList rows = m_table->selectionModel()->selectedRows();
  qint64 ids[2] = {-1, -1};
  for (int i = 0; i < rows.size() && i < 2; ++i) ids[i] = m_proxy->data(rows[i], QuantRunsModel::RunIdRole).toLongLong();
  compareRuns(ids[0], ids[1]);
}

}  // namespace iwb::ui
