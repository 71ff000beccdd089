// The application's main window: File/Help menus with recent models, the welcome page or the
// opened model's overview, a non-modal message bar for errors, and status-bar facts about the
// model. Files are parsed on a loader thread; results arrive as values through queued signals.
#pragma once

#include "model_info/model_details.h"

#include <QMainWindow>
#include <QString>

class QLabel;
class QMimeData;
class QProgressBar;
class QStackedWidget;
class QThread;

namespace iwb::ui {

class MessageBar;
class ModelOverviewWidget;
class RecentFiles;
class WelcomePage;

class MainWindow : public QMainWindow {
  Q_OBJECT

 public:
  explicit MainWindow(QWidget* parent = nullptr);
  ~MainWindow() override;

  // Absolute path of the model shown now; empty before the first successful open.
  QString currentModelPath() const { return m_currentPath; }
  bool isLoading() const { return m_numPendingLoads > 0; }

  ModelOverviewWidget* overview() const { return m_overview; }
  WelcomePage* welcomePage() const { return m_welcomePage; }
  MessageBar* messageBar() const { return m_messageBar; }
  RecentFiles* recentFiles() const { return m_recentFiles; }

  // The local .gguf file among dragged/dropped data, or empty (exposed for tests).
  static QString ggufPathFromMimeData(const QMimeData* mimeData);

 public slots:
  // Starts opening `path` in the background; modelOpened or modelOpenFailed follows.
  void openModel(const QString& path);
  void showOpenDialog();
  void showAbout();

 signals:
  void modelOpened(const QString& path);
  void modelOpenFailed(const QString& path, const QString& message);
  // Internal: carries a request to the loader thread.
  void loadRequested(const QString& path);

 protected:
  void dragEnterEvent(QDragEnterEvent* event) override;
  void dropEvent(QDropEvent* event) override;
  void closeEvent(QCloseEvent* event) override;

 private:
  void createMenus();
  void createStatusBar();
  void startLoaderThread();
  void handleModelLoaded(const iwb::ui::ModelDetails& details);
  void handleModelLoadFailed(const QString& path, const QString& message);
  void finishLoad();
  void updateStatusLabels(const iwb::ModelSummary& summary);

  QString m_currentPath;
  int m_numPendingLoads = 0;
  QThread* m_loaderThread = nullptr;
  RecentFiles* m_recentFiles;

  MessageBar* m_messageBar;
  QStackedWidget* m_pages;
  WelcomePage* m_welcomePage;
  ModelOverviewWidget* m_overview;

  QProgressBar* m_busyIndicator;
  QLabel* m_architectureLabel;
  QLabel* m_parametersLabel;
  QLabel* m_fileTypeLabel;
  QLabel* m_fileSizeLabel;
};

}  // namespace iwb::ui
