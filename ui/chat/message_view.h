// The message list of a conversation: a QListView with a delegate that paints each message
// as a bubble (the user's on the right, the model's on the left with its stats line). Text
// layouts are cached per message and revision, so a streamed token re-lays out only the reply
// it belongs to; the view follows the end of the conversation while the user is at the bottom.
// Replies are rendered from Markdown (markdown_render.h). MessageDelegate: message_delegate.cpp.
#pragma once

#include <QHash>
#include <QListView>
#include <QStyledItemDelegate>

#include "worker/generation_values.h"

#include <memory>

class QTextDocument;
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

  // Replies as Markdown (the default) or as the text the model wrote.
  bool showsRawText() const { return m_showsRawText; }
  void setShowsRawText(bool isRaw);
  // The rendered reply of `index` (null for raw text and the user's messages), its code blocks'
  // text, and the Copy buttons' rectangles in the item (for clicks and tests).
  const QTextDocument* documentFor(const QModelIndex& index) const;
  QStringList codeBlocksFor(const QModelIndex& index) const;
  QList<QRect> copyButtonRects(const QRect& itemRect, const QModelIndex& index) const;
  // The link under `pos` (view coordinates) in the item: a URL, or copyHref(n) of a Copy button.
  QString anchorAt(const QRect& itemRect, const QModelIndex& index, const QPoint& pos) const;

  // View > Token Probabilities: replies with token probabilities are shown as the text the
  // model wrote, each token on a background from red (unlikely) to green (likely).
  bool showsTokenProbabilities() const { return m_showsTokenProbabilities; }
  void setShowsTokenProbabilities(bool isShown);
  // The index into the row's MessageListModel::Item::tokenSpans of the token under `pos`
  // (view coordinates), -1 when none.
  int tokenAt(const QRect& itemRect, const QModelIndex& index, const QPoint& pos) const;
  // The hover text of a token: its probability and the alternatives the model considered.
  static QString tokenToolTip(const QString& tokenText, const TokenProbability& probability);
  // The background of a token of probability `p` (0..1).
  static QColor confidenceColor(double p);

 private:
  struct Layout {
    qint64 messageId = 0;
    int revision = -1;
    int textWidth = -1;
    bool isRaw = true;
    std::shared_ptr<QTextLayout> text;        // raw text (and the user's messages)
    std::shared_ptr<QTextDocument> document;  // a reply rendered from Markdown
    QStringList codeBlocks;
    QList<QRectF> copyRects;                  // the Copy links, in document coordinates
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
  bool m_showsRawText = false;
  bool m_showsTokenProbabilities = false;
  mutable QHash<int, Layout> m_cache;  // by row; checked against the message id
};

class MessageView : public QListView {
  Q_OBJECT

 public:
  explicit MessageView(QWidget* parent = nullptr);

  MessageDelegate* messageDelegate() const { return m_delegate; }
  bool isFollowingEnd() const { return m_isFollowingEnd; }
  void reset() override;
  void setShowsRawText(bool isRaw);
  void setShowsTokenProbabilities(bool isShown);
  // Changes to a streaming reply are shown at most every kStreamRepaintMs (a token every
  // 20-60 ms would otherwise lay the growing text out again for each), and less often, up to
  // kMaxStreamRepaintMs, when laying it out and painting it cost more than the stream budget's
  // share of the time: the interval is the measured cost of the last updates over the budget.
  static constexpr int kStreamRepaintMs = 50;
  static constexpr int kMaxStreamRepaintMs = 250;
  static constexpr double kDefaultStreamBudget = 0.05;
  // The share of time (0..1] showing a streaming reply may take. ChatPanel makes it small when
  // the engine's threads use every core: there each millisecond of painting takes a core from
  // one of them, and the other waits for it at the next join.
  void setStreamBudget(double fraction);
  double streamBudget() const { return m_streamBudget; }
  int streamRepaintIntervalMs() const;
  double streamCostMs() const { return m_streamCostMs; }  // smoothed; 0 before the first update

 protected:
  void dataChanged(const QModelIndex& topLeft, const QModelIndex& bottomRight,
                   const QList<int>& roles = QList<int>()) override;
  void rowsInserted(const QModelIndex& parent, int start, int end) override;
  void updateGeometries() override;
  void resizeEvent(QResizeEvent* event) override;
  void mouseMoveEvent(QMouseEvent* event) override;
  bool viewportEvent(QEvent* event) override;
  void mouseReleaseEvent(QMouseEvent* event) override;
  void paintEvent(QPaintEvent* event) override;

 signals:
  // Copy of a code block was clicked; its text is on the clipboard.
  void codeCopied(const QString& code);
  // The changes of a streaming reply were laid out and handed to painting (at most once per
  // streamRepaintIntervalMs()).
  void streamingChangesShown();

 private:
  void applyChange(int firstRow, int lastRow, const QList<int>& roles);
  void flushStreamingChanges();
  void addStreamCost(double ms);

  MessageDelegate* m_delegate;
  QTimer* m_streamTimer;
  int m_pendingFirstRow = -1, m_pendingLastRow = -1;  // streaming rows changed since the last paint
  double m_streamBudget = kDefaultStreamBudget;
  double m_streamCostMs = 0;
  double m_flushLayoutMs = -1;  // the last flush's layout, until the paint that shows it adds its own time
  bool m_isFollowingEnd = true;
  bool m_isAdjustingScroll = false;
};

}  // namespace iwb::ui
