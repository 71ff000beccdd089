// `iwb models`: the GGUF files in this program's cache, the Hugging Face cache, LM Studio's and
// llama.cpp's folders, and where the default model is or would be.
#include "commands.h"
#include "options/option_table.h"

#include "iwb/engine/model/model_info.h"
#include "iwb/engine/model/model_locations.h"

#include <cstdio>
#include <filesystem>
#include <string>

namespace iwb::cli {

int run_models(int argc, char** argv) {
  const OptionTable t("models", "", "Lists the .gguf files in the known model folders.");
  if (const int status = parse_command_line(t, argc, argv); status >= 0) return status;
  const auto folders = known_model_folders();
  std::printf("folders\n");
  for (const ModelFolder& f : folders) {
    std::printf("  %-28s %s%s\n", f.label.c_str(), f.path.c_str(), f.exists ? "" : "  (absent)");
  }
  const auto models = find_gguf_models(folders);
  std::printf("\nmodels (%zu)\n", models.size());
  for (const FoundModel& m : models) {
    std::printf("  %10s  %s\n", format_bytes(m.size_bytes).c_str(), m.path.c_str());
  }
  std::error_code ec;
  const std::string def = default_model_path();
  std::printf("\ndefault model  %s\n  %s (%s)\n", default_model_description().c_str(), def.c_str(),
              std::filesystem::exists(def, ec) ? "present" : "absent: run scripts/fetch-model.sh");
  return 0;
}

}  // namespace iwb::cli
