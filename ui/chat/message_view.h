// The message list of a conversation: a QListView with a delegate that paints each message
// as a bubble (the user's on the right, the model's on the left with its stats line). Text
// layouts are cached per message and revision, so a streamed token re-lays out only the reply
// it belongs to; the view follows the end of the conversation while the user is at the bottom.
#pragma once

#include <QHash>
#include <QListView>
#include <QStyledItemDelegate>

#include <memory>

class QTextLayout;
class QTimer;

namespace iwb::ui {

class MessageDelegate : public QStyledItemDelegate {
  Q_OBJECT

 public:
  explicit MessageDelegate(QAbstractItemView* view);
  ~MessageDelegate() override;

  void paint(QPainter* painter, const QStyleOptionViewItem& option, const QModelIndex& index) const override;
  QSize sizeHint(const QStyleOptionViewItem& option, const QModelIndex& index) const override;

  // The bubble's rectangle of `index` inside `itemRect` (for hit tests and tests).
  QRect bubbleRect(const QRect& itemRect, const QModelIndex& index) const;
  void clearCache() { m_cache.clear(); }

 private:
  struct Layout {
    qint64 messageId = 0;
    int revision = -1;
    int textWidth = -1;
    std::shared_ptr<QTextLayout> text;
    QSizeF size;  // of the laid-out text
  };
  struct Geometry {
    QRect bubble;
    QRect header;
    QRect stats;
    QPointF textOrigin;
  };

  const Layout& layoutFor(const QModelIndex& index) const;
  int maxBubbleWidth() const;
  Geometry geometryFor(const QRect& itemRect, const QModelIndex& index) const;

  QAbstractItemView* m_view;
  mutable QHash<int, Layout> m_cache;  // by row; checked against the message id
};

class MessageView : public QListView {
  Q_OBJECT

 public:
  explicit MessageView(QWidget* parent = nullptr);

  MessageDelegate* messageDelegate() const { return m_delegate; }
  bool isFollowingEnd() const { return m_isFollowingEnd; }
  void reset() override;
  // Changes to a streaming reply are shown at most this often (a token every 20-60 ms would
  // otherwise lay the growing text out again for each).
  static constexpr int kStreamRepaintMs = 50;

 protected:
  void dataChanged(const QModelIndex& topLeft, const QModelIndex& bottomRight,
                   const QList<int>& roles = QList<int>()) override;
  void rowsInserted(const QModelIndex& parent, int start, int end) override;
  void updateGeometries() override;
  void resizeEvent(QResizeEvent* event) override;

 private:
  void applyChange(int firstRow, int lastRow, const QList<int>& roles);
  void flushStreamingChanges();

  MessageDelegate* m_delegate;
  QTimer* m_streamTimer;
  int m_pendingFirstRow = -1, m_pendingLastRow = -1;  // streaming rows changed since the last paint
  bool m_isFollowingEnd = true;
  bool m_isAdjustingScroll = false;
};

}  // namespace iwb::ui
