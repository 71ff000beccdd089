// Model folders and the bounded .gguf search (std::filesystem with error codes, so a folder
// that vanishes or cannot be read is skipped instead of throwing).
#include "iwb/engine/model/model_locations.h"

#include <cstdlib>
#include <filesystem>
#include <set>

namespace fs = std::filesystem;

namespace iwb {
namespace {

std::string env_or_empty(const char* name) {
  const char* v = std::getenv(name);
  return v && *v ? v : "";
}

fs::path home() { return env_or_empty("HOME"); }

fs::path cache_home() {
  const std::string xdg = env_or_empty("XDG_CACHE_HOME");
  return xdg.empty() ? home() / ".cache" : fs::path(xdg);
}

bool is_gguf(const fs::path& p) {
  std::string ext = p.extension().string();
  for (char& c : ext) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return ext == ".gguf";
}

}  // namespace

std::string default_model_path() {
  return (cache_home() / "inference-workbench" / "models" / "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf").string();
}

std::string default_model_description() {
  return "Qwen2.5-Coder-1.5B-Instruct, Q4_K_M (Apache-2.0), fetched by scripts/fetch-model.sh";
}

std::vector<ModelFolder> known_model_folders() {
  std::vector<ModelFolder> folders;
  auto add = [&](std::string label, const fs::path& path) {
    std::error_code ec;
    folders.push_back({std::move(label), path.string(), fs::is_directory(path, ec)});
  };
  add("Inference Workbench models", cache_home() / "inference-workbench" / "models");
  fs::path hf = env_or_empty("HF_HUB_CACHE");
  if (hf.empty()) {
    const std::string hf_home = env_or_empty("HF_HOME");
    hf = hf_home.empty() ? cache_home() / "huggingface" / "hub" : fs::path(hf_home) / "hub";
  }
  add("Hugging Face cache", hf);
  add("LM Studio", home() / ".lmstudio" / "models");
  add("LM Studio (older versions)", cache_home() / "lm-studio" / "models");
  const std::string llama_cache = env_or_empty("LLAMA_CACHE");
  add("llama.cpp cache", llama_cache.empty() ? cache_home() / "llama.cpp" : fs::path(llama_cache));
  return folders;
}

std::vector<FoundModel> find_gguf_models(const std::vector<ModelFolder>& folders, int max_depth, size_t max_results) {
  std::vector<FoundModel> found;
  std::set<std::string> seen;  // canonical targets: a file reached through two links counts once
  for (const ModelFolder& folder : folders) {
    std::error_code ec;
    if (!fs::is_directory(folder.path, ec)) continue;
    fs::recursive_directory_iterator it(folder.path, fs::directory_options::skip_permission_denied, ec);
    for (; !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
      if (found.size() >= max_results) return found;
      if (it.depth() >= max_depth) it.disable_recursion_pending();
      // Hugging Face's blobs/ hold the same files without names; the snapshots name them.
      if (it->path().filename() == "blobs") {
        it.disable_recursion_pending();
        continue;
      }
      std::error_code file_ec;
      if (!is_gguf(it->path()) || !it->is_regular_file(file_ec)) continue;  // follows links
      const std::string canonical = fs::weakly_canonical(it->path(), file_ec).string();
      if (!seen.insert(canonical).second) continue;
      found.push_back({it->path().string(), folder.label, fs::file_size(it->path(), file_ec)});
    }
  }
  return found;
}

}  // namespace iwb
