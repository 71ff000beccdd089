// Test helper: the shared aidreams llama2.c model converted to GGUF in a test's folder, or an
// empty path when ../shared/models is absent (the caller skips then).
#pragma once

#include "iwb/engine/convert/llama2c.h"

#include <QFile>
#include <QString>
#include <QtTest>
#include "test_paths.h"

namespace iwb::test {

inline QString aidreams_llama2c_dir() { return QString::fromStdString(iwb::test::shared_models_dir()) + "/llama2c/"; }

// Writes `dir`/aidreams.gguf and returns its path; empty when the shared model is missing.
// A failed conversion fails the calling test.
inline QString convert_aidreams_gguf(const QString& dir) {
  const QString source = aidreams_llama2c_dir() + "aidreams260K.bin";
  if (!QFile::exists(source)) return {};
  const QString path = dir + "/aidreams.gguf";
  convert::Llama2cConvertOptions options;
  options.name = "aidreams260K";
  auto converted = convert::convert_llama2c_to_gguf(source.toStdString(),
                                                    (aidreams_llama2c_dir() + "aidreams260K-tok512.bin").toStdString(),
                                                    path.toStdString(), options);
  if (!converted) {
    QTest::qFail(converted.error_message().c_str(), __FILE__, __LINE__);
    return {};
  }
  return path;
}

}  // namespace iwb::test
