// RecentFiles (QSettings-backed list) and RecentFilesMenu (its submenu).
#include "main_window/recent_files.h"

#include <QDir>
#include <QFileInfo>
#include <QSettings>

namespace iwb::ui {

RecentFiles::RecentFiles(QObject* parent) : QObject(parent) {
  QStringList saved = QSettings().value(QLatin1String(kSettingsKey)).toStringList();
  saved.removeAll(QString());
  saved.removeDuplicates();
  m_files = saved.mid(0, kMaxFiles);
}

void RecentFiles::add(const QString& path) {
  const QString absolute = QFileInfo(path).absoluteFilePath();
  QStringList files = m_files;
  files.removeAll(absolute);
  files.prepend(absolute);
  setFiles(files.mid(0, kMaxFiles));
}

void RecentFiles::remove(const QString& path) {
  QStringList files = m_files;
  if (files.removeAll(QFileInfo(path).absoluteFilePath()) > 0) setFiles(files);
}

void RecentFiles::clear() { setFiles({}); }

void RecentFiles::setFiles(QStringList files) {
  if (files == m_files) return;
  m_files = std::move(files);
  QSettings().setValue(QLatin1String(kSettingsKey), m_files);
  emit changed(m_files);
}

RecentFilesMenu::RecentFilesMenu(RecentFiles* recentFiles, QWidget* parent)
    : QMenu(tr("Open &Recent"), parent), m_recentFiles(recentFiles) {
  connect(recentFiles, &RecentFiles::changed, this, &RecentFilesMenu::rebuild);
  rebuild(recentFiles->files());
}

void RecentFilesMenu::rebuild(const QStringList& files) {
  clear();
  for (qsizetype i = 0; i < files.size(); ++i) {
    const QString path = files[i];
    // "&1 name.gguf": numbers give keyboard access; the full path is in the tooltip.
    QString text = QFileInfo(path).fileName();
    text.replace(QLatin1Char('&'), QLatin1String("&&"));
    if (i < 9) text = QStringLiteral("&%1 %2").arg(i + 1).arg(text);
    QAction* action = addAction(text);
    action->setToolTip(QDir::toNativeSeparators(path));
    action->setStatusTip(QDir::toNativeSeparators(path));
    connect(action, &QAction::triggered, this, [this, path] { emit fileTriggered(path); });
  }
  if (files.isEmpty()) {
    addAction(tr("No recent models"))->setEnabled(false);
  } else {
    addSeparator();
    addAction(tr("&Clear Menu"), m_recentFiles, &RecentFiles::clear);
  }
  setToolTipsVisible(true);
}

}  // namespace iwb::ui
