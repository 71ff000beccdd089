// ConversationList: a QListWidget of titles keyed by conversation id, with in-place rename.
#include "chat/conversation_list.h"

#include <QAction>
#include <QKeyEvent>
#include <QListWidget>
#include <QLocale>
#include <QMenu>
#include <QMessageBox>
#include <QPushButton>
#include <QShortcut>
#include <QVBoxLayout>

namespace iwb::ui {
namespace {
constexpr int kIdRole = Qt::UserRole + 1;
}  // namespace

ConversationList::ConversationList(QWidget* parent)
    : QWidget(parent), m_newButton(new QPushButton(tr("New Chat"))), m_list(new QListWidget) {
  m_newButton->setObjectName(QStringLiteral("newChatButton"));
  m_newButton->setIcon(QIcon::fromTheme(QStringLiteral("document-new")));
  m_newButton->setToolTip(tr("Start a new conversation (Ctrl+N)"));
  m_list->setObjectName(QStringLiteral("conversationList"));
  m_list->setContextMenuPolicy(Qt::CustomContextMenu);
  m_list->setEditTriggers(QAbstractItemView::EditKeyPressed);  // F2; double-click just opens
  // Titles longer than the pane are elided: without this a title that grows after the item
  // was laid out (the automatic title replacing "New Chat") kept its full width and the list
  // scrolled sideways instead.
  m_list->setTextElideMode(Qt::ElideRight);
  m_list->setHorizontalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
  m_list->setUniformItemSizes(true);

  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(6, 6, 0, 6);
  layout->addWidget(m_newButton);
  layout->addWidget(m_list, 1);

  connect(m_newButton, &QPushButton::clicked, this, &ConversationList::newConversationRequested);
  connect(m_list, &QListWidget::currentItemChanged, this, [this](QListWidgetItem* current) {
    if (!m_isUpdating && current) emit conversationSelected(current->data(kIdRole).toLongLong());
  });
  connect(m_list, &QListWidget::itemChanged, this, [this](QListWidgetItem* item) {
    if (m_isUpdating) return;
    const QString title = item->text().trimmed();
    emit renameRequested(item->data(kIdRole).toLongLong(), title);
  });
  connect(m_list, &QListWidget::customContextMenuRequested, this, &ConversationList::showContextMenu);
  auto* deleteShortcut = new QShortcut(QKeySequence::Delete, m_list, nullptr, nullptr, Qt::WidgetShortcut);
  connect(deleteShortcut, &QShortcut::activated, this, [this] {
    if (m_list->currentItem()) confirmDelete(m_list->currentItem());
  });
}

void ConversationList::setConversations(const QList<Conversation>& conversations) {
  m_isUpdating = true;
  const qint64 current = currentConversation();
  m_list->clear();
  for (const Conversation& c : conversations) {
    auto* item = new QListWidgetItem(c.title, m_list);
    item->setData(kIdRole, c.id);
    item->setFlags(item->flags() | Qt::ItemIsEditable);
    item->setToolTip(tr("%1\nLast change: %2").arg(c.title, QLocale().toString(c.updated.toLocalTime(), QLocale::ShortFormat)));
  }
  if (QListWidgetItem* item = itemOf(current)) m_list->setCurrentItem(item);
  m_isUpdating = false;
}

bool ConversationList::setCurrentConversation(qint64 id) {
  QListWidgetItem* item = itemOf(id);
  m_isUpdating = true;
  m_list->setCurrentItem(item);
  m_isUpdating = false;
  return item != nullptr;
}

qint64 ConversationList::currentConversation() const {
  const QListWidgetItem* item = m_list->currentItem();
  return item ? item->data(kIdRole).toLongLong() : 0;
}

void ConversationList::setTitle(qint64 id, const QString& title) {
  if (QListWidgetItem* item = itemOf(id)) {
    m_isUpdating = true;
    item->setText(title);
    m_isUpdating = false;
  }
}

void ConversationList::moveToTop(qint64 id) {
  QListWidgetItem* item = itemOf(id);
  if (!item || m_list->row(item) == 0) return;
  m_isUpdating = true;
  const bool wasCurrent = m_list->currentItem() == item;
  m_list->takeItem(m_list->row(item));
  m_list->insertItem(0, item);
  if (wasCurrent) m_list->setCurrentItem(item);
  m_isUpdating = false;
}

int ConversationList::count() const { return m_list->count(); }

qint64 ConversationList::conversationAt(int row) const {
  const QListWidgetItem* item = m_list->item(row);
  return item ? item->data(kIdRole).toLongLong() : 0;
}

QString ConversationList::titleAt(int row) const {
  const QListWidgetItem* item = m_list->item(row);
  return item ? item->text() : QString();
}

QListWidgetItem* ConversationList::itemOf(qint64 id) const {
  if (id == 0) return nullptr;
  for (int row = 0; row < m_list->count(); ++row) {
    if (m_list->item(row)->data(kIdRole).toLongLong() == id) return m_list->item(row);
  }
  return nullptr;
}

void ConversationList::showContextMenu(const QPoint& pos) {
  QListWidgetItem* item = m_list->itemAt(pos);
  QMenu menu(this);
  menu.addAction(tr("New Chat"), this, &ConversationList::newConversationRequested);
  if (item) {
    menu.addSeparator();
    menu.addAction(tr("Rename"), this, [this, item] { m_list->editItem(item); });
    menu.addAction(tr("Export…"), this, [this, item] { emit exportRequested(item->data(kIdRole).toLongLong()); });
    menu.addAction(tr("Delete…"), this, [this, item] { confirmDelete(item); });
  }
  menu.addSeparator();
  menu.addAction(tr("Import…"), this, &ConversationList::importRequested);
  menu.exec(m_list->viewport()->mapToGlobal(pos));
}

void ConversationList::confirmDelete(QListWidgetItem* item) {
  const qint64 id = item->data(kIdRole).toLongLong();
  const auto answer = QMessageBox::question(
      this, tr("Delete Conversation"),
      tr("Delete \"%1\" and all its messages? This cannot be undone.").arg(item->text()),
      QMessageBox::Yes | QMessageBox::Cancel, QMessageBox::Cancel);
  if (answer == QMessageBox::Yes) emit deleteRequested(id);
}

}  // namespace iwb::ui
