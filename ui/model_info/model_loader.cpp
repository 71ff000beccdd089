// The model-file worker: readModelDetails() behind a slot, results as signals.
#include "model_info/model_loader.h"

#include <QFileInfo>

namespace iwb::ui {

ModelLoader::ModelLoader(QObject* parent) : QObject(parent) {
  // Queued connections copy the argument through the meta-type system.
  qRegisterMetaType<iwb::ui::ModelDetails>();
}

void ModelLoader::load(const QString& path) {
  // Checked here rather than left to the parser so the message reads like a person's words.
  const QFileInfo info(path);
  if (!info.exists()) {
    emit loadFailed(path, tr("The file %1 does not exist.").arg(info.fileName()));
    return;
  }
  if (info.isDir()) {
    emit loadFailed(path, tr("%1 is a folder, not a GGUF file.").arg(info.fileName()));
    return;
  }
  auto details = readModelDetails(path);
  if (!details) {
    emit loadFailed(path, QString::fromStdString(details.error_message()));
    return;
  }
  emit loaded(*details);
}

}  // namespace iwb::ui
