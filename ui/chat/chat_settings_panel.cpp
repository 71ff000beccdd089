// ChatSettingsPanel: a form of spin boxes with the engine's ranges, and pickers of fixed choices
// (reply format, chat template, thinking).
#include "chat/chat_settings_panel.h"

#include <QComboBox>
#include <QDoubleSpinBox>
#include <QFontDatabase>
#include <QFormLayout>
#include <QLabel>
#include <QLineEdit>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QSpinBox>
#include <QVBoxLayout>

#include <initializer_list>
#include <limits>
#include <utility>

namespace iwb::ui {
namespace {

QDoubleSpinBox* makeDoubleBox(double lo, double hi, double step, int decimals, const QString& toolTip) {
  auto* box = new QDoubleSpinBox;
  box->setRange(lo, hi);
  box->setSingleStep(step);
  box->setDecimals(decimals);
  box->setToolTip(toolTip);
  box->setKeyboardTracking(false);  // one change per finished edit, not one per keystroke
  return box;
}

QSpinBox* makeIntBox(int lo, int hi, const QString& special, const QString& toolTip) {
  auto* box = new QSpinBox;
  box->setRange(lo, hi);
  box->setSpecialValueText(special);
  box->setToolTip(toolTip);
  box->setKeyboardTracking(false);
  return box;
}

// A picker of fixed choices: each shown text with the value it stands for, and what it does.
QComboBox* makeChoiceBox(std::initializer_list<std::pair<QString, QString>> choices, const QString& toolTip) {
  auto* box = new QComboBox;
  for (const auto& [text, value] : choices) box->addItem(text, value);
  box->setToolTip(toolTip);
  return box;
}

}  // namespace

ChatSettingsPanel::ChatSettingsPanel(QWidget* parent)
    : QWidget(parent),
      m_systemPrompt(new QPlainTextEdit),
      m_temperature(makeDoubleBox(0.0, 2.0, 0.05, 2, tr("0 always picks the most likely token (greedy)."))),
      m_topK(makeIntBox(0, 1000, tr("off"), tr("Sample only among the k most likely tokens."))),
      m_topP(makeDoubleBox(0.0, 1.0, 0.01, 2,
                           tr("Sample among the most likely tokens whose probabilities add up to p; 1 is off."))),
      m_minP(makeDoubleBox(0.0, 1.0, 0.01, 2,
                           tr("Drop tokens less likely than this fraction of the most likely one; 0 is off."))),
      m_repeatPenalty(
          makeDoubleBox(0.5, 2.0, 0.01, 2, tr("Above 1 makes tokens of the last 64 less likely to repeat; 1 is off."))),
      m_seed(
          makeIntBox(-1, std::numeric_limits<int>::max(), tr("random"),
                     tr("The same seed with the same settings gives the same reply; -1 draws a new one each time."))),
      m_maxTokens(
          makeIntBox(0, 32768, tr("no limit"), tr("The reply stops after this many tokens; 0 lets the model finish."))),
      m_replyFormat(
          makeChoiceBox({{tr("Text"), QStringLiteral("text")},
                         {tr("JSON object"), QStringLiteral("json_object")},
                         {tr("JSON schema"), QStringLiteral("json_schema")},
                         {tr("Regex"), QStringLiteral("regex")}},
                        tr("JSON object and JSON schema hold every reply to valid JSON, token by token "
                           "(OpenAI's response_format); the reply ends when the value is closed. Regex holds the "
                           "reply's whole text to a regular expression (vLLM's guided_regex)."))),
      m_jsonSchema(new QPlainTextEdit),
      m_regex(new QLineEdit),
      m_schemaStatus(new QLabel),
      m_template(new QComboBox),
      m_thinking(makeChoiceBox(
          {{tr("Model default"), QString()}, {tr("On"), QStringLiteral("on")}, {tr("Off"), QStringLiteral("off")}},
          tr("Whether the model reasons before answering, for templates that read it (Qwen3, Qwen3.5, SmolLM3, "
             "GLM, Gemma 4: enable_thinking, as vLLM and llama-server pass it). Off opens the reply with an empty "
             "think block where the template does."))),
      m_reasoningEffort(makeChoiceBox({{tr("Model default"), QString()},
                                       {tr("Low"), QStringLiteral("low")},
                                       {tr("Medium"), QStringLiteral("medium")},
                                       {tr("High"), QStringLiteral("high")}},
                                      tr("How long the model reasons, for templates that read it (gpt-oss's "
                                         "\"Reasoning:\" line; OpenAI's reasoning_effort)."))) {
  m_regex->setObjectName(QStringLiteral("regexEdit"));
  m_regex->setPlaceholderText(tr("(yes|no), because .{1,80}\\."));
  m_regex->setFont(QFontDatabase::systemFont(QFontDatabase::FixedFont));
  m_jsonSchema->setObjectName(QStringLiteral("jsonSchemaEdit"));
  m_jsonSchema->setPlaceholderText(
      QStringLiteral(R"({"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]})"));
  m_jsonSchema->setTabChangesFocus(true);
  m_jsonSchema->setLineWrapMode(QPlainTextEdit::NoWrap);  // a schema reads as code
  m_jsonSchema->setFont(QFontDatabase::systemFont(QFontDatabase::FixedFont));
  m_jsonSchema->setFixedHeight(m_jsonSchema->fontMetrics().lineSpacing() * 9 + 12);
  m_schemaStatus->setWordWrap(true);
  m_schemaStatus->setTextInteractionFlags(Qt::TextSelectableByMouse);
  m_systemPrompt->setObjectName(QStringLiteral("systemPromptEdit"));
  m_systemPrompt->setPlaceholderText(tr("Optional instructions sent before the conversation"));
  m_systemPrompt->setTabChangesFocus(true);
  m_systemPrompt->setFixedHeight(m_systemPrompt->fontMetrics().lineSpacing() * 5 + 12);
  m_template->setToolTip(
      tr("How the conversation is written for this model. Auto follows the model's own "
         "template; the choice is remembered per model."));

  auto* form = new QFormLayout;
  form->setFieldGrowthPolicy(QFormLayout::AllNonFixedFieldsGrow);
  form->addRow(tr("Temperature"), m_temperature);
  form->addRow(tr("Top-k"), m_topK);
  form->addRow(tr("Top-p"), m_topP);
  form->addRow(tr("Min-p"), m_minP);
  form->addRow(tr("Repeat penalty"), m_repeatPenalty);
  form->addRow(tr("Seed"), m_seed);
  form->addRow(tr("Max tokens"), m_maxTokens);

  auto* formatForm = new QFormLayout;
  formatForm->setFieldGrowthPolicy(QFormLayout::AllNonFixedFieldsGrow);
  formatForm->addRow(tr("Reply format"), m_replyFormat);

  auto* resetButton = new QPushButton(tr("Reset to Defaults"));
  connect(resetButton, &QPushButton::clicked, this, &ChatSettingsPanel::resetSampling);

  auto* templateForm = new QFormLayout;
  templateForm->setFieldGrowthPolicy(QFormLayout::AllNonFixedFieldsGrow);
  templateForm->addRow(tr("Chat template"), m_template);
  templateForm->addRow(tr("Thinking"), m_thinking);
  templateForm->addRow(tr("Reasoning effort"), m_reasoningEffort);

  auto heading = [](const QString& text) {
    auto* label = new QLabel(text);
    QFont f = label->font();
    f.setBold(true);
    label->setFont(f);
    return label;
  };
  auto* layout = new QVBoxLayout(this);
  layout->addWidget(heading(tr("System prompt")));
  layout->addWidget(m_systemPrompt);
  layout->addSpacing(8);
  layout->addWidget(heading(tr("Sampling")));
  layout->addLayout(form);
  layout->addWidget(resetButton, 0, Qt::AlignRight);
  layout->addSpacing(8);
  layout->addWidget(heading(tr("Structured output")));
  layout->addLayout(formatForm);
  layout->addWidget(m_jsonSchema);
  layout->addWidget(m_regex);
  layout->addWidget(m_schemaStatus);
  layout->addSpacing(8);
  layout->addWidget(heading(tr("Model")));
  layout->addLayout(templateForm);
  layout->addStretch(1);

  setValues({}, {});
  setTemplateChoice({}, QStringLiteral("auto"));

  auto edited = [this] {
    if (!m_isSettingValues) emit settingsEdited();
  };
  connect(m_systemPrompt, &QPlainTextEdit::textChanged, this, edited);
  for (QDoubleSpinBox* box : {m_temperature, m_topP, m_minP, m_repeatPenalty}) {
    connect(box, &QDoubleSpinBox::valueChanged, this, edited);
  }
  for (QSpinBox* box : {m_topK, m_seed, m_maxTokens}) connect(box, &QSpinBox::valueChanged, this, edited);
  connect(m_seed, &QSpinBox::valueChanged, this, [this] {
    if (!m_isSettingValues) m_seedBeyondBox = 0;  // the user chose another seed
  });
  connect(m_template, &QComboBox::activated, this, [this] { emit templateOverrideEdited(templateOverride()); });
  for (QComboBox* box : {m_thinking, m_reasoningEffort}) connect(box, &QComboBox::currentIndexChanged, this, edited);
  connect(m_replyFormat, &QComboBox::currentIndexChanged, this, [this, edited] {
    showReplyFormat();
    edited();
  });
  connect(m_jsonSchema, &QPlainTextEdit::textChanged, this, [this, edited] {
    showReplyFormat();
    edited();
  });
  connect(m_regex, &QLineEdit::textChanged, this, [this, edited] {
    showReplyFormat();
    edited();
  });
}

void ChatSettingsPanel::showReplyFormat() {
  const QString format = m_replyFormat->currentData().toString();
  const bool isSchema = format == QLatin1String("json_schema");
  const bool isRegex = format == QLatin1String("regex");
  m_jsonSchema->setVisible(isSchema);
  m_regex->setVisible(isRegex);
  m_schemaStatus->setVisible(isSchema || isRegex);
  if (!isSchema && !isRegex) return;
  // The same compiler the engine uses, so what is shown here is what a reply will meet.
  const auto grammar = sampling().replyGrammar();
  if (grammar) {
    m_schemaStatus->setText(isSchema ? tr("Replies will fit this schema.") : tr("Replies will match this regex."));
    m_schemaStatus->setStyleSheet(QString());
  } else {
    m_schemaStatus->setText(QString::fromStdString(grammar.error_message()));
    m_schemaStatus->setStyleSheet(QStringLiteral("color: #c62828;"));
  }
}

void ChatSettingsPanel::setValues(const QString& systemPrompt, const SamplingSettings& s) {
  m_isSettingValues = true;
  if (m_systemPrompt->toPlainText() != systemPrompt) m_systemPrompt->setPlainText(systemPrompt);
  m_temperature->setValue(s.temperature);
  m_topK->setValue(s.topK);
  m_topP->setValue(s.topP);
  m_minP->setValue(s.minP);
  m_repeatPenalty->setValue(s.repeatPenalty);
  m_seed->setValue(int(qBound(qint64{-1}, s.seed, qint64{std::numeric_limits<int>::max()})));
  m_seedBeyondBox = s.seed > std::numeric_limits<int>::max() ? s.seed : 0;
  m_maxTokens->setValue(qMax(0, s.maxTokens));
  if (m_jsonSchema->toPlainText() != s.jsonSchema) m_jsonSchema->setPlainText(s.jsonSchema);
  if (m_regex->text() != s.regex) m_regex->setText(s.regex);
  const int format = m_replyFormat->findData(s.replyFormat);
  m_replyFormat->setCurrentIndex(format >= 0 ? format : 0);
  m_thinking->setCurrentIndex(qMax(0, m_thinking->findData(s.thinking)));
  m_reasoningEffort->setCurrentIndex(qMax(0, m_reasoningEffort->findData(s.reasoningEffort)));
  showReplyFormat();
  m_isSettingValues = false;
}

QString ChatSettingsPanel::systemPrompt() const { return m_systemPrompt->toPlainText(); }

SamplingSettings ChatSettingsPanel::sampling() const {
  SamplingSettings s;
  s.temperature = m_temperature->value();
  s.topK = m_topK->value();
  s.topP = m_topP->value();
  s.minP = m_minP->value();
  s.repeatPenalty = m_repeatPenalty->value();
  s.seed =
      m_seedBeyondBox != 0 && m_seed->value() == std::numeric_limits<int>::max() ? m_seedBeyondBox : m_seed->value();
  s.maxTokens = m_maxTokens->value();
  s.replyFormat = m_replyFormat->currentData().toString();
  s.jsonSchema = m_jsonSchema->toPlainText();
  s.regex = m_regex->text();
  s.thinking = m_thinking->currentData().toString();
  s.reasoningEffort = m_reasoningEffort->currentData().toString();
  return s;
}

void ChatSettingsPanel::resetSampling() {
  // The reply format, schema and thinking controls are not sampling: they stay.
  SamplingSettings defaults;
  defaults.thinking = m_thinking->currentData().toString();
  defaults.reasoningEffort = m_reasoningEffort->currentData().toString();
  defaults.replyFormat = m_replyFormat->currentData().toString();
  defaults.jsonSchema = m_jsonSchema->toPlainText();
  defaults.regex = m_regex->text();
  setValues(systemPrompt(), defaults);
  emit settingsEdited();
}

void ChatSettingsPanel::setTemplateChoice(const QString& detected, const QString& current) {
  m_template->clear();
  m_template->addItem(detected.isEmpty() ? tr("Auto") : tr("Auto (%1)").arg(chatTemplateDisplayName(detected)),
                      QStringLiteral("auto"));
  for (const QString& name : chatTemplateFamilyNames()) m_template->addItem(chatTemplateDisplayName(name), name);
  const int row = m_template->findData(current);
  m_template->setCurrentIndex(row >= 0 ? row : 0);
  m_template->setEnabled(!detected.isEmpty());
}

QString ChatSettingsPanel::templateOverride() const { return m_template->currentData().toString(); }

}  // namespace iwb::ui
