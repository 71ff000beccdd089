// Engine::load: the device EngineOptions::device asks for (device_selection.h), then the paged
// engine with that device's forward backend; and the names of finish reasons.
#include "iwb/engine/runtime/engine.h"

#include "iwb/engine/backend/device_selection.h"
#include "runtime/paged_engine.h"

namespace iwb {

Result<std::unique_ptr<Engine>> Engine::load(const std::string& gguf_path, const EngineOptions& options,
                                             const LoadProgress& progress) {
  Result<DeviceChoice> choice = choose_device(options.device);
  if (!choice) return choice.status();
  if (progress && !choice->cpu_reason.empty()) progress(0.0, "running on the CPU: " + choice->cpu_reason);
  return PagedEngine::load(gguf_path, options, *choice, progress);
}

const char* finish_reason_name(FinishReason reason) {
  switch (reason) {
    case FinishReason::EndOfGeneration: return "end of generation";
    case FinishReason::StopString: return "stop string";
    case FinishReason::MaxTokens: return "max tokens";
    case FinishReason::ContextFull: return "context full";
    case FinishReason::Aborted: return "aborted";
    case FinishReason::Error: return "error";
  }
  return "unknown";
}

}  // namespace iwb
