// The message input: a plain-text box where Enter sends and Shift+Enter starts a new line
// (as in chat programs), Escape cancels an edit, and the height grows with the text up to a
// few lines.
#pragma once

#include <QPlainTextEdit>

namespace iwb::ui {

class ChatInput : public QPlainTextEdit {
  Q_OBJECT

 public:
  explicit ChatInput(QWidget* parent = nullptr);

  QSize sizeHint() const override;
  QSize minimumSizeHint() const override;

 signals:
  void submitted();
  void cancelled();

 protected:
  void keyPressEvent(QKeyEvent* event) override;

 private:
  int heightForLines(int numLines) const;
};

}  // namespace iwb::ui
