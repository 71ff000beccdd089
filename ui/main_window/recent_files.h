// The recently opened models, most recent first, persisted in QSettings, and the File menu's
// "Open Recent" submenu that mirrors them.
#pragma once

#include <QMenu>
#include <QObject>
#include <QStringList>

namespace iwb::ui {

class RecentFiles : public QObject {
  Q_OBJECT

 public:
  static constexpr int kMaxFiles = 8;
  static constexpr const char* kSettingsKey = "recentFiles";

  // Reads the list saved by earlier runs.
  explicit RecentFiles(QObject* parent = nullptr);

  QStringList files() const { return m_files; }
  // Moves (or inserts) `path` to the front; the oldest entries beyond kMaxFiles drop off.
  void add(const QString& path);
  void remove(const QString& path);
  void clear();

 signals:
  void changed(const QStringList& files);

 private:
  void setFiles(QStringList files);

  QStringList m_files;
};

class RecentFilesMenu : public QMenu {
  Q_OBJECT

 public:
  RecentFilesMenu(RecentFiles* recentFiles, QWidget* parent = nullptr);

 signals:
  void fileTriggered(const QString& path);

 private:
  void rebuild(const QStringList& files);

  RecentFiles* m_recentFiles;
};

}  // namespace iwb::ui
