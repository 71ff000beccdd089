// File → "Models on This Computer": the .gguf files in the folders people keep models in (this
// program's cache, the Hugging Face cache, LM Studio, llama.cpp's cache), found when the menu
// opens, grouped by folder.
#pragma once

#include <QList>
#include <QMenu>
#include <QUrl>

namespace iwb::ui {

class ModelFoldersMenu : public QMenu {
  Q_OBJECT

 public:
  explicit ModelFoldersMenu(QWidget* parent = nullptr);

  // Re-scans the folders and rebuilds the entries (also called when the menu is about to show).
  void rebuild();
  // The known model folders that exist, for the Open dialog's sidebar.
  static QList<QUrl> existingFolderUrls();

 signals:
  void fileTriggered(const QString& path);
};

}  // namespace iwb::ui
