// QuantLabPanel: the form (weight and KV cache types, depth, memory budget), where the queue
// runs, the runs table, charts and comparison.
#include "quantlab/quant_lab_panel.h"

#include "iwb/engine/synth/quant_mix.h"
#include "quantlab/quant_charts.h"
#include "quantlab/quant_compare_view.h"
#include "quantlab/quant_runs_model.h"
#include "store/results_store_access.h"
#include "worker/engine_controller.h"

#include <QCheckBox>
#include <QDoubleSpinBox>
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
const char* const kTypes[] = {"Q8_0", "Q6_K", "Q5_K_M", "Q5_K",  "Q5_1", "Q5_0", "Q4_K_M",
                              "Q4_K", "Q4_1", "Q4_0",   "MXFP4", "Q3_K", "Q2_K"};
// The KV cache types (llama.cpp's -ctk/-ctv names, vLLM's FP8), largest first.
const char* const kKvTypes[] = {"q8_0", "fp8_e4m3", "q5_1", "q5_0", "q4_1", "q4_0"};

}  // namespace

QuantLabPanel::QuantLabPanel(const QString& storePath, const QString& outputDir, QWidget* parent)
    : QuantLabPanel(nullptr, storePath, outputDir, parent) {}

QuantLabPanel::QuantLabPanel(EngineController* engine, const QString& storePath, const QString& outputDir,
                             QWidget* parent)
    : QWidget(parent),
      m_storePath(ResultsStoreAccess(storePath).path()),
      m_outputDir(outputDir.isEmpty() ? QStandardPaths::writableLocation(QStandardPaths::AppLocalDataLocation) +
                                            QStringLiteral("/quantlab")
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
  m_source->setPlaceholderText(
      tr("GGUF model to quantize (F32/F16/BF16; a quantized file is dequantized to F16 first)"));
  auto* browse = new QPushButton(tr("Browse…"));
  connect(browse, &QPushButton::clicked, this, [this] {
    const QString path =
        QFileDialog::getOpenFileName(this, tr("Source Model"), m_source->text(), tr("GGUF models (*.gguf)"));
    if (!path.isEmpty()) m_source->setText(path);
  });
  grid->addWidget(new QLabel(tr("Source:")), 0, 0);
  grid->addWidget(m_source, 0, 1, 1, 6);
  grid->addWidget(browse, 0, 7);

  auto* types = new QHBoxLayout;
  for (const char* t : kTypes) {
    auto* box = new QCheckBox(QString::fromLatin1(t));
    box->setChecked(QString::fromLatin1(t) == QLatin1String("Q4_K_M") ||
                    QString::fromLatin1(t) == QLatin1String("Q8_0"));
    m_typeBoxes[QString::fromLatin1(t)] = box;
    types->addWidget(box);
  }
  types->addStretch();
  grid->addWidget(new QLabel(tr("Types:")), 1, 0);
  grid->addLayout(types, 1, 1, 1, 7);

  m_imatrix = new QCheckBox(tr("also with an importance matrix"));
  auto* kvRow = new QHBoxLayout;
  for (const char* t : kKvTypes) {
    auto* box = new QCheckBox(QString::fromLatin1(t));
    box->setToolTip(tr("Keys and values in %1 (llama.cpp's -ctk %1 -ctv %1)").arg(QString::fromLatin1(t)));
    m_kvBoxes[QString::fromLatin1(t)] = box;
    kvRow->addWidget(box);
  }
  m_kvPair = new QCheckBox(tr("keys/values:"));
  m_kvPair->setObjectName(QStringLiteral("kvPair"));
  m_kvKeys = new QComboBox;
  m_kvValues = new QComboBox;
  for (QComboBox* c : {m_kvKeys, m_kvValues}) {
    c->addItem(QStringLiteral("f16"));
    for (const char* t : kKvTypes) c->addItem(QString::fromLatin1(t));
  }
  m_kvKeys->setCurrentText(QStringLiteral("q8_0"));
  m_kvValues->setCurrentText(QStringLiteral("q4_0"));
  m_kvKeys->setToolTip(tr("Key cache type (-ctk)"));
  m_kvValues->setToolTip(tr("Value cache type (-ctv)"));
  m_kvEachType = new QCheckBox(tr("on every weight type too"));
  m_kvEachType->setToolTip(tr("Without this, the KV types run on the base's weights only"));
  kvRow->addWidget(m_kvPair);
  kvRow->addWidget(m_kvKeys);
  kvRow->addWidget(new QLabel(QStringLiteral("/")));
  kvRow->addWidget(m_kvValues);
  kvRow->addWidget(m_kvEachType);
  kvRow->addStretch();
  auto* kvLabel = new QLabel(tr("KV cache:"));
  kvLabel->setToolTip(
      tr("Each KV type is a run of its own, measured against the base with the f16 cache; "
         "block types need head sizes that are multiples of 32"));
  grid->addWidget(kvLabel, 2, 0);
  grid->addLayout(kvRow, 2, 1, 1, 7);

  m_depth = new QSpinBox;
  m_depth->setObjectName(QStringLiteral("genDepth"));
  m_depth->setRange(0, 131072);
  m_depth->setSingleStep(1024);
  m_depth->setValue(4096);
  m_depth->setSpecialValueText(tr("off"));
  m_depth->setToolTip(
      tr("Generation tokens/s measured again after this many tokens in the KV cache "
         "(iwb bench -d), cut to the model's trained context"));
  m_fitContext = new QSpinBox;
  m_fitContext->setRange(16, 1048576);
  m_fitContext->setSingleStep(1024);
  m_fitContext->setValue(8192);
  m_fitMemory = new QDoubleSpinBox;
  m_fitMemory->setRange(0.01, 4096);
  m_fitMemory->setDecimals(2);
  m_fitMemory->setValue(8.0);
  m_fitMemory->setSuffix(tr(" GiB"));
  m_chartSequences = new QSpinBox;
  m_chartSequences->setRange(1, 4096);
  m_chartSequences->setValue(4);
  m_chartSequences->setToolTip(tr("The memory chart counts the weights and the KV cache of this many sequences"));
  const QString fitTip =
      tr("Per run: how many sequences of this context fit in this memory beside the weights: "
         "floor((memory - weights) / (KV bytes per position x context in whole blocks))");
  m_fitContext->setToolTip(fitTip);
  m_fitMemory->setToolTip(fitTip);
  auto* capacity = new QHBoxLayout;
  capacity->addWidget(new QLabel(tr("Speed at depth:")));
  capacity->addWidget(m_depth);
  capacity->addSpacing(12);
  capacity->addWidget(new QLabel(tr("Sequences of")));
  capacity->addWidget(m_fitContext);
  capacity->addWidget(new QLabel(tr("tokens in")));
  capacity->addWidget(m_fitMemory);
  capacity->addSpacing(12);
  capacity->addWidget(new QLabel(tr("Chart memory for")));
  capacity->addWidget(m_chartSequences);
  capacity->addWidget(new QLabel(tr("sequences")));
  capacity->addStretch();
  grid->addLayout(capacity, 3, 1, 1, 7);
  const auto basis = [this] { m_charts->setMemoryBasis(m_fitContext->value(), m_chartSequences->value()); };
  connect(m_fitContext, &QSpinBox::valueChanged, this, basis);
  connect(m_chartSequences, &QSpinBox::valueChanged, this, basis);
  basis();

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
  options->addWidget(new QLabel(tr("Context:")));
  options->addWidget(m_context);
  options->addWidget(new QLabel(tr("Chunks:")));
  options->addWidget(m_chunks);
  options->addWidget(new QLabel(tr("Threads:")));
  options->addWidget(m_threads);
  options->addWidget(new QLabel(tr("Text:")));
  options->addWidget(m_evalText, 1);
  grid->addLayout(options, 4, 1, 1, 7);

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
  grid->addLayout(actions, 5, 0, 1, 8);
  grid->addWidget(m_note, 6, 0, 1, 8);
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
  s.genDepth = m_depth->value();
  s.fitContext = m_fitContext->value();
  s.fitMemoryBytes = m_fitMemory->value() * 1024.0 * 1024.0 * 1024.0;
  return s;
}

QStringList QuantLabPanel::kvTypes() const {
  QStringList out;
  for (const char* t : kKvTypes) {
    if (m_kvBoxes.at(QString::fromLatin1(t))->isChecked()) out << QString::fromLatin1(t);
  }
  if (m_kvPair->isChecked()) {
    const QString k = m_kvKeys->currentText(), v = m_kvValues->currentText();
    const QString pair = k == v ? k : k + QLatin1Char('/') + v;
    if (pair != QLatin1String("f16") && !out.contains(pair)) out << pair;
  }
  return out;
}

QVector<QuantJob> QuantLabPanel::jobs() const {
  QVector<QuantJob> out;
  const QString f16 = QStringLiteral("f16");
  const QStringList kv = kvTypes();
  for (const QString& c : kv) out.append({QString(), false, c});  // the base's weights with each cache
  for (const char* t : kTypes) {
    if (!m_typeBoxes.at(QString::fromLatin1(t))->isChecked()) continue;
    out.append({QString::fromLatin1(t), false, f16});
    if (m_imatrix->isChecked()) out.append({QString::fromLatin1(t), true, f16});
    if (m_kvEachType->isChecked()) {
      for (const QString& c : kv) out.append({QString::fromLatin1(t), false, c});
    }
  }
  return out;
}

void QuantLabPanel::setSourcePath(const QString& path) { m_source->setText(path); }

void QuantLabPanel::suggestSourcePath(const QString& path) {
  if (m_source->text().trimmed().isEmpty()) m_source->setText(path);
}

void QuantLabPanel::setCheckedTypes(const QStringList& types, bool withImatrix) {
  for (auto& [name, box] : m_typeBoxes) box->setChecked(types.contains(name));
  m_imatrix->setChecked(withImatrix);
}

void QuantLabPanel::setKvTypes(const QStringList& kvTypes, bool forEachWeightType) {
  for (auto& [name, box] : m_kvBoxes) box->setChecked(kvTypes.contains(name));
  m_kvPair->setChecked(false);
  for (const QString& t : kvTypes) {
    const QStringList kv = t.split(QLatin1Char('/'));
    if (kv.size() != 2 || m_kvKeys->findText(kv[0]) < 0 || m_kvValues->findText(kv[1]) < 0) continue;
    m_kvKeys->setCurrentText(kv[0]);
    m_kvValues->setCurrentText(kv[1]);
    m_kvPair->setChecked(true);
  }
  m_kvEachType->setChecked(forEachWeightType);
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
  if (selected.size() >= 2)
    compareRuns(selected[0], selected[1]);
  else if (selected.size() == 1)
    compareRuns(selected[0], -1);
}

void QuantLabPanel::updateViews() {
  m_charts->setRuns(m_model->runs());
  // Say what the reference is, and when it is a dequantized copy of a quantized file.
  QString note;
  for (const iwb::quant::QuantRun& r : m_model->runs()) {
    if (!r.is_reference) continue;
    note = tr("Reference: %1 (%2).")
               .arg(QFileInfo(QString::fromStdString(r.model_path)).fileName(), QString::fromStdString(r.weight_type));
    if (!r.note.empty()) {
      note += QLatin1Char(' ') + QString::fromStdString(r.note) + QLatin1Char('.');
    } else if (const QString from = m_model->dequantizedFrom(r); !from.isEmpty()) {
      note += tr(" Dequantized from %1, a quantized file (the only one at hand): every error here is measured "
                 "against that, not against the original unquantized weights.")
                  .arg(from);
    }
  }
  if (note.isEmpty() && !m_model->runs().empty())
    note = tr("No reference run yet: the queue evaluates the base first.");
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
  for (int i = 0; i < rows.size() && i < 2; ++i)
    ids[i] = m_proxy->data(rows[i], QuantRunsModel::RunIdRole).toLongLong();
  compareRuns(ids[0], ids[1]);
}

}  // namespace iwb::ui
