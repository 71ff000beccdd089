// ChatPanel's context meter: counting the conversation as it would be sent (through the worker,
// with the model's tokenizer and chat template), and the question asked before sending a
// message that would overflow the context: leave out the oldest turns, or start a new chat.
#include "chat/chat_input.h"
#include "chat/chat_panel.h"
#include "chat/chat_settings_panel.h"
#include "chat/context_meter.h"
#include "chat/message_list_model.h"
#include "worker/engine_controller.h"

#include <QLocale>
#include <QMessageBox>
#include <QPushButton>
#include <QTimer>

namespace iwb::ui {
namespace {

// An upper bound of the prompt tokens of `input` without tokenizing: a token is at least one
// byte of text (byte-level BPE, SentencePiece with byte fallback), and no chat template wraps a
// turn in more than a few special tokens (ChatML, Llama 3, Gemma: about 5).
constexpr int kTemplateTokensPerTurn = 16;

qint64 tokenUpperBound(const GenerationInput& input) {
  qint64 bound = kTemplateTokensPerTurn;  // BOS and the assistant's opening
  for (const ChatTurn& turn : input.messages) bound += turn.content.toUtf8().size() + kTemplateTokensPerTurn;
  return bound;
}

}  // namespace

QMessageBox* ChatPanel::overflowQuestion() const { return qobject_cast<QMessageBox*>(m_overflowQuestion.data()); }

void ChatPanel::contextChanged() {
  ++m_contextRevision;
  m_countTimer->start();
}

GenerationInput ChatPanel::pendingInput(const QString& draft) const {
  GenerationInput input;
  const QString system = m_settings->systemPrompt().trimmed();
  if (!system.isEmpty()) input.messages.push_back({QStringLiteral("system"), system});
  input.messages += m_messages->turns(m_editRow >= 0 ? m_editRow : -1);
  if (!draft.isEmpty()) input.messages.push_back({QStringLiteral("user"), draft});
  input.sampling = m_settings->sampling();
  input.templateOverride = m_settings->templateOverride();
  if (m_isShorteningToFit && m_engine->hasModel()) {
    input.fitReserveTokens = fitReserveTokens(input.sampling.maxTokens, int(m_engine->model().contextLength));
  }
  return input;
}

void ChatPanel::requestTokenCount() {
  m_countTimer->stop();
  // While a reply streams the worker is busy and the count would be stale at once; the end of
  // the reply counts again.
  if (isGenerating()) return;
  if (!m_engine->hasModel() || m_engine->isLoading() || isRemoteChosen()) {
    m_contextMeter->clear();
    m_countedRevision = m_contextRevision;
    return;
  }
  m_countRevision = m_contextRevision;
  m_countTag = m_engine->countTokens(pendingInput(m_input->toPlainText().trimmed()));
}

void ChatPanel::handleTokensCounted(quint64 tag, int numTokens, int contextLength, int numTurnsLeftOut) {
  if (tag != m_countTag) return;  // an older count
  m_countedRevision = m_countRevision;
  m_contextMeter->setUsage(numTokens, contextLength, m_settings->sampling().maxTokens, numTurnsLeftOut);
  emit contextCounted(numTokens, contextLength);
  if (!m_isSendPending) return;
  if (m_countedRevision == m_contextRevision) {
    m_isSendPending = false;
    send();
  } else {
    requestTokenCount();  // the text changed meanwhile: count what is there now
  }
}

bool ChatPanel::isReadyToSend(const QString& text) {
  if (m_isShorteningToFit) return true;  // the worker leaves out what does not fit
  if (isRemoteChosen()) return true;     // the server counts (and refuses what does not fit)
  const qint64 contextLength = m_engine->model().contextLength;
  // Short conversations go at once, without waiting for a count.
  if (contextLength > 0 && tokenUpperBound(pendingInput(text)) + ContextMeter::kMinReplyTokens <= contextLength) {
    return true;
  }
  if (m_countedRevision != m_contextRevision) {
    m_isSendPending = true;
    requestTokenCount();
    return false;
  }
  if (m_contextMeter->state() != ContextMeter::State::Overflows) return true;
  askAboutOverflow(text);
  return false;
}

void ChatPanel::askAboutOverflow(const QString& text) {
  if (m_overflowQuestion) return;
  const QLocale locale;
  auto* box = new QMessageBox(
      QMessageBox::Warning, tr("The conversation does not fit"),
      tr("With this message the conversation is %1 tokens, and the model's context holds "
         "%2 tokens, so there is no room for a reply.")
          .arg(locale.toString(m_contextMeter->numTokens()), locale.toString(m_contextMeter->contextLength())),
      QMessageBox::Cancel, this);
  box->setObjectName(QStringLiteral("overflowQuestion"));
  box->setAttribute(Qt::WA_DeleteOnClose);
  box->setInformativeText(
      tr("Leave the oldest messages out of what the model reads (they stay in the history), "
         "or start a new chat with this message."));
  QPushButton* shorten = box->addButton(tr("Leave Out Oldest Messages"), QMessageBox::AcceptRole);
  shorten->setObjectName(QStringLiteral("shortenButton"));
  QPushButton* fresh = box->addButton(tr("Start New Chat"), QMessageBox::ActionRole);
  fresh->setObjectName(QStringLiteral("newChatButton"));
  box->setDefaultButton(shorten);
  connect(box, &QMessageBox::buttonClicked, this, [this, shorten, fresh, text](QAbstractButton* button) {
    if (button == shorten) {
      m_isShorteningToFit = true;
      contextChanged();
      send();
    } else if (button == fresh) {
      newConversation();
      m_input->setPlainText(text);
      send();
    }
  });
  m_overflowQuestion = box;
  box->open();
}

}  // namespace iwb::ui
