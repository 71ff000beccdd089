// ChatPanel's reply lifecycle: editing an earlier message, sending, regenerating, and the
// engine's answers (user message saved → empty reply row saved → tokens streamed and
// checkpointed → final text and stats saved with is_complete).
#include "chat/chat_input.h"
#include "chat/chat_panel.h"
#include "chat/chat_settings_panel.h"
#include "chat/context_meter.h"
#include "chat/conversation_list.h"
#include "chat/message_list_model.h"
#include "chat/message_view.h"
#include "iwb/engine/runtime/engine.h"
#include "remote/remote_chat.h"
#include "remote/remote_endpoints.h"
#include "store/conversation_store.h"
#include "widgets/message_bar.h"
#include "worker/engine_controller.h"

#include <optional>
#include <utility>

#include <QApplication>
#include <QClipboard>
#include <QLabel>
#include <QMenu>
#include <QPushButton>
#include <QThread>
#include <QTimer>

namespace iwb::ui {
namespace {

constexpr int kTitleLength = 48;
constexpr double kStreamBudgetBesideEngine = 0.01;

// The first line of the first message, shortened at a word boundary.
QString titleFrom(const QString& text) {
  QString line = text.trimmed().section(QLatin1Char('\n'), 0, 0).simplified();
  if (line.size() <= kTitleLength) return line.isEmpty() ? ChatPanel::defaultConversationTitle() : line;
  line.truncate(kTitleLength);
  const int space = line.lastIndexOf(QLatin1Char(' '));
  if (space > kTitleLength / 2) line.truncate(space);
  return line + QStringLiteral("…");
}

}  // namespace

void ChatPanel::beginEdit(int row) {
  if (isGenerating() || row < 0 || row >= m_messages->rowCount()) return;
  const StoredMessage& message = m_messages->item(row).message;
  if (message.role != QLatin1String("user")) return;
  m_editRow = row;
  m_input->setPlainText(message.content);
  m_input->moveCursor(QTextCursor::End);
  m_input->setFocus();
  const int numLater = m_messages->rowCount() - row - 1;
  m_editBanner->setText(numLater == 0   ? tr("Editing the last message. Sending replaces it.")
                        : numLater == 1 ? tr("Editing an earlier message. Sending replaces it and removes the message after it.")
                                        : tr("Editing an earlier message. Sending replaces it and removes the %1 messages "
                                             "after it.").arg(numLater));
  m_editBanner->parentWidget()->show();
  updateActions();
}

void ChatPanel::cancelEdit() {
  if (m_editRow < 0) return;
  m_editRow = -1;
  m_input->clear();
  m_editBanner->parentWidget()->hide();
  updateActions();
}

void ChatPanel::send() {
  const QString text = m_input->toPlainText().trimmed();
  if (text.isEmpty() || isGenerating() || !isTargetReady()) return;
  if (!isReadyToSend(text)) return;  // it comes back here when the count or the user answers
  saveSettingsNow();
  if (m_conversationId == 0 && m_store) {
    newConversation();
    if (m_conversationId == 0) return;  // could not create one; the error is shown
  }
  if (m_editRow >= 0) {
    // Everything from the edited message on is replaced.
    if (m_store) {
      if (iwb::Status s = m_store->truncateMessages(m_conversationId, m_editRow); !s) {
        showError(tr("Could not edit the conversation"), QString::fromStdString(s.message()));
        return;
      }
    }
    m_messages->truncate(m_editRow);
    m_editRow = -1;
    m_editBanner->parentWidget()->hide();
  }
  StoredMessage user;
  user.conversationId = m_conversationId;
  user.position = m_messages->rowCount();
  user.role = QStringLiteral("user");
  user.content = text;
  user.id = m_nextUnsavedId--;  // replaced by the store's id when saved
  if (m_store) {
    auto stored = m_store->appendMessage(m_conversationId, user.role, text);
    if (!stored) {
      showError(tr("Could not save your message"), QString::fromStdString(stored.error_message()));
      return;
    }
    user = *stored;
    if (user.position == 0) {
      auto conversation = m_store->conversation(m_conversationId);
      if (conversation && conversation->title == defaultConversationTitle()) renameConversation(m_conversationId, titleFrom(text));
    }
    m_conversations->moveToTop(m_conversationId);
  }
  m_messages->append(user);
  m_input->clear();
  startReply();
}

void ChatPanel::regenerate() {
  if (isGenerating() || !isTargetReady() || m_editRow >= 0) return;
  int lastUser = -1;
  for (int row = m_messages->rowCount() - 1; row >= 0 && lastUser < 0; --row) {
    if (m_messages->item(row).message.role == QLatin1String("user")) lastUser = row;
  }
  if (lastUser < 0) return;
  if (m_store && m_conversationId != 0) {
    if (iwb::Status s = m_store->truncateMessages(m_conversationId, lastUser + 1); !s) {
      showError(tr("Could not remove the old reply"), QString::fromStdString(s.message()));
      return;
    }
  }
  m_messages->truncate(lastUser + 1);
  startReply();
}

void ChatPanel::startReply() {
  const bool isRemote = isRemoteChosen();
  const RemoteEndpointInfo* endpoint = isRemote ? chosenEndpoint() : nullptr;
  if (isRemote && !endpoint) {
    showError(tr("The server is no longer connected"), tr("Choose another in \"Runs on\", or connect it again with "
                                                          "File › Connect to Server…"));
    return;
  }
  GenerationInput input;
  const QString system = m_settings->systemPrompt().trimmed();
  if (!system.isEmpty()) input.messages.push_back({QStringLiteral("system"), system});
  input.messages += m_messages->turns();
  input.sampling = m_settings->sampling();
  input.templateOverride = m_settings->templateOverride();
  if (m_showsTokenProbabilities) input.numTopAlternatives = kNumTopAlternatives;
  if (m_isShorteningToFit && !isRemote)
    input.fitReserveTokens = fitReserveTokens(m_settings->sampling().maxTokens, int(m_engine->model().contextLength));

  StoredMessage reply;
  reply.conversationId = m_conversationId;
  reply.position = m_messages->rowCount();
  reply.role = QStringLiteral("assistant");
  reply.isComplete = false;
  reply.id = m_nextUnsavedId--;
  if (m_store && m_conversationId != 0) {
    // Saved empty and incomplete now, so a crash mid-reply leaves a row that says so.
    auto stored = m_store->appendMessage(m_conversationId, reply.role, QString(), false);
    if (!stored) {
      showError(tr("Could not save the reply"), QString::fromStdString(stored.error_message()));
      return;
    }
    reply = *stored;
    if (!isRemote && !m_engine->model().path.isEmpty()) {
      auto conversation = m_store->conversation(m_conversationId);
      if (conversation && conversation->modelPath != m_engine->model().path) {
        conversation->modelPath = m_engine->model().path;
        (void)m_store->updateConversationSettings(*conversation);  // informative only
      }
    }
  }
  // Where the engine's threads take every core, painting the reply takes one from them (and
  // the other waits for it at the next join): the reply is then shown less often, its layout
  // and painting kept to 1% of the time (tests/ui/bench_app_decode measures the effect).
  const bool isEngineOnEveryCore = !isRemote && m_engine->model().deviceId == QLatin1String("cpu") &&
                                   m_engine->model().numThreads >= QThread::idealThreadCount();
  m_view->setStreamBudget(isEngineOnEveryCore ? kStreamBudgetBesideEngine : MessageView::kDefaultStreamBudget);
  m_messages->append(reply, /*isStreaming=*/true);
  const quint64 requestId =
      isRemote ? m_remoteChat->generate(*endpoint, runsOnModel(), input) : m_engine->generate(input);
  m_streaming = {requestId, m_conversationId, reply.id, QString(), isRemote};
  m_checkpointTimer->start();
  if (m_messageBar->kind() == MessageBar::Kind::Error) m_messageBar->dismiss();
  updateActions();
}

void ChatPanel::stop() {
  if (!isGenerating()) return;
  m_streaming.isRemote ? m_remoteChat->stop() : m_engine->stop();
}

void ChatPanel::checkpointReply() {
  if (!m_store || m_streaming.messageId == 0) return;
  // Incomplete on purpose: only the final update marks the reply complete.
  (void)m_store->updateMessage(m_streaming.messageId, m_streaming.text, {}, false);
}

void ChatPanel::handleTokens(quint64 requestId, const QString& text) {
  if (requestId != m_streaming.requestId) return;
  const bool isDraft = std::exchange(m_isNextTokenDraft, false);
  const std::optional<TokenProbability> probability = std::exchange(m_nextTokenProbability, std::nullopt);
  // Templates end with "Assistant:" or a newline, and SentencePiece models answer with the
  // space or newline that would follow; a reply does not start with blanks.
  QString piece = text;
  if (m_streaming.text.isEmpty()) {
    qsizetype start = 0;
    while (start < piece.size() && piece.at(start).isSpace()) ++start;
    piece.remove(0, start);
    if (piece.isEmpty()) return;
  }
  m_streaming.text += piece;
  if (m_streaming.conversationId == m_conversationId) {
    const int row = m_messages->rowOfMessage(m_streaming.messageId);
    const qsizetype start = row >= 0 ? m_messages->item(row).message.content.size() : 0;
    m_messages->appendText(row, piece);
    if (isDraft && row >= 0) m_messages->markDraft(row, static_cast<int>(start), static_cast<int>(piece.size()));
    if (probability && row >= 0) {
      m_messages->markTokenProbability(row, static_cast<int>(start), static_cast<int>(piece.size()), *probability);
    }
  }
}

void ChatPanel::handleFinished(quint64 requestId, const GenerationStats& finishedStats) {
  if (requestId != m_streaming.requestId) return;
  m_checkpointTimer->stop();
  const Streaming done = m_streaming;
  m_streaming = {};
  GenerationStats stats = finishedStats;
  if (stats.ranOn.isEmpty()) stats.ranOn = QStringLiteral("local");  // remote replies name their endpoint
  if (m_store && done.messageId != 0) {
    if (iwb::Status s = m_store->updateMessage(done.messageId, done.text, stats, true); !s) {
      showError(tr("Could not save the reply"), QString::fromStdString(s.message()));
    }
  }
  const int row = m_messages->rowOfMessage(done.messageId);
  m_messages->finish(row, done.text, stats, true);
  if (stats.isError()) {
    showError(done.isRemote ? tr("The server failed while writing the reply")
                            : tr("The engine failed while writing the reply"),
              tr("%1\nThe text generated before the failure was kept.").arg(stats.errorMessage));
  } else if (stats.finishReason == QLatin1String(iwb::finish_reason_name(FinishReason::ContextFull))) {
    m_messageBar->showMessage(MessageBar::Kind::Information, tr("The context is full"),
                              tr("The reply stopped because the conversation filled the model's context of %1 "
                                 "tokens. Start a new conversation to continue.")
                                  .arg(m_engine->model().contextLength));
  }
  updateActions();
  emit statusMessage(stats.summaryLine());
  emit replyFinished(done.messageId, stats);
}

void ChatPanel::handleFailed(quint64 requestId, const QString& message) {
  if (requestId != m_streaming.requestId) return;
  m_checkpointTimer->stop();
  const Streaming failed = m_streaming;
  m_streaming = {};
  // Nothing was generated: the empty reply row goes; the user's message stays (it is theirs).
  if (m_store && failed.messageId != 0) {
    const int row = m_messages->rowOfMessage(failed.messageId);
    if (row >= 0) (void)m_store->truncateMessages(failed.conversationId, m_messages->item(row).message.position);
  }
  const int row = m_messages->rowOfMessage(failed.messageId);
  if (row >= 0) m_messages->truncate(row);
  showError(failed.isRemote ? tr("The server could not answer") : tr("The model could not answer"), message);
  updateActions();
  emit replyFailed(message);
}

void ChatPanel::showMessageContextMenu(const QPoint& pos) {
  const QModelIndex index = m_view->indexAt(pos);
  if (!index.isValid()) return;
  const int row = index.row();
  const StoredMessage& message = m_messages->item(row).message;
  QMenu menu(this);
  // The answer, without harmony markers or the model's reasoning.
  const QString answer = index.data(MessageListModel::AnswerRole).toString();
  menu.addAction(tr("Copy Text"), this, [answer] { QApplication::clipboard()->setText(answer); });
  if (const QString reasoning = index.data(MessageListModel::ReasoningRole).toString(); !reasoning.isEmpty()) {
    menu.addAction(tr("Copy Reasoning"), this, [reasoning] { QApplication::clipboard()->setText(reasoning); });
  }
  if (message.role == QLatin1String("user")) {
    QAction* edit = menu.addAction(tr("Edit and Resend…"), this, [this, row] { beginEdit(row); });
    edit->setEnabled(!isGenerating());
  } else if (row == m_messages->rowCount() - 1) {
    QAction* again = menu.addAction(tr("Regenerate"), this, &ChatPanel::regenerate);
    again->setEnabled(m_regenerateButton->isEnabled());
  }
  menu.exec(m_view->viewport()->mapToGlobal(pos));
}

}  // namespace iwb::ui
