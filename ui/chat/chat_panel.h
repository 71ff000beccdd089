// The Chat tab: saved conversations on the left, the messages with live streaming in the
// middle (input, Send / Stop / Regenerate, editing an earlier message), and the system prompt,
// sampling settings and chat template on the right. Talks to the engine only through the
// EngineController's queued signals and to SQLite through the ConversationStore; every
// finished message is written before the next thing happens.
#pragma once

#include "worker/generation_values.h"

#include <QPointer>
#include <QWidget>

class QLabel;
class QProgressBar;
class QPushButton;
class QSplitter;
class QTimer;
class QToolButton;

namespace iwb::ui {

class ChatInput;
class ChatSettingsPanel;
class ConversationList;
class ConversationStore;
class EngineController;
class MessageBar;
class MessageListModel;
class MessageView;

class ChatPanel : public QWidget {
  Q_OBJECT

 public:
  // `store` may be null (the history could not be opened): chatting still works, unsaved.
  // Neither is owned; both must outlive the panel.
  ChatPanel(EngineController* engine, ConversationStore* store, QWidget* parent = nullptr);
  ~ChatPanel() override;

  qint64 currentConversation() const { return m_conversationId; }
  bool isGenerating() const;
  // The row being edited, -1 when none.
  int editingRow() const { return m_editRow; }

  ConversationList* conversationList() const { return m_conversations; }
  MessageListModel* messageModel() const { return m_messages; }
  MessageView* messageView() const { return m_view; }
  ChatInput* input() const { return m_input; }
  ChatSettingsPanel* settingsPanel() const { return m_settings; }
  MessageBar* messageBar() const { return m_messageBar; }
  QProgressBar* loadProgressBar() const { return m_loadProgress; }
  QLabel* modelLabel() const { return m_modelLabel; }
  QPushButton* sendButton() const { return m_sendButton; }
  QPushButton* stopButton() const { return m_stopButton; }
  QPushButton* regenerateButton() const { return m_regenerateButton; }

  // The title of a conversation before its first message names it.
  static QString defaultConversationTitle();
  // QSettings key under which the chat-template choice for `modelPath` is kept.
  static QString templateSettingsKey(const QString& modelPath);

 public slots:
  // Sends the input box's text (replacing the edited message and what follows it, when
  // editing) and starts the reply.
  void send();
  void stop();
  // Replaces the last reply with a new one (or answers a last user message left unanswered).
  void regenerate();
  void newConversation();
  bool selectConversation(qint64 id);
  void renameConversation(qint64 id, const QString& title);
  void deleteConversation(qint64 id);
  // Puts the user message of `row` into the input box; sending then continues from there.
  void beginEdit(int row);
  void cancelEdit();

 signals:
  // A reply ended (finished, stopped or failed) and was saved. For tests and the status bar.
  void replyFinished(qint64 messageId, const iwb::ui::GenerationStats& stats);
  void replyFailed(const QString& message);
  void statusMessage(const QString& text);

 private:
  struct Streaming {
    quint64 requestId = 0;
    qint64 conversationId = 0;
    qint64 messageId = 0;
    QString text;
  };

  void buildLayout();
  void connectEngine();
  void reloadConversationList();
  void showConversation(qint64 id);
  void startReply();
  void saveSettingsNow();
  void checkpointReply();
  void updateActions();
  void updateModelLabel();
  void showError(const QString& title, const QString& detail);
  void showMessageContextMenu(const QPoint& pos);
  void handleTokens(quint64 requestId, const QString& text);
  void handleFinished(quint64 requestId, const GenerationStats& stats);
  void handleFailed(quint64 requestId, const QString& message);
  void handleModelLoaded(const LoadedModel& model);

  EngineController* m_engine;
  ConversationStore* m_store;
  qint64 m_conversationId = 0;
  int m_editRow = -1;
  Streaming m_streaming;
  bool m_isNextTokenDraft = false;  // the engine said the next token of the reply is an accepted draft
  qint64 m_nextUnsavedId = -1;  // negative ids keep unsaved messages apart (no store)

  ConversationList* m_conversations;
  MessageListModel* m_messages;
  MessageView* m_view;
  ChatInput* m_input;
  ChatSettingsPanel* m_settings;
  MessageBar* m_messageBar;
  QLabel* m_modelLabel;
  QProgressBar* m_loadProgress;
  QLabel* m_editBanner;
  QToolButton* m_cancelEditButton;
  QPushButton* m_sendButton;
  QPushButton* m_stopButton;
  QPushButton* m_regenerateButton;
  QToolButton* m_settingsToggle;
  QSplitter* m_splitter;
  QTimer* m_settingsSaveTimer;   // debounces system-prompt typing
  QTimer* m_checkpointTimer;     // saves a streaming reply's text now and then
};

}  // namespace iwb::ui
