// The messages of the conversation on screen, one row each, for the message view. Streaming
// text is appended to one row and announced with dataChanged for that row alone, so the view
// re-lays out only the reply that grew. Updated only in the GUI thread.
#pragma once

#include "worker/generation_values.h"
#include "store/conversation_store.h"

#include <QAbstractListModel>
#include <QList>
#include <QPoint>

namespace iwb::ui {

class MessageListModel : public QAbstractListModel {
  Q_OBJECT

 public:
  enum Role {
    RoleRole = Qt::UserRole + 1,  // "user" / "assistant"
    MessageIdRole,                // store id
    StatsLineRole,                // the line under a reply; empty while streaming
    IsStreamingRole,
    IsCompleteRole,
    IsErrorRole,      // the reply ended with an engine error
    RevisionRole,     // bumps whenever the text changes (layout caches key on it)
    DraftRangesRole,  // QList<QPoint>: (start, length) of accepted draft tokens in the text
    // A reply split by split_reply (harmony channels, <think>…</think>); DisplayRole keeps
    // the text as generated, markers included, which the raw view and token spans index.
    ReasoningRole,    // what the model reasoned (empty for most models)
    AnswerRole,       // what it answered: the text without markers and reasoning
    IsReasoningRole,  // streaming, and still inside its reasoning
  };

  struct TokenSpan {
    int start = 0;
    int length = 0;
    TokenProbability probability;
  };

  struct Item {
    StoredMessage message;
    bool isStreaming = false;
    int revision = 0;
    // Speculative decoding: where the accepted draft tokens of a reply streamed in this
    // session are (start, length in message.content); not stored with the conversation.
    QList<QPoint> draftRanges{};
    // View > Token Probabilities: where each token of a reply streamed in this session is in
    // message.content, with its probability and alternatives; not stored.
    QList<TokenSpan> tokenSpans{};
  };

  explicit MessageListModel(QObject* parent = nullptr);

  int rowCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role) const override;

  void setMessages(const QList<StoredMessage>& messages);
  void clear();
  void append(const StoredMessage& message, bool isStreaming = false);
  // Adds text to the end of `row` (a streaming reply).
  void appendText(int row, const QString& text);
  // Marks text of `row` as accepted draft tokens (shown in their own colour).
  void markDraft(int row, int start, int length);
  // Records the probability of the token that wrote content[start, start + length) of `row`.
  void markTokenProbability(int row, int start, int length, const TokenProbability& probability);
  // Final text, stats and completeness of a reply that stopped streaming.
  void finish(int row, const QString& content, const GenerationStats& stats, bool isComplete);
  // Keeps the first `numToKeep` rows.
  void truncate(int numToKeep);

  const Item& item(int row) const { return m_items.at(row); }
  int rowOfMessage(qint64 messageId) const;
  // The conversation as chat turns (streaming rows and failed empty replies left out). A
  // reply's turn is its answer alone: harmony and Qwen3 leave past reasoning out of the prompt.
  QList<ChatTurn> turns(int numRows = -1) const;

 private:
  QList<Item> m_items;
};

// The small line under a reply: stats, or why it is incomplete.
QString statsLineFor(const StoredMessage& message, bool isStreaming);

}  // namespace iwb::ui
