// The shared tiny real model for UI tests: the aidreams 260K llama2.c checkpoint from
// ../shared/models, converted to GGUF once per test into a folder of the test's, and loading
// a model through the engine controller.
#pragma once

#include <QString>

namespace iwb::ui {
class EngineController;
}

namespace iwb::test {

// Converts the model into `dir` and returns the GGUF's path. Empty with `*why` set when the
// shared files are absent (the test then skips) or the conversion fails.
QString convertAidreamsModel(const QString& dir, QString* why);
// True when the shared checkpoint and tokenizer are present.
bool hasAidreamsModel();
// Loads `path` through the controller and waits for the outcome: true when it loaded.
bool loadModelAndWait(ui::EngineController& engine, const QString& path, int timeoutMs);

}  // namespace iwb::test
