// MessageView: relayout only when a row's height changed, streaming rows at most every 50 ms
// (less often when showing them costs more than their budget of the GUI thread's time),
// following the end of the conversation, and the mouse: links, Copy buttons, token hovers.
#include "chat/message_view.h"

#include "chat/markdown_render.h"
#include "chat/message_list_model.h"

#include <QClipboard>
#include <QDesktopServices>
#include <QElapsedTimer>
#include <QGuiApplication>
#include <QHelpEvent>
#include <QMouseEvent>
#include <QScrollBar>
#include <QTimer>
#include <QToolTip>
#include <QUrl>

#include <cmath>

namespace iwb::ui {

MessageView::MessageView(QWidget* parent)
    : QListView(parent), m_delegate(new MessageDelegate(this)), m_streamTimer(new QTimer(this)) {
  setItemDelegate(m_delegate);
  setMouseTracking(true);  // the pointing hand over links and Copy buttons
  m_streamTimer->setSingleShot(true);
  m_streamTimer->setInterval(kStreamRepaintMs);
  connect(m_streamTimer, &QTimer::timeout, this, &MessageView::flushStreamingChanges);
  setVerticalScrollMode(QAbstractItemView::ScrollPerPixel);
  setHorizontalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
  setResizeMode(QListView::Adjust);
  setUniformItemSizes(false);
  setSelectionMode(QAbstractItemView::NoSelection);
  setEditTriggers(QAbstractItemView::NoEditTriggers);
  setFrameShape(QFrame::NoFrame);
  verticalScrollBar()->setSingleStep(24);
  connect(verticalScrollBar(), &QScrollBar::valueChanged, this, [this](int value) {
    if (!m_isAdjustingScroll) m_isFollowingEnd = value >= verticalScrollBar()->maximum() - 4;
  });
}

void MessageView::dataChanged(const QModelIndex& topLeft, const QModelIndex& bottomRight, const QList<int>& roles) {
  // A streaming reply changes with every token: its rows are painted and laid out on a timer
  // instead, which keeps the GUI thread's work per token small while the engine's threads use
  // both cores (a 64-token reply of the default model, tests/ui/bench_app_decode on 2 cores:
  // the GUI thread's CPU time went from about 90 ms to 65-75 ms).
  const bool isStreaming =
      topLeft.row() == bottomRight.row() && topLeft.data(MessageListModel::IsStreamingRole).toBool();
  if (isStreaming) {
    m_pendingFirstRow = m_pendingFirstRow < 0 ? topLeft.row() : qMin(m_pendingFirstRow, topLeft.row());
    m_pendingLastRow = qMax(m_pendingLastRow, bottomRight.row());
    if (!m_streamTimer->isActive()) m_streamTimer->start();
    return;
  }
  applyChange(topLeft.row(), bottomRight.row(), roles);
}

void MessageView::flushStreamingChanges() {
  if (m_pendingFirstRow < 0 || model() == nullptr) return;
  const int first = qMin(m_pendingFirstRow, model()->rowCount() - 1),
            last = qMin(m_pendingLastRow, model()->rowCount() - 1);
  m_pendingFirstRow = m_pendingLastRow = -1;
  if (first < 0 || last < first) return;
  QElapsedTimer timer;
  timer.start();
  applyChange(first, last, {});  // lays the rows out again (the delegate's sizeHint)
  const double layoutMs = 1e-6 * double(timer.nsecsElapsed());
  if (viewport()->isVisible()) {
    m_flushLayoutMs = layoutMs;  // the paint that shows the change adds its own time
  } else {
    addStreamCost(layoutMs);
  }
  emit streamingChangesShown();
}

void MessageView::paintEvent(QPaintEvent* event) {
  QElapsedTimer timer;
  timer.start();
  QListView::paintEvent(event);
  if (m_flushLayoutMs >= 0) {
    addStreamCost(m_flushLayoutMs + 1e-6 * double(timer.nsecsElapsed()));
    m_flushLayoutMs = -1;
  }
}

void MessageView::addStreamCost(double ms) {
  // Smoothed over a few updates: one slow paint (a font cache filling) should not halve the rate.
  m_streamCostMs = m_streamCostMs > 0 ? 0.7 * m_streamCostMs + 0.3 * ms : ms;
  m_streamTimer->setInterval(streamRepaintIntervalMs());
}

void MessageView::setStreamBudget(double fraction) {
  m_streamBudget = qBound(1e-4, fraction, 1.0);
  m_streamTimer->setInterval(streamRepaintIntervalMs());
}

int MessageView::streamRepaintIntervalMs() const {
  // A 64-token reply of the default model shown from Markdown: about 1.5 ms an update (Zen 4);
  // at a budget of 1%, every 150 ms.
  const double ms = m_streamCostMs / m_streamBudget;
  return int(qBound(double(kStreamRepaintMs), std::ceil(ms), double(kMaxStreamRepaintMs)));
}

void MessageView::applyChange(int firstRow, int lastRow, const QList<int>& roles) {
  QListView::dataChanged(model()->index(firstRow, 0), model()->index(lastRow, 0), roles);
  // QListView repaints a changed row but keeps its old height; lay the rows out again only
  // when a height really changed (each other row's size comes from the delegate's cache).
  QStyleOptionViewItem option;
  initViewItemOption(&option);
  for (int row = firstRow; row <= lastRow; ++row) {
    const QModelIndex index = model()->index(row, 0);
    if (m_delegate->sizeHint(option, index).height() != visualRect(index).height()) {
      scheduleDelayedItemsLayout();
      break;
    }
  }
}

void MessageView::rowsInserted(const QModelIndex& parent, int start, int end) {
  QListView::rowsInserted(parent, start, end);
  // A new message of the user's own brings the view back to the end.
  for (int row = start; row <= end; ++row) {
    if (model()->index(row, 0).data(MessageListModel::RoleRole).toString() == QLatin1String("user")) {
      m_isFollowingEnd = true;
    }
  }
}

void MessageView::updateGeometries() {
  QListView::updateGeometries();
  if (!m_isFollowingEnd) return;
  m_isAdjustingScroll = true;
  verticalScrollBar()->setValue(verticalScrollBar()->maximum());
  m_isAdjustingScroll = false;
}

void MessageView::reset() {
  m_pendingFirstRow = m_pendingLastRow = -1;
  m_flushLayoutMs = -1;
  m_streamTimer->stop();
  m_delegate->clearCache();  // another conversation: the rows are other messages
  m_isFollowingEnd = true;
  QListView::reset();
}

void MessageView::setShowsRawText(bool isRaw) {
  if (m_delegate->showsRawText() == isRaw) return;
  m_delegate->setShowsRawText(isRaw);
  scheduleDelayedItemsLayout();
  viewport()->update();
}

void MessageView::setShowsTokenProbabilities(bool isShown) {
  if (m_delegate->showsTokenProbabilities() == isShown) return;
  m_delegate->setShowsTokenProbabilities(isShown);
  scheduleDelayedItemsLayout();
  viewport()->update();
}

bool MessageView::viewportEvent(QEvent* event) {
  if (event->type() == QEvent::ToolTip && m_delegate->showsTokenProbabilities()) {
    auto* help = static_cast<QHelpEvent*>(event);
    const QModelIndex index = indexAt(help->pos());
    const auto* messages = qobject_cast<const MessageListModel*>(model());
    const int token = index.isValid() ? m_delegate->tokenAt(visualRect(index), index, help->pos()) : -1;
    if (messages && token >= 0) {
      const MessageListModel::TokenSpan& span = messages->item(index.row()).tokenSpans.at(token);
      const QString text = messages->item(index.row()).message.content.mid(span.start, span.length);
      QToolTip::showText(help->globalPos(), MessageDelegate::tokenToolTip(text, span.probability), viewport());
    } else {
      QToolTip::hideText();
    }
    return true;
  }
  return QListView::viewportEvent(event);
}

void MessageView::mouseMoveEvent(QMouseEvent* event) {
  QListView::mouseMoveEvent(event);
  const QPoint pos = event->position().toPoint();
  const QModelIndex index = indexAt(pos);
  const QString href = index.isValid() ? m_delegate->anchorAt(visualRect(index), index, pos) : QString();
  if (href.isEmpty()) {
    viewport()->unsetCursor();
  } else {
    viewport()->setCursor(Qt::PointingHandCursor);
  }
}

void MessageView::mouseReleaseEvent(QMouseEvent* event) {
  const QPoint pos = event->position().toPoint();
  const QModelIndex index = indexAt(pos);
  const QString href = index.isValid() && event->button() == Qt::LeftButton
                           ? m_delegate->anchorAt(visualRect(index), index, pos)
                           : QString();
  const int copyIndex = copyIndexOfHref(href);
  if (copyIndex >= 0) {
    const QStringList blocks = m_delegate->codeBlocksFor(index);
    if (copyIndex < blocks.size()) {
      QGuiApplication::clipboard()->setText(blocks[copyIndex]);
      QToolTip::showText(event->globalPosition().toPoint(), tr("Copied"), this);
      emit codeCopied(blocks[copyIndex]);
    }
    return;
  }
  const QUrl url(href);
  if (!href.isEmpty() && (url.scheme() == QLatin1String("http") || url.scheme() == QLatin1String("https") ||
                          url.scheme() == QLatin1String("mailto"))) {
    QDesktopServices::openUrl(url);
    return;
  }
  QListView::mouseReleaseEvent(event);
}

void MessageView::resizeEvent(QResizeEvent* event) {
  QListView::resizeEvent(event);
  // Widths changed: every cached layout is stale (they are rebuilt lazily as rows show).
  m_delegate->clearCache();
}

}  // namespace iwb::ui
