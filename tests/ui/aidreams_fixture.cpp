// The aidreams 260K test model converted to GGUF for UI tests.
#include "aidreams_fixture.h"

#include "iwb/engine/convert/llama2c.h"
#include "worker/engine_controller.h"

#include <QDir>
#include <QFileInfo>
#include <QSignalSpy>
#include <QTest>
#include "test_paths.h"

namespace iwb::test {

namespace {

QString sharedModel(const char* name) {
  return QString::fromStdString(iwb::test::shared_models_dir() + "/llama2c/" + name);
}

}  // namespace

bool hasAidreamsModel() {
  return QFileInfo::exists(sharedModel("aidreams260K.bin")) &&
         QFileInfo::exists(sharedModel("aidreams260K-tok512.bin"));
}

QString convertAidreamsModel(const QString& dir, QString* why) {
  if (!hasAidreamsModel()) {
    *why = QStringLiteral("the shared aidreams260K model is not available (expected in %1/llama2c)")
               .arg(QString::fromStdString(iwb::test::shared_models_dir()));
    return {};
  }
  const QString path = QDir(dir).filePath(QStringLiteral("aidreams260K.gguf"));
  convert::Llama2cConvertOptions options;
  options.name = "aidreams260K";
  auto converted = convert::convert_llama2c_to_gguf(sharedModel("aidreams260K.bin").toStdString(),
                                                    sharedModel("aidreams260K-tok512.bin").toStdString(),
                                                    path.toStdString(), options);
  if (!converted) {
    *why = QString::fromStdString(converted.error_message());
    return {};
  }
  return path;
}

bool loadModelAndWait(ui::EngineController& engine, const QString& path, int timeoutMs) {
  QSignalSpy loaded(&engine, &ui::EngineController::modelLoaded);
  QSignalSpy failed(&engine, &ui::EngineController::modelLoadFailed);
  engine.loadModel(path);
  return QTest::qWaitFor([&] { return loaded.count() + failed.count() > 0; }, timeoutMs) && loaded.count() == 1;
}

}  // namespace iwb::test
