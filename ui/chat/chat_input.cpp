// ChatInput: key handling and a height that follows the text (2 to 8 lines).
#include "chat/chat_input.h"

#include <QKeyEvent>
#include <QAbstractTextDocumentLayout>
#include <QTextDocument>

namespace iwb::ui {
namespace {
constexpr int kMinLines = 2;
constexpr int kMaxLines = 8;
}  // namespace

ChatInput::ChatInput(QWidget* parent) : QPlainTextEdit(parent) {
  setTabChangesFocus(true);
  setSizePolicy(QSizePolicy::Expanding, QSizePolicy::Preferred);
  // Wrapped lines count too, so the height is recomputed after each layout change.
  connect(document()->documentLayout(), &QAbstractTextDocumentLayout::documentSizeChanged, this,
          [this] { updateGeometry(); });
}

int ChatInput::heightForLines(int numLines) const {
  const QMargins m = contentsMargins();
  return fontMetrics().lineSpacing() * numLines + int(2 * document()->documentMargin()) + m.top() + m.bottom() +
         2 * frameWidth();
}

QSize ChatInput::sizeHint() const {
  // For QPlainTextEdit the document height is counted in lines (wrapped lines included).
  const int numLines = qBound(kMinLines, int(document()->documentLayout()->documentSize().height()), kMaxLines);
  return {QPlainTextEdit::sizeHint().width(), heightForLines(numLines)};
}

QSize ChatInput::minimumSizeHint() const { return {100, heightForLines(kMinLines)}; }

void ChatInput::keyPressEvent(QKeyEvent* event) {
  const bool isEnter = event->key() == Qt::Key_Return || event->key() == Qt::Key_Enter;
  if (isEnter && !(event->modifiers() & (Qt::ShiftModifier | Qt::ControlModifier | Qt::AltModifier))) {
    event->accept();
    emit submitted();
    return;
  }
  if (isEnter && (event->modifiers() & Qt::ShiftModifier)) {
    insertPlainText(QStringLiteral("\n"));  // a plain newline, whatever the platform's default
    event->accept();
    return;
  }
  if (event->key() == Qt::Key_Escape) {
    event->accept();
    emit cancelled();
    return;
  }
  QPlainTextEdit::keyPressEvent(event);
}

}  // namespace iwb::ui
