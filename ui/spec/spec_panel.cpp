// SpecPanel: settings, the baseline/speculative comparison runs, and the live views.
#include "spec/spec_panel.h"

#include "spec/spec_charts.h"
#include "spec/spec_runs_model.h"
#include "worker/engine_controller.h"

#include <QCheckBox>
#include <QComboBox>
#include <QDoubleSpinBox>
#include <QFileDialog>
#include <QFormLayout>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QItemSelectionModel>
#include <QLabel>
#include <QLineEdit>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QScrollArea>
#include <QSettings>
#include <QSpinBox>
#include <QSplitter>
#include <QStandardItemModel>
#include <QTableView>
#include <QTextEdit>
#include <QVBoxLayout>

namespace iwb::ui {
namespace {

// A code edit: the reply repeats most of the prompt, where prompt lookup shines.
const char* const kDefaultPrompt =
    "Rename the variable `total` to `running_sum` in this Python code. Output the whole code, changed, and "
    "nothing else.\n\n"
    "def summarize(readings):\n"
    "    by_sensor = {}\n"
    "    for reading in readings:\n"
    "        by_sensor.setdefault(reading.sensor, []).append(reading.value)\n"
    "    summary = {}\n"
    "    for sensor, values in by_sensor.items():\n"
    "        total = 0.0\n"
    "        for value in values:\n"
    "            total += value\n"
    "        mean = total / len(values)\n"
    "        spread = statistics.pstdev(values) if len(values) > 1 else 0.0\n"
    "        summary[sensor] = {\"count\": len(values), \"total\": total, \"mean\": mean, \"spread\": spread}\n"
    "    return summary\n\n\n"
    "def print_summary(summary):\n"
    "    for sensor in sorted(summary):\n"
    "        stats = summary[sensor]\n"
    "        print(f\"{sensor:>10}: n={stats['count']:4d} total={stats['total']:10.2f} \"\n"
    "              f\"mean={stats['mean']:8.3f} spread={stats['spread']:8.3f}\")\n";

QString describe(const iwb::spec::SpeculationStats& s, double speedup, const iwb::spec::DraftLengthSuggestion& best) {
  if (s.empty()) return QObject::tr("No drafts verified yet. Turn speculation on and run a prompt (or chat).");
  const double steps = static_cast<double>(s.num_verify_steps);
  QString text = QObject::tr(
                     "Accepted %1% of %2 draft tokens · mean accepted length %3 · %4 tokens per step · "
                     "draft %5 ms, verify %6 ms per step")
                     .arg(100.0 * s.acceptance_rate(), 0, 'f', 1)
                     .arg(s.num_drafted)
                     .arg(s.mean_accepted_length(), 0, 'f', 2)
                     .arg(s.tokens_per_step(), 0, 'f', 2)
                     .arg(1e3 * s.draft_seconds / steps, 0, 'f', 1)
                     .arg(1e3 * s.verify_seconds / steps, 0, 'f', 1);
  if (speedup > 0) text += QObject::tr("\nMeasured speedup against plain decoding: %1×").arg(speedup, 0, 'f', 2);
  text += QObject::tr("\nSuggested K: %1 (predicted %2 tokens/s; plain %3)")
              .arg(best.num_draft_tokens)
              .arg(best.tokens_per_second, 0, 'f', 1)
              .arg(best.baseline_tokens_per_second, 0, 'f', 1);
  return text;
}

}  // namespace

SpecPanel::SpecPanel(EngineController* engine, QWidget* parent)
    : QWidget(parent),
      m_engine(engine),
      m_model(new SpecRunsModel(this)),
      m_kind(new QComboBox),
      m_draftPath(new QLineEdit),
      m_browse(new QPushButton(tr("Browse…"))),
      m_numDraft(new QSpinBox),
      m_adaptive(new QCheckBox(tr("Adapt K to the measured acceptance"))),
      m_minProbability(new QDoubleSpinBox),
      m_apply(new QPushButton(tr("Apply"))),
      m_settingsStatus(new QLabel),
      m_prompt(new QPlainTextEdit(QString::fromUtf8(kDefaultPrompt))),
      m_maxTokens(new QSpinBox),
      m_withBaseline(new QCheckBox(tr("With a baseline"))),
      m_run(new QPushButton(tr("Run"))),
      m_clear(new QPushButton(tr("Clear"))),
      m_summary(new QLabel),
      m_charts(new SpecCharts),
      m_table(new QTableView),
      m_reply(new QTextEdit) {
  setObjectName(QStringLiteral("specPanel"));
  m_kind->setObjectName(QStringLiteral("specKind"));
  m_kind->addItem(tr("Off"), QStringLiteral("none"));
  m_kind->addItem(tr("Prompt lookup (n-gram)"), QStringLiteral("lookup"));
  m_kind->addItem(tr("Draft model"), QStringLiteral("draft"));
  m_kind->addItem(tr("Self-draft (Q4_0 copy)"), QStringLiteral("self"));
  m_kind->addItem(tr("MTP head (the model's own)"), QStringLiteral("mtp"));
  m_draftPath->setObjectName(QStringLiteral("specDraftPath"));
  m_draftPath->setPlaceholderText(tr("a smaller GGUF with the same vocabulary"));
  m_numDraft->setObjectName(QStringLiteral("specNumDraft"));
  m_numDraft->setRange(1, 16);
  m_numDraft->setValue(4);
  m_minProbability->setObjectName(QStringLiteral("specMinProbability"));
  m_minProbability->setRange(0.0, 1.0);
  m_minProbability->setSingleStep(0.05);
  m_minProbability->setDecimals(2);
  m_minProbability->setSpecialValueText(tr("off"));
  m_minProbability->setToolTip(
      tr("A draft ends before a guess whose probability among its 10 most likely tokens is "
         "below this (llama.cpp's --spec-draft-p-min; draft model, self-draft and MTP "
         "head)"));
  m_maxTokens->setRange(8, 2048);
  m_maxTokens->setValue(128);
  m_withBaseline->setChecked(true);
  m_withBaseline->setToolTip(tr("Run the prompt without speculation first: the measured speedup compares the two"));
  m_summary->setObjectName(QStringLiteral("specSummary"));
  m_summary->setWordWrap(true);
  m_summary->setTextInteractionFlags(Qt::TextSelectableByMouse);
  m_settingsStatus->setObjectName(QStringLiteral("specSettingsStatus"));
  m_settingsStatus->setWordWrap(true);
  m_run->setObjectName(QStringLiteral("specRun"));
  m_prompt->setMaximumHeight(120);
  m_reply->setObjectName(QStringLiteral("specReply"));
  m_reply->setReadOnly(true);
  m_reply->setPlaceholderText(tr("The latest reply; accepted draft tokens are highlighted."));
  m_table->setModel(m_model);
  m_table->setSelectionBehavior(QAbstractItemView::SelectRows);
  m_table->setSelectionMode(QAbstractItemView::SingleSelection);
  m_table->verticalHeader()->hide();
  m_table->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
  m_table->setMinimumWidth(300);
  m_reply->setMinimumWidth(200);

  auto* settingsBox = new QGroupBox(tr("Speculative decoding (chat and every request)"));
  auto* form = new QFormLayout(settingsBox);
  form->addRow(tr("Drafter:"), m_kind);
  auto* pathRow = new QHBoxLayout;
  pathRow->addWidget(m_draftPath, 1);
  pathRow->addWidget(m_browse);
  form->addRow(tr("Draft file:"), pathRow);
  form->addRow(tr("Draft tokens (K):"), m_numDraft);
  // K's adaptation and the least sure guess share a row (the tab fits a laptop's height).
  auto* draftLimits = new QWidget;
  auto* limitsRow = new QHBoxLayout(draftLimits);
  limitsRow->setContentsMargins(0, 0, 0, 0);
  limitsRow->addWidget(m_adaptive);
  limitsRow->addStretch(1);
  limitsRow->addWidget(new QLabel(tr("Least sure guess (p-min):")));
  limitsRow->addWidget(m_minProbability);
  form->addRow(QString(), draftLimits);
  auto* applyRow = new QHBoxLayout;
  applyRow->addWidget(m_apply);
  applyRow->addWidget(m_settingsStatus, 1);
  form->addRow(applyRow);

  auto* runBox = new QGroupBox(tr("Measure"));
  auto* runLayout = new QVBoxLayout(runBox);
  runLayout->addWidget(m_prompt);
  auto* runRow = new QHBoxLayout;
  runRow->addWidget(new QLabel(tr("Tokens:")));
  runRow->addWidget(m_maxTokens);
  runRow->addWidget(m_withBaseline);
  runRow->addStretch(1);
  runRow->addWidget(m_clear);
  runRow->addWidget(m_run);
  runLayout->addLayout(runRow);

  auto* top = new QHBoxLayout;
  top->addWidget(settingsBox, 1);
  top->addWidget(runBox, 1);

  auto* bottom = new QSplitter(Qt::Horizontal);
  bottom->addWidget(m_table);
  bottom->addWidget(m_reply);
  bottom->setStretchFactor(0, 3);
  bottom->setStretchFactor(1, 2);

  auto* layout = new QVBoxLayout(this);
  layout->addLayout(top);
  layout->addWidget(m_summary);
  layout->addWidget(m_charts, 3);
  layout->addWidget(bottom, 2);

  const QSettings stored;
  SpeculationSettings restored;
  restored.kind = stored.value(QStringLiteral("speculation/kind"), restored.kind).toString();
  restored.draftModelPath = stored.value(QStringLiteral("speculation/draftModel")).toString();
  restored.numDraftTokens = stored.value(QStringLiteral("speculation/numDraftTokens"), restored.numDraftTokens).toInt();
  restored.isAdaptive = stored.value(QStringLiteral("speculation/adaptive"), false).toBool();
  restored.minProbability = stored.value(QStringLiteral("speculation/minProbability"), 0.0).toDouble();
  setSettings(restored);

  connect(m_kind, &QComboBox::currentIndexChanged, this, &SpecPanel::updateEnabled);
  connect(m_browse, &QPushButton::clicked, this, &SpecPanel::browseDraftModel);
  connect(m_apply, &QPushButton::clicked, this, &SpecPanel::apply);
  connect(m_run, &QPushButton::clicked, this, &SpecPanel::runComparison);
  connect(m_clear, &QPushButton::clicked, m_model, &SpecRunsModel::clear);
  connect(m_model, &SpecRunsModel::statsChanged, this, &SpecPanel::refresh);
  connect(m_table->selectionModel(), &QItemSelectionModel::selectionChanged, this, &SpecPanel::refresh);
  connect(m_engine, &EngineController::speculationChanged, this, &SpecPanel::handleSpeculationChanged);
  connect(m_engine, &EngineController::speculationStepped, m_model, &SpecRunsModel::addStep);
  connect(m_engine, &EngineController::speculationMeasured, m_model, &SpecRunsModel::addReport);
  connect(m_engine, &EngineController::draftTokensReady, this, &SpecPanel::handleDraftTokens);
  connect(m_engine, &EngineController::generationFinished, this, [this](quint64 id) { handleRunEnded(id); });
  connect(m_engine, &EngineController::generationFailed, this, [this](quint64 id, const QString& message) {
    if (id == m_runningRequest) m_settingsStatus->setText(message);
    handleRunEnded(id);
  });
  connect(m_engine, &EngineController::modelLoaded, this, &SpecPanel::updateEnabled);
  connect(m_engine, &EngineController::modelUnloaded, this, &SpecPanel::updateEnabled);
  // The stored settings take effect for the chat at once.
  if (restored.isEnabled()) apply();
  updateEnabled();
  refresh();
}

SpeculationSettings SpecPanel::settings() const {
  SpeculationSettings s;
  s.kind = m_kind->currentData().toString();
  s.draftModelPath = m_draftPath->text().trimmed();
  s.numDraftTokens = m_numDraft->value();
  s.isAdaptive = m_adaptive->isChecked();
  s.minProbability = m_minProbability->value();
  return s;
}

void SpecPanel::setSettings(const SpeculationSettings& s) {
  const int index = m_kind->findData(s.kind);
  m_kind->setCurrentIndex(index >= 0 ? index : 0);
  m_draftPath->setText(s.draftModelPath);
  m_numDraft->setValue(s.numDraftTokens);
  m_adaptive->setChecked(s.isAdaptive);
  m_minProbability->setValue(s.minProbability);
  updateEnabled();
}

void SpecPanel::apply() {
  const SpeculationSettings s = settings();
  if (const iwb::Result<iwb::spec::SpeculativeConfig> c = s.toConfig(); !c) {
    m_settingsStatus->setText(QString::fromStdString(c.error_message()));
    return;
  }
  m_settingsStatus->setText(s.isEnabled() && s.kind != QLatin1String("lookup") ? tr("Preparing the drafter…")
                                                                               : QString());
  m_engine->setSpeculation(s);
}

void SpecPanel::handleSpeculationChanged(const SpeculationSettings& s, const QString& error) {
  if (!error.isEmpty()) {
    m_settingsStatus->setText(error);
  } else {
    m_settingsStatus->setText(s.isEnabled() ? tr("On: %1, K = %2%3")
                                                  .arg(m_kind->itemText(m_kind->findData(s.kind)))
                                                  .arg(s.numDraftTokens)
                                                  .arg(s.isAdaptive ? tr(" (adaptive)") : QString())
                                            : tr("Off"));
    QSettings stored;
    stored.setValue(QStringLiteral("speculation/kind"), s.kind);
    stored.setValue(QStringLiteral("speculation/draftModel"), s.draftModelPath);
    stored.setValue(QStringLiteral("speculation/numDraftTokens"), s.numDraftTokens);
    stored.setValue(QStringLiteral("speculation/adaptive"), s.isAdaptive);
    stored.setValue(QStringLiteral("speculation/minProbability"), s.minProbability);
  }
  updateEnabled();
}

bool SpecPanel::runComparison() {
  QString problem;
  if (!m_engine->hasModel())
    problem = tr("Open a model first.");
  else if (!m_engine->speculation().isEnabled())
    problem = tr("Turn speculative decoding on (Apply) first.");
  else if (isRunning())
    problem = tr("A run is in progress.");
  else if (m_prompt->toPlainText().trimmed().isEmpty())
    problem = tr("The prompt is empty.");
  if (!problem.isEmpty()) {
    m_settingsStatus->setText(problem);
    return false;
  }
  m_pendingRuns.clear();
  if (m_withBaseline->isChecked()) m_pendingRuns << 0;
  m_pendingRuns << -1;
  startNextRun();
  updateEnabled();
  return true;
}

void SpecPanel::startNextRun() {
  if (m_pendingRuns.isEmpty()) {
    m_runningRequest = 0;
    updateEnabled();
    emit comparisonFinished();
    return;
  }
  BatchInput input;
  input.prompts = {m_prompt->toPlainText()};
  input.sampling.temperature = 0.0;  // greedy: both runs write the same reply, so their speeds compare
  input.sampling.seed = 1;
  input.sampling.maxTokens = m_maxTokens->value();
  input.numDraftTokens = m_pendingRuns.takeFirst();
  const QList<quint64> ids = m_engine->submitBatch(input);
  m_runningRequest = ids.value(0);
}

void SpecPanel::handleRunEnded(quint64 requestId) {
  if (requestId == 0 || requestId != m_runningRequest) return;
  m_runningRequest = 0;
  startNextRun();
}

void SpecPanel::handleDraftTokens(quint64 requestId, const QString& text, bool isDraft) {
  if (requestId != m_replyRequest) {  // a new reply (the chat's or a run's): show it from its start
    m_replyRequest = requestId;
    m_reply->clear();
  }
  QTextCursor cursor(m_reply->document());
  cursor.movePosition(QTextCursor::End);
  QTextCharFormat format;
  if (isDraft) format.setBackground(QColor(0xc8, 0xec, 0xc8));  // accepted draft tokens: light green
  cursor.insertText(text, format);
}

QString SpecPanel::replyHtml() const { return m_reply->toHtml(); }

void SpecPanel::refresh() {
  const QModelIndexList selected = m_table->selectionModel()->selectedRows();
  const bool isRequest = !selected.isEmpty() && !m_model->report(selected.first().row()).isBaseline();
  const iwb::spec::SpeculationStats& stats =
      isRequest ? m_model->report(selected.first().row()).stats : m_model->overall();
  const iwb::spec::DraftLengthSuggestion best = m_model->suggestion(stats);
  double speedup = m_model->speedup();
  if (isRequest && m_model->baselineTokensPerSecond() > 0) {
    speedup = m_model->report(selected.first().row()).tokensPerSecond() / m_model->baselineTokensPerSecond();
  }
  m_summary->setText(
      (isRequest ? tr("Request %1: ").arg(m_model->report(selected.first().row()).requestId) : tr("All steps: ")) +
      describe(stats, speedup, best));
  m_charts->showStats(stats, isRequest ? QList<SpeculationStep>{} : m_model->steps(), best);
}

void SpecPanel::updateEnabled() {
  const QString kind = m_kind->currentData().toString();
  const bool isDraftModel = kind == QLatin1String("draft"), isMtp = kind == QLatin1String("mtp");
  m_draftPath->setEnabled(isDraftModel || isMtp);
  m_browse->setEnabled(isDraftModel || isMtp);
  m_draftPath->setPlaceholderText(isMtp ? tr("empty: the model's own; or its head's mtp- file")
                                        : tr("a smaller GGUF with the same vocabulary"));
  m_run->setEnabled(m_engine->hasModel() && m_engine->speculation().isEnabled() && !isRunning());
  // The MTP head is the model's own: offered where the loaded model has one (or none is loaded).
  if (auto* items = qobject_cast<QStandardItemModel*>(m_kind->model())) {
    if (QStandardItem* mtp = items->item(m_kind->findData(QStringLiteral("mtp")))) {
      const bool hasHead = !m_engine->hasModel() || m_engine->model().numMtpLayers > 0;
      mtp->setEnabled(hasHead);
      mtp->setToolTip(hasHead ? tr("The model's multi-token-prediction layer guesses the tokens (GLM-4.5 and "
                                   "later, DeepSeek V3; llama.cpp's draft-mtp)")
                              : tr("The loaded model has no multi-token-prediction layer"));
    }
  }
}

void SpecPanel::browseDraftModel() {
  const QString path =
      QFileDialog::getOpenFileName(this, tr("Draft model"), m_draftPath->text(), tr("GGUF models (*.gguf)"));
  if (!path.isEmpty()) m_draftPath->setText(path);
}

}  // namespace iwb::ui
