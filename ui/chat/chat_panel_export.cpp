// ChatPanel's export (Markdown or JSON) and import (JSON) of conversations.
#include "chat/chat_panel.h"
#include "chat/conversation_list.h"
#include "chat/message_list_model.h"
#include "store/conversation_export.h"
#include "store/conversation_store.h"

#include <QFile>
#include <QFileDialog>
#include <QFileInfo>
#include <QRegularExpression>
#include <QSaveFile>
#include <QStandardPaths>

namespace iwb::ui {

iwb::Status ChatPanel::exportConversation(qint64 id, const QString& path) {
  ExportedConversation exported;
  if (m_store) {
    auto info = m_store->conversation(id);
    if (!info) return info.status();
    auto messages = m_store->messages(id);
    if (!messages) return messages.status();
    exported = {*info, *messages};
  } else {
    // No history: the conversation on screen, with the settings in the panel.
    exported.info.title = defaultConversationTitle();
    for (int row = 0; row < m_messages->rowCount(); ++row) exported.messages.push_back(m_messages->item(row).message);
  }
  const bool isJson = path.endsWith(QLatin1String(".json"), Qt::CaseInsensitive);
  QSaveFile file(path);
  if (!file.open(QIODevice::WriteOnly)) {
    return iwb::make_error(iwb::ErrorCode::IoError,
                           tr("Cannot write %1: %2").arg(path, file.errorString()).toStdString());
  }
  file.write(isJson ? conversationToJsonBytes(exported) : conversationToMarkdown(exported).toUtf8());
  if (!file.commit()) {
    return iwb::make_error(iwb::ErrorCode::IoError,
                           tr("Cannot write %1: %2").arg(path, file.errorString()).toStdString());
  }
  emit statusMessage(tr("Exported the conversation to %1").arg(path));
  return {};
}

iwb::Result<qint64> ChatPanel::importConversation(const QString& path) {
  if (!m_store)
    return iwb::make_error(iwb::ErrorCode::Unsupported, tr("The conversation history is not open.").toStdString());
  QFile file(path);
  if (!file.open(QIODevice::ReadOnly)) {
    return iwb::make_error(iwb::ErrorCode::IoError,
                           tr("Cannot read %1: %2").arg(path, file.errorString()).toStdString());
  }
  auto exported = conversationFromJson(file.readAll());
  if (!exported) return exported.status();
  auto stored = m_store->importConversation(exported->info, exported->messages);
  if (!stored) return stored.status();
  reloadConversationList();
  selectConversation(stored->id);
  return stored->id;
}

void ChatPanel::exportConversationWithDialog(qint64 id) {
  QString title = defaultConversationTitle();
  if (m_store) {
    if (auto info = m_store->conversation(id)) title = info->title;
  }
  title.replace(QRegularExpression(QStringLiteral("[^\\w\\- ]+")), QStringLiteral("_"));
  const QString dir = QStandardPaths::writableLocation(QStandardPaths::DocumentsLocation);
  QString selectedFilter;
  const QString path = QFileDialog::getSaveFileName(
      this, tr("Export Conversation"), dir + QLatin1Char('/') + title + QStringLiteral(".md"),
      tr("Markdown (*.md);;JSON, can be imported again (*.json)"), &selectedFilter);
  if (path.isEmpty()) return;
  QString target = path;
  if (selectedFilter.contains(QLatin1String("*.json")) && !target.endsWith(QLatin1String(".json"))) {
    target =
        QFileInfo(target).path() + QLatin1Char('/') + QFileInfo(target).completeBaseName() + QStringLiteral(".json");
  }
  if (iwb::Status s = exportConversation(id, target); !s)
    showError(tr("Could not export the conversation"), QString::fromStdString(s.message()));
}

void ChatPanel::importConversationWithDialog() {
  const QString path = QFileDialog::getOpenFileName(this, tr("Import Conversation"),
                                                    QStandardPaths::writableLocation(QStandardPaths::DocumentsLocation),
                                                    tr("Exported conversations (*.json)"));
  if (path.isEmpty()) return;
  if (auto id = importConversation(path); !id)
    showError(tr("Could not import the conversation"), QString::fromStdString(id.error_message()));
}

}  // namespace iwb::ui
