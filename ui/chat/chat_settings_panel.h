// The chat's side panel: the conversation's system prompt, sampling settings and reply format
// (text, a JSON object, or JSON that fits a schema), and the model's chat-template override.
// It only edits values; the chat panel decides where they are saved (the conversation row, or
// the model's QSettings group for the template).
#pragma once

#include "worker/generation_values.h"

#include <QWidget>

class QComboBox;
class QDoubleSpinBox;
class QLabel;
class QLineEdit;
class QPlainTextEdit;
class QSpinBox;

namespace iwb::ui {

class ChatSettingsPanel : public QWidget {
  Q_OBJECT

 public:
  explicit ChatSettingsPanel(QWidget* parent = nullptr);

  // Shows the values without emitting settingsEdited.
  void setValues(const QString& systemPrompt, const SamplingSettings& sampling);
  QString systemPrompt() const;
  SamplingSettings sampling() const;

  // `detected` is the family the model's own template was recognised as (shown in "Auto");
  // `current` is "auto" or a family name. Empty `detected`: no model, the picker is disabled.
  void setTemplateChoice(const QString& detected, const QString& current);
  QString templateOverride() const;

  QPlainTextEdit* systemPromptEdit() const { return m_systemPrompt; }
  QDoubleSpinBox* temperatureBox() const { return m_temperature; }
  QSpinBox* maxTokensBox() const { return m_maxTokens; }
  QSpinBox* seedBox() const { return m_seed; }
  QComboBox* templateBox() const { return m_template; }
  QComboBox* thinkingBox() const { return m_thinking; }
  QComboBox* reasoningEffortBox() const { return m_reasoningEffort; }
  QComboBox* replyFormatBox() const { return m_replyFormat; }
  QPlainTextEdit* jsonSchemaEdit() const { return m_jsonSchema; }
  QLineEdit* regexEdit() const { return m_regex; }
  // Under the schema: whether it compiles, or what is wrong with it.
  QLabel* schemaStatusLabel() const { return m_schemaStatus; }

 signals:
  // The user changed the system prompt or a sampling value.
  void settingsEdited();
  void templateOverrideEdited(const QString& familyOrAuto);

 private:
  void resetSampling();
  void showReplyFormat();  // the schema editor only for "JSON schema", and its status

  QPlainTextEdit* m_systemPrompt;
  QDoubleSpinBox* m_temperature;
  QSpinBox* m_topK;
  QDoubleSpinBox* m_topP;
  QDoubleSpinBox* m_minP;
  QDoubleSpinBox* m_repeatPenalty;
  QSpinBox* m_seed;
  // A stored seed beyond the box's int range (an imported conversation, a hand-edited row):
  // kept as it is while the box shows its maximum, so selecting the conversation does not
  // rewrite it; 0 when none. Editing the seed forgets it.
  qint64 m_seedBeyondBox = 0;
  QSpinBox* m_maxTokens;
  QComboBox* m_replyFormat;
  QPlainTextEdit* m_jsonSchema;
  QLineEdit* m_regex;
  QLabel* m_schemaStatus;
  QComboBox* m_template;
  QComboBox* m_thinking;
  QComboBox* m_reasoningEffort;
  bool m_isSettingValues = false;
};

}  // namespace iwb::ui
