// The list of saved conversations beside the chat: a New Chat button, titles newest first,
// rename in place (F2 or the context menu) and delete (Delete key or the context menu, after a
// confirmation). It only shows and asks; the chat panel does the storing.
#pragma once

#include "store/conversation_store.h"

#include <QWidget>

class QListWidget;
class QListWidgetItem;
class QPushButton;

namespace iwb::ui {

class ConversationList : public QWidget {
  Q_OBJECT

 public:
  explicit ConversationList(QWidget* parent = nullptr);

  void setConversations(const QList<Conversation>& conversations);
  // Selects the row of `id` without emitting conversationSelected; false when absent.
  bool setCurrentConversation(qint64 id);
  qint64 currentConversation() const;
  // Changes the shown title of `id` (after a rename or an automatic title).
  void setTitle(qint64 id, const QString& title);
  void moveToTop(qint64 id);
  int count() const;
  qint64 conversationAt(int row) const;
  QString titleAt(int row) const;

  QListWidget* listWidget() const { return m_list; }
  QPushButton* newButton() const { return m_newButton; }

 signals:
  void newConversationRequested();
  void conversationSelected(qint64 id);
  void renameRequested(qint64 id, const QString& title);
  // Confirmed by the user already.
  void deleteRequested(qint64 id);
  // Export the conversation to a file (the panel asks where), or import one.
  void exportRequested(qint64 id);
  void importRequested();

 private:
  QListWidgetItem* itemOf(qint64 id) const;
  void showContextMenu(const QPoint& pos);
  void confirmDelete(QListWidgetItem* item);

  QPushButton* m_newButton;
  QListWidget* m_list;
  bool m_isUpdating = false;
};

}  // namespace iwb::ui
