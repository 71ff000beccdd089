// Where people keep GGUF models (this program's cache, the Hugging Face cache, LM Studio, the
// llama.cpp cache) and a bounded search of those folders, for the Open dialog and `iwb models`.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace iwb {

struct ModelFolder {
  std::string label;  // "Hugging Face cache"
  std::string path;
  bool exists = false;
};

struct FoundModel {
  std::string path;    // as found (Hugging Face snapshots are links into blobs/)
  std::string folder_label;
  uint64_t size_bytes = 0;
};

// The known folders, in a stable order, honouring HF_HUB_CACHE / HF_HOME / LLAMA_CACHE / XDG_CACHE_HOME.
std::vector<ModelFolder> known_model_folders();

// .gguf files under the existing folders, at most `max_depth` levels down and `max_results`
// files; unreadable folders are skipped, never an error.
std::vector<FoundModel> find_gguf_models(const std::vector<ModelFolder>& folders, int max_depth = 8,
                                         size_t max_results = 500);

// The default chat model that scripts/fetch-model.sh places in this program's cache.
std::string default_model_path();
std::string default_model_description();

}  // namespace iwb
