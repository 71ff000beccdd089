// ModelFoldersMenu: a bounded search of the known model folders (engine/model_locations.h).
#include "main_window/model_folders_menu.h"

#include "iwb/engine/model/model_info.h"
#include "iwb/engine/model/model_locations.h"

#include <QDir>
#include <QFileInfo>

namespace iwb::ui {

ModelFoldersMenu::ModelFoldersMenu(QWidget* parent) : QMenu(tr("Models on This &Computer"), parent) {
  setObjectName(QStringLiteral("modelFoldersMenu"));
  connect(this, &QMenu::aboutToShow, this, &ModelFoldersMenu::rebuild);
  rebuild();
}

QList<QUrl> ModelFoldersMenu::existingFolderUrls() {
  QList<QUrl> urls;
  for (const ModelFolder& f : known_model_folders()) {
    if (f.exists) urls.append(QUrl::fromLocalFile(QString::fromStdString(f.path)));
  }
  return urls;
}

void ModelFoldersMenu::rebuild() {
  clear();
  const std::vector<ModelFolder> folders = known_model_folders();
  const std::vector<FoundModel> models = find_gguf_models(folders);
  QString currentLabel;
  for (const FoundModel& m : models) {
    const QString label = QString::fromStdString(m.folder_label);
    if (label != currentLabel) {
      addSection(label);
      currentLabel = label;
    }
    const QString path = QString::fromStdString(m.path);
    QAction* action = addAction(QStringLiteral("%1  (%2)").arg(QFileInfo(path).fileName(),
                                                                QString::fromStdString(format_bytes(m.size_bytes))));
    action->setToolTip(path);
    action->setStatusTip(path);
    connect(action, &QAction::triggered, this, [this, path] { emit fileTriggered(path); });
  }
  if (models.empty()) {
    QAction* none = addAction(tr("No .gguf files found in:"));
    none->setEnabled(false);
    for (const ModelFolder& f : folders) {
      QAction* a = addAction(QStringLiteral("  %1 — %2").arg(QString::fromStdString(f.label),
                                                             QDir::toNativeSeparators(QString::fromStdString(f.path))));
      a->setEnabled(false);
    }
  }
}

}  // namespace iwb::ui
