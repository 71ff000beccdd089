// A dismissable, non-modal message strip (like an in-window notification): an error or an
// information line with optional detail text, an optional action button and a close button.
// It never blocks, so tests and people can carry on while it shows.
#pragma once

#include <QFrame>

class QLabel;
class QPushButton;
class QToolButton;

namespace iwb::ui {

class MessageBar : public QFrame {
  Q_OBJECT

 public:
  enum class Kind { Information, Error };

  explicit MessageBar(QWidget* parent = nullptr);

  // Shows the message without an action button (an earlier one is removed).
  void showMessage(Kind kind, const QString& title, const QString& detail = {});
  // Adds a button to the message now shown ("Load on the CPU"); clicking it emits
  // actionTriggered and dismisses the bar.
  void setAction(const QString& text);
  QString actionText() const;  // empty when there is no button
  void triggerAction();        // what a click does (tests)
  Kind kind() const { return m_kind; }
  QString title() const;
  QString detail() const;

 public slots:
  void dismiss();

 signals:
  void dismissed();
  void actionTriggered();

 private:
  void applyKindStyle();

  Kind m_kind = Kind::Information;
  QLabel* m_iconLabel;
  QLabel* m_titleLabel;
  QLabel* m_detailLabel;
  QPushButton* m_actionButton;
  QToolButton* m_closeButton;
};

}  // namespace iwb::ui
