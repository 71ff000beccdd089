// The Chat tab: saved conversations on the left, the messages with live streaming in the
// middle (input, Send / Stop / Regenerate, editing an earlier message), and the system prompt,
// sampling settings and chat template on the right. Talks to the engine only through the
// EngineController's queued signals (or to a connected server through RemoteChat, chosen in
// "Runs on") and to SQLite through the ConversationStore; every finished message is written
// before the next thing happens.
#pragma once

#include "worker/generation_values.h"
#include "iwb/engine/status.h"

#include <QPointer>

#include <optional>
#include <QWidget>

class QComboBox;
class QLabel;
class QMessageBox;
class QProgressBar;
class QPushButton;
class QSplitter;
class QTimer;
class QToolButton;

namespace iwb::ui {

class ChatInput;
class ChatSettingsPanel;
class ContextMeter;
class ConversationList;
class ConversationStore;
class EngineController;
class MessageBar;
class MessageListModel;
class MessageView;
class RemoteChat;
class RemoteEndpoints;
struct RemoteEndpointInfo;

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
  ContextMeter* contextMeter() const { return m_contextMeter; }

  // Remote endpoints (chat_panel_remote.cpp). With a registry set, "Runs on" offers the local
  // engine and every model of every connected endpoint; not owned, must outlive the panel.
  void setRemoteEndpoints(RemoteEndpoints* endpoints);
  QComboBox* runsOnBox() const { return m_runsOn; }
  RemoteChat* remoteChat() const { return m_remoteChat; }
  // Chooses where the next reply runs: empty `baseUrl` for the local engine. False when that
  // endpoint or model is not connected.
  bool setRunsOn(const QString& baseUrl, const QString& model = {});
  // The endpoint chosen in "Runs on" (null: the local engine).
  QString runsOnBaseUrl() const;
  QString runsOnModel() const;
  // The question shown when a message would overflow the context (null when none is open).
  QMessageBox* overflowQuestion() const;
  // The user chose to leave the oldest turns of this conversation out of the prompt.
  bool isShorteningToFit() const { return m_isShorteningToFit; }
  // View > Token Probabilities: replies ask the engine for each token's probability and its
  // kNumTopAlternatives most likely alternatives, and show them coloured by confidence with
  // the alternatives on hover. Off: nothing is computed.
  static constexpr int kNumTopAlternatives = 5;
  bool showsTokenProbabilities() const { return m_showsTokenProbabilities; }
  void setShowsTokenProbabilities(bool isShown);

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
  // Writes conversation `id` to `path`: JSON when the name ends in .json, else Markdown
  // (chat_panel_export.cpp). Errors are shown and returned.
  iwb::Status exportConversation(qint64 id, const QString& path);
  // Reads a JSON export into a new conversation, selects it and returns its id.
  iwb::Result<qint64> importConversation(const QString& path);
  // The same behind file dialogs.
  void exportConversationWithDialog(qint64 id);
  void importConversationWithDialog();

 signals:
  // A reply ended (finished, stopped or failed) and was saved. For tests and the status bar.
  void replyFinished(qint64 messageId, const iwb::ui::GenerationStats& stats);
  void replyFailed(const QString& message);
  void statusMessage(const QString& text);
  // The context meter was updated with a count that matches what is on screen.
  void contextCounted(int numTokens, int contextLength);

 private:
  struct Streaming {
    quint64 requestId = 0;
    qint64 conversationId = 0;
    qint64 messageId = 0;
    QString text;
    bool isRemote = false;
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
  // Context meter (chat_panel_context.cpp): something it counts changed; ask the worker again.
  void contextChanged();
  void requestTokenCount();
  void handleTokensCounted(quint64 tag, int numTokens, int contextLength, int numTurnsLeftOut);
  // The conversation as it would be sent now (with the input box's text as the last turn).
  GenerationInput pendingInput(const QString& draft) const;
  // Before sending: true when it may go now; false when it waits for a count or the user's
  // answer to the overflow question (send() is called again after).
  bool isReadyToSend(const QString& text);
  void askAboutOverflow(const QString& text);
  // Remote endpoints (chat_panel_remote.cpp).
  bool isRemoteChosen() const;
  // The local engine has a model, or a remote endpoint is chosen.
  bool isTargetReady() const;
  void rebuildRunsOn();
  void runsOnChanged();
  // The connected endpoint chosen in "Runs on"; null for the local engine or one since removed.
  const RemoteEndpointInfo* chosenEndpoint() const;

  EngineController* m_engine;
  ConversationStore* m_store;
  qint64 m_conversationId = 0;
  int m_editRow = -1;
  Streaming m_streaming;
  bool m_isNextTokenDraft = false;
  std::optional<TokenProbability> m_nextTokenProbability;  // arrives right before its tokensReady
  bool m_showsTokenProbabilities = false;  // the engine said the next token of the reply is an accepted draft
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
  ContextMeter* m_contextMeter;
  QLabel* m_runsOnLabel;
  QComboBox* m_runsOn;
  RemoteEndpoints* m_remoteEndpoints = nullptr;
  RemoteChat* m_remoteChat;
  QTimer* m_countTimer;          // debounces counting while the user types
  QPointer<QObject> m_overflowQuestion;  // a QMessageBox
  quint64 m_countTag = 0;        // the count asked for last
  int m_contextRevision = 0;     // bumps with every change of what the meter counts
  int m_countRevision = -1;      // the revision m_countTag counts
  int m_countedRevision = -1;    // the revision the meter shows
  bool m_isSendPending = false;  // send() waits for a count
  bool m_isShorteningToFit = false;
};

}  // namespace iwb::ui
