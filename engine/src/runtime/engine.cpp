// Engine::load (the CPU engine for now; a CUDA backend will be chosen here later) and the
// names of finish reasons.
#include "iwb/engine/runtime/engine.h"

#include "runtime/cpu_engine.h"

namespace iwb {

Result<std::unique_ptr<Engine>> Engine::load(const std::string& gguf_path, const EngineOptions& options,
                                             const LoadProgress& progress) {
  return CpuEngine::load(gguf_path, options, progress);
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
