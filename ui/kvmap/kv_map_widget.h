// The grid of the KV-cache map: one cell per block, row by row in block-id order, sized to fill
// the widget. Cells are painted into an image once per snapshot (or resize), so a repaint for
// the hover outline, or ten snapshots a second over thousands of blocks, stays cheap.
#pragma once

#include <QImage>
#include <QWidget>

namespace iwb::ui {

class KvMapModel;

class KvMapWidget : public QWidget {
  Q_OBJECT

 public:
  explicit KvMapWidget(KvMapModel* model, QWidget* parent = nullptr);

  // The cell of a block in widget coordinates; empty when the block is outside the pool or
  // does not fit the widget.
  QRect cellRect(qint64 block) const;
  // The block under a point, or -1.
  qint64 blockAt(const QPoint& pos) const;
  qint64 hoveredBlock() const { return m_hovered; }
  int cellPitch() const { return m_pitch; }  // cell size plus the gap, in pixels
  int numColumns() const { return m_columns; }

  QSize sizeHint() const override { return {520, 360}; }
  QSize minimumSizeHint() const override { return {160, 120}; }

 signals:
  // The block under the mouse changed (-1: none).
  void hoveredBlockChanged(qint64 block);

 protected:
  void paintEvent(QPaintEvent* event) override;
  void resizeEvent(QResizeEvent* event) override;
  void mouseMoveEvent(QMouseEvent* event) override;
  void leaveEvent(QEvent* event) override;

 private:
  // Picks the largest cell that lets every block fit (at least kMinPitch), then repaints.
  void relayout();
  void renderCells();
  void paintCell(QPainter& painter, qint64 block, const QRect& rect) const;
  void setHovered(qint64 block, const QPoint& globalPos);

  static constexpr int kMargin = 4;
  static constexpr int kMinPitch = 3;
  static constexpr int kMaxPitch = 28;

  KvMapModel* m_model;
  QImage m_cells;        // the painted grid, widget-sized
  int m_pitch = kMaxPitch;
  int m_gap = 2;
  int m_columns = 1;
  qint64 m_numLaidOut = -1;  // blocks the layout was computed for
  qint64 m_hovered = -1;
};

}  // namespace iwb::ui
