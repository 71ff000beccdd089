// Conversation export (JSON, Markdown) and JSON import.
#include "store/conversation_export.h"

#include "iwb/engine/chat/reply_parts.h"

#include <QFileInfo>
#include <QJsonArray>
#include <QJsonDocument>
#include <QLocale>

namespace iwb::ui {
namespace {

QString dateText(const QDateTime& date) {
  return date.isValid() ? date.toUTC().toString(Qt::ISODateWithMs) : QString();
}

iwb::Status formatError(const QString& why) {
  return iwb::make_error(iwb::ErrorCode::CorruptFile,
                         ("Not a conversation exported by Inference Workbench: " + why).toStdString());
}

}  // namespace

QJsonObject conversationToJson(const ExportedConversation& conversation) {
  const Conversation& c = conversation.info;
  QJsonArray messages;
  for (const StoredMessage& m : conversation.messages) {
    QJsonObject message{{QStringLiteral("role"), m.role},
                        {QStringLiteral("content"), m.content},
                        {QStringLiteral("complete"), m.isComplete}};
    // Per-reply timings and counts (prompt and generated tokens, time to first token, decode
    // time and speed, seed, why it ended).
    if (m.stats.isValid()) message.insert(QStringLiteral("stats"), m.stats.toJson());
    messages.append(message);
  }
  return {{QStringLiteral("format"), QLatin1String(kConversationFormat)},
          {QStringLiteral("version"), kConversationFormatVersion},
          {QStringLiteral("title"), c.title},
          {QStringLiteral("model"), QJsonObject{{QStringLiteral("path"), c.modelPath},
                                                {QStringLiteral("name"), QFileInfo(c.modelPath).fileName()}}},
          {QStringLiteral("system_prompt"), c.systemPrompt},
          {QStringLiteral("sampling"), c.sampling.toJson()},
          {QStringLiteral("created"), dateText(c.created)},
          {QStringLiteral("updated"), dateText(c.updated)},
          {QStringLiteral("messages"), messages}};
}

QByteArray conversationToJsonBytes(const ExportedConversation& conversation) {
  return QJsonDocument(conversationToJson(conversation)).toJson(QJsonDocument::Indented);
}

QString conversationToMarkdown(const ExportedConversation& conversation) {
  const Conversation& c = conversation.info;
  const QJsonObject sampling = c.sampling.toJson();
  QStringList settings;
  for (auto it = sampling.begin(); it != sampling.end(); ++it) {
    settings << QStringLiteral("%1 %2").arg(it.key(), it.value().toVariant().toString());
  }
  QString out = QStringLiteral("# %1\n\n").arg(c.title);
  if (!c.modelPath.isEmpty()) out += QStringLiteral("- Model: `%1`\n").arg(QFileInfo(c.modelPath).fileName());
  out += QStringLiteral("- Sampling: %1\n").arg(settings.join(QStringLiteral(", ")));
  if (c.created.isValid()) out += QStringLiteral("- Started: %1\n").arg(dateText(c.created));
  out += QLatin1Char('\n');
  if (!c.systemPrompt.isEmpty()) {
    out += QStringLiteral("## System\n\n%1\n\n").arg(c.systemPrompt.trimmed());
  }
  for (const StoredMessage& m : conversation.messages) {
    const bool isUser = m.role == QLatin1String("user");
    QString text = m.content.trimmed();
    if (!isUser) {
      // Harmony channels and <think> blocks: the reasoning as a quote above the answer, no markers.
      const QByteArray raw = m.content.toUtf8();
      const iwb::ReplyParts parts = iwb::split_reply(std::string_view(raw.constData(), size_t(raw.size())));
      text = QString::fromStdString(parts.content).trimmed();
      if (!parts.reasoning.empty()) {
        QString quoted = QString::fromStdString(parts.reasoning).trimmed();
        quoted.replace(QLatin1Char('\n'), QStringLiteral("\n> "));
        text = QStringLiteral("> **Reasoning**\n>\n> %1\n\n%2").arg(quoted, text);
      }
    }
    out += QStringLiteral("## %1\n\n%2\n\n").arg(isUser ? QStringLiteral("You") : QStringLiteral("Assistant"), text);
    if (m.stats.isValid()) out += QStringLiteral("*%1*\n\n").arg(m.stats.summaryLine());
  }
  return out;
}

iwb::Result<ExportedConversation> conversationFromJson(const QByteArray& bytes) {
  QJsonParseError error;
  const QJsonDocument doc = QJsonDocument::fromJson(bytes, &error);
  if (error.error != QJsonParseError::NoError)
    return formatError(QStringLiteral("the JSON is malformed (%1).").arg(error.errorString()));
  const QJsonObject json = doc.object();
  if (json.value(QStringLiteral("format")).toString() != QLatin1String(kConversationFormat)) {
    return formatError(QStringLiteral("its \"format\" is not \"%1\".").arg(QLatin1String(kConversationFormat)));
  }
  const int version = json.value(QStringLiteral("version")).toInt();
  if (version < 1 || version > kConversationFormatVersion) {
    return iwb::make_error(iwb::ErrorCode::Unsupported,
                           QStringLiteral("The conversation was exported in format version %1; this version of the "
                                          "program reads up to version %2.")
                               .arg(version)
                               .arg(kConversationFormatVersion)
                               .toStdString());
  }
  ExportedConversation out;
  out.info.title = json.value(QStringLiteral("title")).toString();
  out.info.modelPath = json.value(QStringLiteral("model")).toObject().value(QStringLiteral("path")).toString();
  out.info.systemPrompt = json.value(QStringLiteral("system_prompt")).toString();
  out.info.sampling = SamplingSettings::fromJson(json.value(QStringLiteral("sampling")).toObject());
  out.info.created = QDateTime::fromString(json.value(QStringLiteral("created")).toString(), Qt::ISODateWithMs);
  out.info.updated = QDateTime::fromString(json.value(QStringLiteral("updated")).toString(), Qt::ISODateWithMs);
  int position = 0;
  for (const QJsonValue& value : json.value(QStringLiteral("messages")).toArray()) {
    const QJsonObject m = value.toObject();
    StoredMessage message;
    message.position = position++;
    message.role = m.value(QStringLiteral("role")).toString();
    if (message.role != QLatin1String("user") && message.role != QLatin1String("assistant")) {
      return formatError(QStringLiteral("message %1 has the role \"%2\".").arg(position).arg(message.role));
    }
    message.content = m.value(QStringLiteral("content")).toString();
    message.isComplete = m.value(QStringLiteral("complete")).toBool(true);
    if (m.contains(QStringLiteral("stats")))
      message.stats = GenerationStats::fromJson(m.value(QStringLiteral("stats")).toObject());
    out.messages.push_back(message);
  }
  return out;
}

}  // namespace iwb::ui
