// A dismissable, non-modal message strip (like an in-window notification): an error or an
// information line with optional detail text and a close button. It never blocks, so tests and
// people can carry on while it shows.
#pragma once

#include <QFrame>

class QLabel;
class QToolButton;

namespace iwb::ui {

class MessageBar : public QFrame {
  Q_OBJECT

 public:
  enum class Kind { Information, Error };

  explicit MessageBar(QWidget* parent = nullptr);

  void showMessage(Kind kind, const QString& title, const QString& detail = {});
  Kind kind() const { return m_kind; }
  QString title() const;
  QString detail() const;

 public slots:
  void dismiss();

 signals:
  void dismissed();

 private:
  void applyKindStyle();

  Kind m_kind = Kind::Information;
  QLabel* m_iconLabel;
  QLabel* m_titleLabel;
  QLabel* m_detailLabel;
  QToolButton* m_closeButton;
};

}  // namespace iwb::ui
