// A test class's model: `iwb synth`'s preset written once into a temporary folder, and engines
// loaded from it with each test's options (test_qwen35_engine, test_state_checkpoints).
#pragma once

#include "forward_checks.h"

#include "iwb/engine/runtime/engine.h"

#include <QTemporaryDir>
#include <QtGlobal>

#include <memory>
#include <string>

namespace iwb::test {

class SynthesizedEngine {
 public:
  // Writes the preset in `type` (seed 0). Empty on success, else what failed.
  std::string synthesize(const std::string& preset, const std::string& type) {
    if (!m_tmp.isValid()) return "no temporary folder";
    m_path = m_tmp.filePath(QString::fromStdString(preset + ".gguf")).toStdString();
    return synthesize_preset(preset, type, 0, m_path);
  }
  // The model under `options`, or null (the reason printed).
  std::unique_ptr<Engine> load(const EngineOptions& options) const {
    auto engine = Engine::load(m_path, options);
    if (!engine) qWarning("%s", engine.error_message().c_str());
    return engine ? std::move(*engine) : nullptr;
  }
  const std::string& path() const { return m_path; }
  // A path for another file of the test's, in the same temporary folder.
  std::string file_path(const std::string& name) const {
    return m_tmp.filePath(QString::fromStdString(name)).toStdString();
  }

 private:
  QTemporaryDir m_tmp;
  std::string m_path;
};

}  // namespace iwb::test
