// A conversation to a file and back: JSON (everything, for importing again: model, system
// prompt, sampling settings, each message with its per-reply timings) and Markdown (to read).
#pragma once

#include "iwb/engine/status.h"
#include "store/conversation_store.h"

#include <QByteArray>
#include <QJsonObject>
#include <QList>

namespace iwb::ui {

struct ExportedConversation {
  Conversation info;              // id ignored on import
  QList<StoredMessage> messages;  // ids and conversation ids ignored on import
};

inline constexpr char kConversationFormat[] = "inference-workbench.conversation";
inline constexpr int kConversationFormatVersion = 1;

QJsonObject conversationToJson(const ExportedConversation& conversation);
QByteArray conversationToJsonBytes(const ExportedConversation& conversation);
QString conversationToMarkdown(const ExportedConversation& conversation);
// Reads what conversationToJsonBytes wrote; a file of another kind or a newer format version
// gets a message a person understands.
iwb::Result<ExportedConversation> conversationFromJson(const QByteArray& bytes);

}  // namespace iwb::ui
