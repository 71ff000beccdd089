// The central area before any model is open: what the program does, an Open Model button,
// the drop hint, and the recently opened models as links.
#pragma once

#include <QStringList>
#include <QWidget>

class QLabel;
class QPushButton;

namespace iwb::ui {

class WelcomePage : public QWidget {
  Q_OBJECT

 public:
  explicit WelcomePage(QWidget* parent = nullptr);

  void setRecentFiles(const QStringList& paths);
  QPushButton* openButton() const { return m_openButton; }

 signals:
  void openRequested();
  void recentFileActivated(const QString& path);

 private:
  QPushButton* m_openButton;
  QLabel* m_recentTitle;
  QLabel* m_recentLinks;
  QStringList m_recentFiles;
};

}  // namespace iwb::ui
