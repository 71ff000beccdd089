// ChatPanel: layout, the model's state, conversation management against the store, and the
// settings that go with a conversation (the reply lifecycle is in chat_panel_reply.cpp).
#include "chat/chat_panel.h"

#include "chat/chat_input.h"
#include "chat/chat_settings_panel.h"
#include "chat/context_meter.h"
#include "chat/conversation_list.h"
#include "chat/message_list_model.h"
#include "chat/message_view.h"
#include "remote/remote_chat.h"
#include "remote/remote_endpoints.h"
#include "settings/device_choice.h"
#include "store/conversation_store.h"
#include "widgets/message_bar.h"
#include "worker/engine_controller.h"

#include <QComboBox>
#include <QCryptographicHash>
#include <QFileInfo>
#include <QHBoxLayout>
#include <QJsonDocument>
#include <QLabel>
#include <QProgressBar>
#include <QPushButton>
#include <QScrollArea>
#include <QSettings>
#include <QShortcut>
#include <QSplitter>
#include <QTimer>
#include <QToolButton>
#include <QVBoxLayout>

namespace iwb::ui {
namespace {

const char* const kLastConversationKey = "chat/lastConversation";
const char* const kDefaultSamplingKey = "chat/defaultSampling";
const char* const kDefaultSystemPromptKey = "chat/defaultSystemPrompt";
const char* const kSplitterKey = "chat/splitter";
const char* const kSettingsVisibleKey = "chat/settingsVisible";
constexpr int kCheckpointIntervalMs = 2000;

}  // namespace

QString ChatPanel::defaultConversationTitle() { return tr("New chat"); }

QString ChatPanel::templateSettingsKey(const QString& modelPath) {
  // Paths hold slashes, which QSettings reads as groups; a hash names the model instead.
  const QByteArray hash =
      QCryptographicHash::hash(QFileInfo(modelPath).absoluteFilePath().toUtf8(), QCryptographicHash::Sha1)
          .toHex()
          .left(16);
  return QStringLiteral("models/%1/chatTemplate").arg(QString::fromLatin1(hash));
}

ChatPanel::ChatPanel(EngineController* engine, ConversationStore* store, QWidget* parent)
    : QWidget(parent),
      m_engine(engine),
      m_store(store),
      m_conversations(new ConversationList),
      m_messages(new MessageListModel(this)),
      m_view(new MessageView),
      m_input(new ChatInput),
      m_settings(new ChatSettingsPanel),
      m_messageBar(new MessageBar),
      m_modelLabel(new QLabel),
      m_loadProgress(new QProgressBar),
      m_editBanner(new QLabel),
      m_cancelEditButton(new QToolButton),
      m_sendButton(new QPushButton(tr("Send"))),
      m_stopButton(new QPushButton(tr("Stop"))),
      m_regenerateButton(new QPushButton(tr("Regenerate"))),
      m_settingsToggle(new QToolButton),
      m_splitter(new QSplitter(Qt::Horizontal)),
      m_settingsSaveTimer(new QTimer(this)),
      m_checkpointTimer(new QTimer(this)),
      m_contextMeter(new ContextMeter),
      m_runsOnLabel(new QLabel(tr("Runs on:"))),
      m_runsOn(new QComboBox),
      m_remoteChat(new RemoteChat(this)),
      m_countTimer(new QTimer(this)) {
  buildLayout();
  connectEngine();

  const QSettings settings;
  m_settings->setValues(
      settings.value(QLatin1String(kDefaultSystemPromptKey)).toString(),
      SamplingSettings::fromJson(
          QJsonDocument::fromJson(settings.value(QLatin1String(kDefaultSamplingKey)).toByteArray()).object()));
  if (!m_store) {
    m_conversations->setEnabled(false);
    m_messageBar->showMessage(MessageBar::Kind::Information, tr("Conversations are not saved"),
                              tr("The conversation history could not be opened, so this session's chats are kept "
                                 "only until the program ends."));
  }
  reloadConversationList();
  const qint64 last = settings.value(QLatin1String(kLastConversationKey)).toLongLong();
  if (!selectConversation(last) && m_conversations->count() > 0) selectConversation(m_conversations->conversationAt(0));
  if (m_engine->hasModel()) handleModelLoaded(m_engine->model());
  updateModelLabel();
  updateActions();
}

ChatPanel::~ChatPanel() {
  saveSettingsNow();
  // A reply still streaming is saved as it stands; the engine side is stopped by its owner.
  if (m_streaming.messageId != 0) checkpointReply();
  QSettings settings;
  settings.setValue(QLatin1String(kSplitterKey), m_splitter->saveState());
  settings.setValue(QLatin1String(kSettingsVisibleKey), m_settingsToggle->isChecked());
}

void ChatPanel::buildLayout() {
  m_view->setModel(m_messages);
  m_view->setObjectName(QStringLiteral("messageView"));
  m_view->setContextMenuPolicy(Qt::CustomContextMenu);
  m_input->setObjectName(QStringLiteral("chatInput"));
  m_input->setPlaceholderText(tr("Message the model — Enter sends, Shift+Enter starts a new line"));
  m_sendButton->setObjectName(QStringLiteral("sendButton"));
  m_sendButton->setDefault(true);
  m_stopButton->setObjectName(QStringLiteral("stopButton"));
  m_stopButton->setToolTip(tr("Stop the reply; what was generated so far is kept (Esc)"));
  m_regenerateButton->setObjectName(QStringLiteral("regenerateButton"));
  m_regenerateButton->setToolTip(tr("Replace the last reply with a new one"));
  m_modelLabel->setObjectName(QStringLiteral("chatModelLabel"));
  m_modelLabel->setTextFormat(Qt::PlainText);
  m_loadProgress->setObjectName(QStringLiteral("modelLoadProgress"));
  m_loadProgress->setRange(0, 1000);
  m_loadProgress->setMaximumWidth(260);
  m_loadProgress->setTextVisible(true);
  m_loadProgress->hide();
  m_editBanner->setTextFormat(Qt::PlainText);
  m_editBanner->setWordWrap(true);
  m_cancelEditButton->setText(tr("Cancel Edit"));
  m_cancelEditButton->setAutoRaise(true);
  m_settingsToggle->setText(tr("Settings"));
  m_settingsToggle->setCheckable(true);
  m_settingsToggle->setToolTip(tr("Show or hide the system prompt and sampling settings"));

  auto* header = new QHBoxLayout;
  header->setContentsMargins(10, 6, 10, 6);
  m_runsOn->setObjectName(QStringLiteral("runsOnBox"));
  m_runsOn->setToolTip(
      tr("Where replies are generated: this program's engine, or a model of a server connected "
         "with File › Connect to Server…"));
  m_runsOn->setSizeAdjustPolicy(QComboBox::AdjustToContents);
  m_runsOnLabel->setBuddy(m_runsOn);
  m_runsOnLabel->hide();  // until a server is connected
  m_runsOn->hide();
  header->addWidget(m_runsOnLabel);
  header->addWidget(m_runsOn);
  header->addWidget(m_modelLabel, 1);
  header->addWidget(m_loadProgress);
  header->addWidget(m_settingsToggle);

  auto* editRow = new QHBoxLayout;
  editRow->addWidget(m_editBanner, 1);
  editRow->addWidget(m_cancelEditButton);
  auto* editWidget = new QWidget;
  editWidget->setObjectName(QStringLiteral("editBanner"));
  editWidget->setLayout(editRow);
  editWidget->hide();

  auto* buttons = new QHBoxLayout;
  buttons->addWidget(m_regenerateButton);
  buttons->addSpacing(8);
  buttons->addWidget(m_contextMeter, 1);
  buttons->addWidget(m_stopButton);
  buttons->addWidget(m_sendButton);

  auto* center = new QWidget;
  auto* centerLayout = new QVBoxLayout(center);
  centerLayout->setContentsMargins(0, 0, 0, 6);
  centerLayout->setSpacing(4);
  centerLayout->addLayout(header);
  centerLayout->addWidget(m_messageBar);
  centerLayout->addWidget(m_view, 1);
  centerLayout->addWidget(editWidget);
  auto* inputArea = new QVBoxLayout;
  inputArea->setContentsMargins(10, 0, 10, 0);
  inputArea->addWidget(m_input);
  inputArea->addLayout(buttons);
  centerLayout->addLayout(inputArea);

  auto* settingsScroll = new QScrollArea;
  settingsScroll->setObjectName(QStringLiteral("chatSettingsArea"));
  settingsScroll->setWidget(m_settings);
  settingsScroll->setWidgetResizable(true);
  settingsScroll->setFrameShape(QFrame::NoFrame);
  settingsScroll->setMinimumWidth(240);

  m_splitter->addWidget(m_conversations);
  m_splitter->addWidget(center);
  m_splitter->addWidget(settingsScroll);
  m_splitter->setStretchFactor(0, 0);
  m_splitter->setStretchFactor(1, 1);
  m_splitter->setStretchFactor(2, 0);
  m_splitter->setCollapsible(1, false);
  m_splitter->setSizes({220, 760, 280});
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->addWidget(m_splitter);

  const QSettings settings;
  m_splitter->restoreState(settings.value(QLatin1String(kSplitterKey)).toByteArray());
  const bool showSettings = settings.value(QLatin1String(kSettingsVisibleKey), true).toBool();
  m_settingsToggle->setChecked(showSettings);
  settingsScroll->setVisible(showSettings);
  connect(m_settingsToggle, &QToolButton::toggled, settingsScroll, &QWidget::setVisible);

  m_settingsSaveTimer->setSingleShot(true);
  m_settingsSaveTimer->setInterval(500);
  connect(m_settingsSaveTimer, &QTimer::timeout, this, &ChatPanel::saveSettingsNow);
  connect(m_settings, &ChatSettingsPanel::settingsEdited, m_settingsSaveTimer, qOverload<>(&QTimer::start));
  connect(m_settings, &ChatSettingsPanel::templateOverrideEdited, this, [this](const QString& choice) {
    if (m_engine->hasModel()) QSettings().setValue(templateSettingsKey(m_engine->model().path), choice);
  });
  m_checkpointTimer->setInterval(kCheckpointIntervalMs);
  connect(m_checkpointTimer, &QTimer::timeout, this, &ChatPanel::checkpointReply);

  connect(m_input, &ChatInput::submitted, this, &ChatPanel::send);
  connect(m_input, &ChatInput::cancelled, this, [this] { isGenerating() ? stop() : cancelEdit(); });
  connect(m_input, &QPlainTextEdit::textChanged, this, &ChatPanel::updateActions);
  // The context meter counts the conversation, the text being typed and the system prompt.
  m_countTimer->setSingleShot(true);
  m_countTimer->setInterval(250);
  connect(m_countTimer, &QTimer::timeout, this, &ChatPanel::requestTokenCount);
  connect(m_input, &QPlainTextEdit::textChanged, this, &ChatPanel::contextChanged);
  connect(m_settings, &ChatSettingsPanel::settingsEdited, this, &ChatPanel::contextChanged);
  connect(m_settings, &ChatSettingsPanel::templateOverrideEdited, this, &ChatPanel::contextChanged);
  connect(m_messages, &QAbstractItemModel::rowsInserted, this, &ChatPanel::contextChanged);
  connect(m_messages, &QAbstractItemModel::rowsRemoved, this, &ChatPanel::contextChanged);
  connect(m_messages, &QAbstractItemModel::modelReset, this, [this] {
    m_isShorteningToFit = false;  // another conversation: ask again
    contextChanged();
  });
  connect(m_sendButton, &QPushButton::clicked, this, &ChatPanel::send);
  connect(m_stopButton, &QPushButton::clicked, this, &ChatPanel::stop);
  connect(m_regenerateButton, &QPushButton::clicked, this, &ChatPanel::regenerate);
  connect(m_cancelEditButton, &QToolButton::clicked, this, &ChatPanel::cancelEdit);
  connect(m_view, &QAbstractItemView::doubleClicked, this,
          [this](const QModelIndex& index) { beginEdit(index.row()); });
  connect(m_view, &QWidget::customContextMenuRequested, this, &ChatPanel::showMessageContextMenu);
  auto* newShortcut = new QShortcut(QKeySequence::New, this);
  connect(newShortcut, &QShortcut::activated, this, &ChatPanel::newConversation);

  connect(m_conversations, &ConversationList::newConversationRequested, this, &ChatPanel::newConversation);
  connect(m_conversations, &ConversationList::conversationSelected, this,
          [this](qint64 id) { selectConversation(id); });
  connect(m_conversations, &ConversationList::renameRequested, this, &ChatPanel::renameConversation);
  connect(m_conversations, &ConversationList::deleteRequested, this, &ChatPanel::deleteConversation);
  connect(m_conversations, &ConversationList::exportRequested, this, &ChatPanel::exportConversationWithDialog);
  connect(m_conversations, &ConversationList::importRequested, this, &ChatPanel::importConversationWithDialog);
}

void ChatPanel::connectEngine() {
  connect(m_engine, &EngineController::modelLoadStarted, this, [this](const QString& path) {
    m_loadProgress->setValue(0);
    m_loadProgress->setFormat(tr("Loading %p%"));
    m_loadProgress->show();
    m_modelLabel->setText(tr("Loading %1…").arg(QFileInfo(path).fileName()));
    m_settings->setTemplateChoice({}, QStringLiteral("auto"));
    updateActions();
  });
  connect(m_engine, &EngineController::modelLoadProgress, this, [this](double fraction, const QString& stage) {
    m_loadProgress->setValue(int(fraction * 1000));
    m_loadProgress->setToolTip(stage);
  });
  connect(m_engine, &EngineController::modelLoaded, this, &ChatPanel::handleModelLoaded);
  connect(m_engine, &EngineController::modelLoadFailed, this, [this](const QString& path, const QString& message) {
    m_loadProgress->setVisible(m_engine->isLoading());
    showError(tr("%1 cannot be used for chat").arg(QFileInfo(path).fileName()), message);
    updateModelLabel();
    updateActions();
  });
  connect(m_engine, &EngineController::tokensCounted, this, &ChatPanel::handleTokensCounted);
  connect(m_engine, &EngineController::tokenProbabilityReady, this,
          [this](quint64 requestId, const TokenProbability& probability) {
            if (requestId == m_streaming.requestId) m_nextTokenProbability = probability;
          });
  connect(m_engine, &EngineController::promptShortened, this, [this](quint64 requestId, int numTurnsLeftOut) {
    if (requestId != m_streaming.requestId) return;
    emit statusMessage(
        tr("The %n oldest message(s) were left out of the prompt to fit the context.", nullptr, numTurnsLeftOut));
  });
  connect(m_engine, &EngineController::modelUnloaded, this, [this] {
    contextChanged();
    updateModelLabel();
    updateActions();
  });
  connect(m_engine, &EngineController::tokensReady, this, &ChatPanel::handleTokens);
  // Speculative decoding: the flag arrives right before the token's tokensReady.
  connect(m_engine, &EngineController::draftTokensReady, this, [this](quint64 requestId, const QString&, bool isDraft) {
    if (requestId == m_streaming.requestId) m_isNextTokenDraft = isDraft;
  });
  connect(m_engine, &EngineController::generationFinished, this, &ChatPanel::handleFinished);
  connect(m_engine, &EngineController::generationFailed, this, &ChatPanel::handleFailed);
  // After the handlers above: the reply's final text is in the model.
  connect(m_engine, &EngineController::generationFinished, this, &ChatPanel::contextChanged);
  connect(m_engine, &EngineController::generationFailed, this, &ChatPanel::contextChanged);
  // A remote reply arrives through the same handlers (its request ids never meet the engine's).
  connect(m_remoteChat, &RemoteChat::tokensReady, this, &ChatPanel::handleTokens);
  connect(m_remoteChat, &RemoteChat::generationFinished, this, &ChatPanel::handleFinished);
  connect(m_remoteChat, &RemoteChat::generationFailed, this, &ChatPanel::handleFailed);
  connect(m_remoteChat, &RemoteChat::generationFinished, this, &ChatPanel::contextChanged);
  connect(m_remoteChat, &RemoteChat::generationFailed, this, &ChatPanel::contextChanged);
}

void ChatPanel::setShowsTokenProbabilities(bool isShown) {
  m_showsTokenProbabilities = isShown;
  m_view->setShowsTokenProbabilities(isShown);
}

bool ChatPanel::isGenerating() const { return m_streaming.requestId != 0; }

void ChatPanel::handleModelLoaded(const LoadedModel& model) {
  m_loadProgress->setVisible(m_engine->isLoading());
  if (m_messageBar->kind() == MessageBar::Kind::Error) m_messageBar->dismiss();
  const QString choice = QSettings().value(templateSettingsKey(model.path), QStringLiteral("auto")).toString();
  m_settings->setTemplateChoice(model.detectedTemplate, choice);
  contextChanged();
  updateModelLabel();
  updateActions();
}

void ChatPanel::updateModelLabel() {
  if (isRemoteChosen()) {
    const RemoteEndpointInfo* endpoint = chosenEndpoint();
    m_modelLabel->setText(tr("%1 · %2 · streamed over the OpenAI API")
                              .arg(endpoint ? endpoint->displayName : runsOnBaseUrl(), runsOnModel()));
    m_modelLabel->setToolTip(runsOnBaseUrl());
    return;
  }
  if (m_engine->isLoading()) return;  // the loading text stays until the outcome
  if (!m_engine->hasModel()) {
    m_modelLabel->setText(tr("No model loaded — open a GGUF file with File › Open Model…"));
    return;
  }
  const LoadedModel& m = m_engine->model();
  // On a GPU the CPU threads only feed it; the device says where the model runs.
  const QString where = isCudaDeviceId(m.deviceId) ? tr("on %1").arg(m.deviceId) : tr("%1 threads").arg(m.numThreads);
  m_modelLabel->setText(
      tr("%1 · %2 · context %3 tokens · %4").arg(m.name, m.architecture).arg(m.contextLength).arg(where));
  m_modelLabel->setToolTip(m.path);
}

void ChatPanel::updateActions() {
  const bool isReady = isTargetReady();
  const bool generating = isGenerating();
  bool hasUserMessage = false;
  for (int row = 0; row < m_messages->rowCount() && !hasUserMessage; ++row) {
    hasUserMessage = m_messages->item(row).message.role == QLatin1String("user");
  }
  m_sendButton->setEnabled(isReady && !generating && !m_input->toPlainText().trimmed().isEmpty());
  m_stopButton->setEnabled(generating);
  m_regenerateButton->setEnabled(isReady && !generating && hasUserMessage && m_editRow < 0);
  // The reply being written belongs to this conversation: switching or deleting waits.
  m_conversations->setEnabled(m_store != nullptr && !generating);
  m_runsOn->setEnabled(!generating);
  const QString placeholder = isReady ? tr("Message the model — Enter sends, Shift+Enter starts a new line")
                                      : tr("Open a model to chat (File › Open Model…)");
  if (m_input->placeholderText() != placeholder) {
    m_input->setPlaceholderText(placeholder);
    // Qt 6.4's QPlainTextEdit repaints only when the placeholder shows or hides, not when its
    // text changes: the old hint stayed on screen after a model loaded.
    m_input->viewport()->update();
  }
}

void ChatPanel::showError(const QString& title, const QString& detail) {
  m_messageBar->showMessage(MessageBar::Kind::Error, title, detail);
  emit statusMessage(title);
}

void ChatPanel::reloadConversationList() {
  if (!m_store) return;
  auto list = m_store->listConversations();
  if (!list) {
    showError(tr("Could not read the conversation list"), QString::fromStdString(list.error_message()));
    return;
  }
  m_conversations->setConversations(*list);
  m_conversations->setCurrentConversation(m_conversationId);
}

bool ChatPanel::selectConversation(qint64 id) {
  if (isGenerating() || !m_store || id == 0) return false;
  if (id == m_conversationId) return true;
  auto conversation = m_store->conversation(id);
  if (!conversation) return false;
  saveSettingsNow();  // the previous conversation's pending edits
  cancelEdit();
  m_conversationId = id;
  m_settings->setValues(conversation->systemPrompt, conversation->sampling);
  showConversation(id);
  m_conversations->setCurrentConversation(id);
  QSettings().setValue(QLatin1String(kLastConversationKey), id);
  updateActions();
  return true;
}

void ChatPanel::showConversation(qint64 id) {
  auto messages = m_store ? m_store->messages(id) : iwb::Result<QList<StoredMessage>>(QList<StoredMessage>{});
  if (!messages) {
    showError(tr("Could not read the conversation"), QString::fromStdString(messages.error_message()));
    m_messages->clear();
    return;
  }
  m_messages->setMessages(*messages);
}

void ChatPanel::newConversation() {
  if (isGenerating()) return;
  cancelEdit();
  saveSettingsNow();
  // An empty conversation is already new: use it rather than piling up empty ones.
  if (m_conversationId != 0 && m_messages->rowCount() == 0) {
    m_input->setFocus();
    return;
  }
  if (!m_store) {
    m_conversationId = 0;
    m_messages->clear();
    updateActions();
    return;
  }
  Conversation info;
  info.title = defaultConversationTitle();
  info.modelPath = m_engine->model().path;
  info.systemPrompt = m_settings->systemPrompt();
  info.sampling = m_settings->sampling();
  auto created = m_store->createConversation(info);
  if (!created) {
    showError(tr("Could not create a conversation"), QString::fromStdString(created.error_message()));
    return;
  }
  reloadConversationList();
  selectConversation(created->id);
  m_input->setFocus();
}

void ChatPanel::renameConversation(qint64 id, const QString& title) {
  if (!m_store) return;
  const QString cleaned = title.simplified();
  auto current = m_store->conversation(id);
  if (cleaned.isEmpty()) {  // an empty title is refused: put the old one back
    if (current) m_conversations->setTitle(id, current->title);
    return;
  }
  if (iwb::Status s = m_store->renameConversation(id, cleaned); !s) {
    showError(tr("Could not rename the conversation"), QString::fromStdString(s.message()));
    if (current) m_conversations->setTitle(id, current->title);
    return;
  }
  m_conversations->setTitle(id, cleaned);
}

void ChatPanel::deleteConversation(qint64 id) {
  if (!m_store || (isGenerating() && id == m_streaming.conversationId)) return;
  if (iwb::Status s = m_store->deleteConversation(id); !s) {
    showError(tr("Could not delete the conversation"), QString::fromStdString(s.message()));
    return;
  }
  if (id == m_conversationId) {
    m_settingsSaveTimer->stop();  // its settings went with it
    m_conversationId = 0;
    cancelEdit();
    m_messages->clear();
  }
  reloadConversationList();
  if (m_conversationId == 0 && m_conversations->count() > 0) selectConversation(m_conversations->conversationAt(0));
  updateActions();
}

void ChatPanel::saveSettingsNow() {
  m_settingsSaveTimer->stop();
  QSettings settings;  // the next new conversation starts from the last values used
  settings.setValue(QLatin1String(kDefaultSamplingKey),
                    QJsonDocument(m_settings->sampling().toJson()).toJson(QJsonDocument::Compact));
  settings.setValue(QLatin1String(kDefaultSystemPromptKey), m_settings->systemPrompt());
  if (!m_store || m_conversationId == 0) return;
  auto stored = m_store->conversation(m_conversationId);
  if (!stored) return;
  if (stored->systemPrompt == m_settings->systemPrompt() && stored->sampling == m_settings->sampling()) return;
  stored->systemPrompt = m_settings->systemPrompt();
  stored->sampling = m_settings->sampling();
  if (iwb::Status s = m_store->updateConversationSettings(*stored); !s) {
    showError(tr("Could not save the chat settings"), QString::fromStdString(s.message()));
  }
}

}  // namespace iwb::ui
