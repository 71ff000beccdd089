// Chat history in SQLite: conversations (title, model, system prompt, sampling settings) and
// their messages in order. One connection per store object, created and used in the thread
// that constructs it. WAL journal with synchronous=FULL: once a write returns, it survives the
// process being killed (and a power cut). Schema versioned with PRAGMA user_version. A database
// of its own that only the application reads, hence QtSql (the program's one QtSql user); the
// results store shared with `iwb` is reached through results_store_access.h.
#pragma once

#include "worker/generation_values.h"
#include "iwb/engine/status.h"

#include <QDateTime>
#include <QList>
#include <QString>

#include <memory>

namespace iwb::ui {

struct Conversation {
  qint64 id = 0;
  QString title;
  QString modelPath;       // the model it was last answered with
  QString systemPrompt;
  SamplingSettings sampling;
  QDateTime created;       // UTC
  QDateTime updated;       // UTC; any change to the conversation or its messages
};

struct StoredMessage {
  qint64 id = 0;
  qint64 conversationId = 0;
  int position = 0;        // 0-based, contiguous within a conversation
  QString role;            // "user", "assistant" (the system prompt lives on the conversation)
  QString content;
  GenerationStats stats;   // assistant replies; invalid (empty reason) otherwise
  bool isComplete = true;  // false: a reply still streaming, or cut off by a crash
};

class ConversationStore {
 public:
  static constexpr int kSchemaVersion = 1;

  // <AppDataLocation>/conversations.sqlite
  static QString defaultPath();
  // Opens (creating when absent) the database at `path`, creating its folder, and migrates
  // it to kSchemaVersion. Refuses a file written by a newer version of the program.
  static iwb::Result<std::unique_ptr<ConversationStore>> open(const QString& path);

  ~ConversationStore();
  ConversationStore(const ConversationStore&) = delete;
  ConversationStore& operator=(const ConversationStore&) = delete;

  QString path() const { return m_path; }
  int schemaVersion() const;

  // Most recently updated first.
  iwb::Result<QList<Conversation>> listConversations() const;
  iwb::Result<Conversation> conversation(qint64 id) const;
  // Stores a new conversation from `info` (its id and dates are ignored); returns it as stored.
  iwb::Result<Conversation> createConversation(const Conversation& info);
  iwb::Status renameConversation(qint64 id, const QString& title);
  // Model path, system prompt and sampling settings.
  iwb::Status updateConversationSettings(const Conversation& info);
  // Stores a whole conversation read from an export, in one transaction: its settings, its
  // dates (now when invalid) and its messages in order with their stats.
  iwb::Result<Conversation> importConversation(const Conversation& info, const QList<StoredMessage>& messages);
  // Removes the conversation and all its messages.
  iwb::Status deleteConversation(qint64 id);

  iwb::Result<QList<StoredMessage>> messages(qint64 conversationId) const;
  // Adds a message after the last one; returns it with its id and position.
  iwb::Result<StoredMessage> appendMessage(qint64 conversationId, const QString& role, const QString& content,
                                           bool isComplete = true, const GenerationStats& stats = {});
  iwb::Status updateMessage(qint64 messageId, const QString& content, const GenerationStats& stats, bool isComplete);
  // Keeps the first `numToKeep` messages and deletes the rest (edit and regenerate).
  iwb::Status truncateMessages(qint64 conversationId, int numToKeep);

 private:
  ConversationStore(QString path, QString connectionName);
  iwb::Status migrate();
  iwb::Status touch(qint64 conversationId);

  QString m_path;
  QString m_connectionName;
};

}  // namespace iwb::ui
