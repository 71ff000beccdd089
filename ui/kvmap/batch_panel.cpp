// BatchPanel: the prompt list and options, submitting a batch through the engine controller,
// and the table of its requests.
#include "kvmap/batch_panel.h"

#include "worker/engine_controller.h"
#include "kvmap/batch_table_model.h"

#include <QCheckBox>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QSpinBox>
#include <QStyledItemDelegate>
#include <QTableView>
#include <QVBoxLayout>

namespace iwb::ui {
namespace {

// Prompts read from their start; the table's own elision (from the left) keeps an output's
// newest words in view.
class ElideRightDelegate : public QStyledItemDelegate {
 public:
  using QStyledItemDelegate::QStyledItemDelegate;

 protected:
  void initStyleOption(QStyleOptionViewItem* option, const QModelIndex& index) const override {
    QStyledItemDelegate::initStyleOption(option, index);
    option->textElideMode = Qt::ElideRight;
  }
};

}  // namespace

QString BatchPanel::sharedPrefixText() {
  // Long enough to fill many blocks of every tokenizer: requests admitted after the first one
  // finds these blocks in the prefix cache share them instead of computing them again.
  return QStringLiteral(
      "You are a careful, friendly assistant running inside Inference Workbench, a desktop program that "
      "shows how a language model serves several requests at once. Answer the user's request directly and "
      "briefly, in plain language, without repeating the question. Prefer short sentences and concrete "
      "examples over general statements. When the request asks for code, give a small, correct example "
      "with a one-line explanation, and use the language the user names, or Python when none is named. "
      "When the request asks for a list, give at most three items, one per line. When you are not sure of "
      "a fact, say so instead of guessing. Do not mention these instructions, do not apologise, and do "
      "not add greetings or closing remarks. Keep the whole answer under one hundred words unless the "
      "user asks for more. Several other requests share this same introduction; the program reuses its "
      "keys and values from the paged KV cache, so only the user's own words need new blocks.");
}

QStringList BatchPanel::defaultPrompts() {
  return {QStringLiteral("Write a haiku about the sea."),
          QStringLiteral("Explain what a KV cache is in two sentences."),
          QStringLiteral("List three uses of a hash map."),
          QStringLiteral("Write a Python function that reverses a string."),
          QStringLiteral("Why is the sky blue? Answer briefly."),
          QStringLiteral("Give one tip for writing readable C++.")};
}

BatchPanel::BatchPanel(EngineController* engine, QWidget* parent)
    : QWidget(parent),
      m_engine(engine),
      m_model(new BatchTableModel(this)),
      m_prompts(new QPlainTextEdit),
      m_sharePrefix(new QCheckBox(tr("Share a common prefix"))),
      m_count(new QSpinBox),
      m_maxTokens(new QSpinBox),
      m_runButton(new QPushButton(tr("Run Batch"))),
      m_stopButton(new QPushButton(tr("Stop Batch"))),
      m_clearButton(new QPushButton(tr("Clear Finished"))),
      m_statusLabel(new QLabel),
      m_table(new QTableView) {
  setObjectName(QStringLiteral("kvBatchPanel"));
  m_prompts->setObjectName(QStringLiteral("kvBatchPrompts"));
  m_prompts->setPlainText(defaultPrompts().join(QLatin1Char('\n')));
  m_prompts->setToolTip(tr("One prompt per line; each becomes a request of its own"));
  m_prompts->setLineWrapMode(QPlainTextEdit::NoWrap);
  m_sharePrefix->setObjectName(QStringLiteral("kvBatchSharePrefix"));
  m_sharePrefix->setChecked(true);
  m_sharePrefix->setToolTip(tr("Put the same long system text before every prompt, so their prompts begin with "
                               "the same tokens and share KV blocks through the prefix cache"));
  m_count->setObjectName(QStringLiteral("kvBatchCount"));
  m_count->setRange(1, 64);
  m_count->setValue(static_cast<int>(defaultPrompts().size()));
  m_count->setToolTip(tr("Requests to run: the prompts are taken in order, again from the first when the list "
                         "is shorter"));
  m_maxTokens->setObjectName(QStringLiteral("kvBatchMaxTokens"));
  m_maxTokens->setRange(1, 4096);
  m_maxTokens->setValue(96);
  m_maxTokens->setToolTip(tr("Tokens each request may generate at most"));
  m_runButton->setObjectName(QStringLiteral("kvBatchRunButton"));
  m_runButton->setToolTip(tr("Submit every request at once; the engine serves them together"));
  m_stopButton->setObjectName(QStringLiteral("kvBatchStopButton"));
  m_clearButton->setObjectName(QStringLiteral("kvBatchClearButton"));
  m_statusLabel->setObjectName(QStringLiteral("kvBatchStatus"));
  m_statusLabel->setWordWrap(true);

  m_table->setObjectName(QStringLiteral("kvBatchTable"));
  m_table->setModel(m_model);
  m_table->verticalHeader()->hide();
  m_table->setAlternatingRowColors(true);
  m_table->setSelectionBehavior(QAbstractItemView::SelectRows);
  m_table->setWordWrap(false);
  m_table->setTextElideMode(Qt::ElideLeft);  // a long output shows its newest words
  m_table->setItemDelegateForColumn(BatchTableModel::PromptColumn, new ElideRightDelegate(m_table));
  QHeaderView* header = m_table->horizontalHeader();
  header->setSectionResizeMode(QHeaderView::Interactive);
  header->setSectionResizeMode(BatchTableModel::OutputColumn, QHeaderView::Stretch);
  m_table->setColumnWidth(BatchTableModel::RequestColumn, 64);
  m_table->setColumnWidth(BatchTableModel::PromptColumn, 200);
  m_table->setColumnWidth(BatchTableModel::TokensColumn, 56);
  m_table->setColumnWidth(BatchTableModel::SpeedColumn, 56);
  m_table->setColumnWidth(BatchTableModel::StateColumn, 120);

  auto* options = new QFormLayout;
  options->addRow(m_sharePrefix);
  options->addRow(tr("Requests"), m_count);
  options->addRow(tr("Max tokens"), m_maxTokens);
  auto* buttons = new QHBoxLayout;
  buttons->addWidget(m_runButton);
  buttons->addWidget(m_stopButton);
  buttons->addWidget(m_clearButton);
  auto* left = new QVBoxLayout;
  left->addWidget(new QLabel(tr("Prompts, one per line")));
  left->addWidget(m_prompts, 1);
  left->addLayout(options);
  left->addLayout(buttons);
  left->addWidget(m_statusLabel);
  auto* leftWidget = new QWidget;
  leftWidget->setLayout(left);
  leftWidget->setMaximumWidth(380);
  left->setContentsMargins(0, 0, 0, 0);
  auto* layout = new QHBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->addWidget(leftWidget);
  layout->addWidget(m_table, 1);

  connect(m_runButton, &QPushButton::clicked, this, &BatchPanel::runBatch);
  connect(m_stopButton, &QPushButton::clicked, this, &BatchPanel::stopBatch);
  connect(m_clearButton, &QPushButton::clicked, this, [this] {
    m_model->clearFinished();
    updateActions();
  });
  connect(m_prompts, &QPlainTextEdit::textChanged, this, &BatchPanel::updateActions);
  connect(m_engine, &EngineController::generationStarted, m_model, &BatchTableModel::handleStarted);
  connect(m_engine, &EngineController::tokensReady, m_model, &BatchTableModel::handleTokens);
  connect(m_engine, &EngineController::tokenTimesReady, m_model, &BatchTableModel::handleTokenTimes);
  connect(m_engine, &EngineController::generationFinished, m_model, &BatchTableModel::handleFinished);
  connect(m_engine, &EngineController::generationFailed, m_model, &BatchTableModel::handleFailed);
  connect(m_model, &BatchTableModel::requestEnded, this, &BatchPanel::updateActions);
  connect(m_engine, &EngineController::modelLoaded, this, &BatchPanel::updateActions);
  connect(m_engine, &EngineController::modelLoadStarted, this, &BatchPanel::updateActions);
  connect(m_engine, &EngineController::modelLoadFailed, this, &BatchPanel::updateActions);
  connect(m_engine, &EngineController::modelUnloaded, this, &BatchPanel::updateActions);
  updateActions();
}

BatchInput BatchPanel::batchInput() const {
  QStringList lines;
  for (const QString& line : m_prompts->toPlainText().split(QLatin1Char('\n'))) {
    if (!line.trimmed().isEmpty()) lines << line.trimmed();
  }
  BatchInput batch;
  if (lines.isEmpty()) return batch;
  for (int i = 0; i < m_count->value(); ++i) batch.prompts << lines.at(i % lines.size());
  if (m_sharePrefix->isChecked()) batch.systemText = sharedPrefixText();
  batch.sampling.maxTokens = m_maxTokens->value();
  return batch;
}

QList<quint64> BatchPanel::runBatch() {
  if (!m_engine->hasModel() || m_engine->isLoading()) return {};
  const BatchInput batch = batchInput();
  if (batch.prompts.isEmpty()) return {};
  const QList<quint64> ids = m_engine->submitBatch(batch);
  m_model->addRequests(ids, batch.prompts);
  m_table->scrollToBottom();
  updateActions();
  emit batchSubmitted(ids);
  return ids;
}

void BatchPanel::stopBatch() { m_engine->stopRequests(m_model->unfinishedRequests()); }

void BatchPanel::updateActions() {
  const bool isReady = m_engine->hasModel() && !m_engine->isLoading();
  const bool hasPrompts = !m_prompts->toPlainText().trimmed().isEmpty();
  const int numUnfinished = m_model->numUnfinished();
  m_runButton->setEnabled(isReady && hasPrompts);
  m_stopButton->setEnabled(numUnfinished > 0);
  m_clearButton->setEnabled(m_model->rowCount() > numUnfinished);
  if (!isReady) m_statusLabel->setText(tr("Load a model to run a batch."));
  else if (numUnfinished > 0) m_statusLabel->setText(tr("%n request(s) in flight.", nullptr, numUnfinished));
  else m_statusLabel->setText(tr("Ready. The chat can run beside a batch."));
}

}  // namespace iwb::ui
