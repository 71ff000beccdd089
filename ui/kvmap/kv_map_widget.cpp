// KvMapWidget: layout of the cells, painting each block's state into a cached image, and hover.
#include "kvmap/kv_map_widget.h"

#include "kvmap/kv_map_model.h"

#include <QCursor>
#include <QMouseEvent>
#include <QPainter>
#include <QToolTip>

#include <algorithm>
#include <cmath>

namespace iwb::ui {
namespace {

// The part of a sequence's colour shown for the empty slots of its partly filled block.
QColor emptySlotColor(const QColor& c) {
  return QColor((c.red() + 3 * 255) / 4, (c.green() + 3 * 255) / 4, (c.blue() + 3 * 255) / 4);
}

}  // namespace

KvMapWidget::KvMapWidget(KvMapModel* model, QWidget* parent) : QWidget(parent), m_model(model) {
  setObjectName(QStringLiteral("kvMapWidget"));
  setMouseTracking(true);
  setAttribute(Qt::WA_OpaquePaintEvent);
  setSizePolicy(QSizePolicy::Expanding, QSizePolicy::Expanding);
  connect(m_model, &KvMapModel::changed, this, [this] {
    if (m_model->numBlocks() != m_numLaidOut) relayout();
    else renderCells();
    // The hovered block's details follow the new state without the mouse moving.
    if (m_hovered >= m_model->numBlocks()) m_hovered = -1;
    if (m_hovered >= 0 && QToolTip::isVisible()) {
      QToolTip::showText(QCursor::pos(), m_model->hoverText(m_hovered), this, cellRect(m_hovered));
    }
    emit hoveredBlockChanged(m_hovered);
  });
}

void KvMapWidget::relayout() {
  const qint64 n = m_model->numBlocks();
  m_numLaidOut = n;
  const int w = std::max(1, width() - 2 * kMargin);
  const int h = std::max(1, height() - 2 * kMargin);
  m_pitch = kMinPitch;
  for (int p = kMaxPitch; p >= kMinPitch; --p) {
    const qint64 cols = std::max(1, w / p);
    const qint64 rows = n > 0 ? (n + cols - 1) / cols : 0;
    if (rows * p <= h) {
      m_pitch = p;
      break;
    }
  }
  m_gap = m_pitch >= 10 ? 2 : (m_pitch >= 5 ? 1 : 0);
  m_columns = std::max(1, w / m_pitch);
  renderCells();
}

QRect KvMapWidget::cellRect(qint64 block) const {
  if (block < 0 || block >= m_model->numBlocks() || block >= m_numLaidOut) return {};
  const int x = kMargin + static_cast<int>(block % m_columns) * m_pitch;
  const qint64 y = kMargin + (block / m_columns) * m_pitch;
  if (y + m_pitch > height()) return {};  // clipped: more blocks than even the smallest cells fit
  const int side = m_pitch - m_gap;
  return {x, static_cast<int>(y), side, side};
}

qint64 KvMapWidget::blockAt(const QPoint& pos) const {
  if (pos.x() < kMargin || pos.y() < kMargin) return -1;
  const int col = (pos.x() - kMargin) / m_pitch;
  const int row = (pos.y() - kMargin) / m_pitch;
  if (col >= m_columns) return -1;
  const qint64 block = static_cast<qint64>(row) * m_columns + col;
  return cellRect(block).contains(pos) ? block : -1;
}

void KvMapWidget::paintCell(QPainter& painter, qint64 block, const QRect& r) const {
  const iwb::BlockSnapshot* b = m_model->block(block);
  const KvCellKind kind = m_model->cellKind(block);
  if (kind == KvCellKind::Free) {
    painter.fillRect(r, KvMapModel::freeColor());
    return;
  }
  if (kind == KvCellKind::Cached) {
    painter.fillRect(r, KvMapModel::cachedColor());
    if (r.width() >= 6) painter.fillRect(r, QBrush(KvMapModel::cachedHatchColor(), Qt::BDiagPattern));
    return;
  }
  // In use: the slots holding tokens in the owner's colour from the left, the rest pale. A
  // shared block shows its owners side by side (as many as there is room for).
  const QColor first = KvMapModel::sequenceColor(b->owners.empty() ? 0 : b->owners.front());
  painter.fillRect(r, emptySlotColor(first));
  const int filled = static_cast<int>(std::lround(m_model->fillFraction(block) * r.width()));
  if (filled > 0) {
    const QRect full(r.x(), r.y(), filled, r.height());
    const int numBands = std::clamp(static_cast<int>(b->owners.size()), 1, std::max(1, r.height() / 2));
    if (kind == KvCellKind::Shared && numBands > 1) {
      // Horizontal bands, so the fill (left to right) stays readable across them.
      for (int i = 0; i < numBands; ++i) {
        const int y0 = r.y() + i * r.height() / numBands;
        const int y1 = r.y() + (i + 1) * r.height() / numBands;
        painter.fillRect(QRect(full.x(), y0, full.width(), y1 - y0),
                         KvMapModel::sequenceColor(b->owners[static_cast<size_t>(i)]));
      }
    } else {
      painter.fillRect(full, first);
    }
  }
  if (kind == KvCellKind::Shared) {
    // The shared mark: a dark frame (and on larger cells a dot in the corner).
    painter.setPen(QPen(KvMapModel::sharedMarkColor(), 1));
    painter.setBrush(Qt::NoBrush);
    painter.drawRect(r.adjusted(0, 0, -1, -1));
    if (r.width() >= 10) painter.fillRect(QRect(r.right() - 3, r.top() + 1, 3, 3), KvMapModel::sharedMarkColor());
  }
}

void KvMapWidget::renderCells() {
  const qreal dpr = devicePixelRatioF();
  QImage image(size() * dpr, QImage::Format_ARGB32_Premultiplied);
  image.setDevicePixelRatio(dpr);
  image.fill(palette().color(QPalette::Base));
  QPainter painter(&image);
  const qint64 n = m_model->numBlocks();
  if (n == 0) {
    painter.setPen(palette().color(QPalette::PlaceholderText));
    painter.drawText(rect(), Qt::AlignCenter | Qt::TextWordWrap, m_model->poolSummary());
  }
  for (qint64 i = 0; i < n; ++i) {
    const QRect r = cellRect(i);
    if (r.isEmpty()) break;  // the rest is clipped too
    paintCell(painter, i, r);
  }
  painter.end();
  m_cells = std::move(image);
  update();
}

void KvMapWidget::paintEvent(QPaintEvent* event) {
  QPainter painter(this);
  if (m_cells.size() != size() * devicePixelRatioF()) relayout();
  painter.drawImage(event->rect(), m_cells, QRectF(event->rect().topLeft() * devicePixelRatioF(),
                                                   event->rect().size() * devicePixelRatioF()));
  const QRect hovered = cellRect(m_hovered);
  if (!hovered.isEmpty()) {
    painter.setPen(QPen(palette().color(QPalette::Highlight), 2));
    painter.setBrush(Qt::NoBrush);
    painter.drawRect(hovered.adjusted(-1, -1, 1, 1));
  }
}

void KvMapWidget::resizeEvent(QResizeEvent* event) {
  QWidget::resizeEvent(event);
  relayout();
}

void KvMapWidget::setHovered(qint64 block, const QPoint& globalPos) {
  if (block == m_hovered) return;
  m_hovered = block;
  update();
  if (block >= 0) QToolTip::showText(globalPos, m_model->hoverText(block), this, cellRect(block));
  else QToolTip::hideText();
  emit hoveredBlockChanged(block);
}

void KvMapWidget::mouseMoveEvent(QMouseEvent* event) {
  setHovered(blockAt(event->position().toPoint()), event->globalPosition().toPoint());
  QWidget::mouseMoveEvent(event);
}

void KvMapWidget::leaveEvent(QEvent* event) {
  setHovered(-1, {});
  QWidget::leaveEvent(event);
}

}  // namespace iwb::ui
