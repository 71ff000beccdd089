// The rule of EngineOptions::load_mode (runtime/load_mode.h).
#include "iwb/engine/runtime/load_mode.h"

#include <fstream>
#include <sstream>

namespace iwb {
namespace {

std::string mib(uint64_t bytes) { return std::to_string(bytes >> 20) + " MiB"; }

// The kernel hands out huge pages for madvise()d memory under "always" and "madvise".
bool offers_huge_pages(const std::string& thp_setting) {
  return thp_setting.find("[always]") != std::string::npos || thp_setting.find("[madvise]") != std::string::npos;
}

}  // namespace

Result<LoadModeChoice> choose_load_mode(const std::string& requested, bool is_gpu, uint64_t file_bytes,
                                        uint64_t available_bytes, const std::string& thp_setting) {
  LoadModeChoice c;
  if (requested == "mmap") {
    c.reason = "mapped from the file (load mode mmap)";
    return c;
  }
  if (requested == "mlock") {
    c.lock_in_memory = true;
    c.reason = "mapped from the file (load mode mlock)";
    return c;
  }
  if (requested == "none") {
    if (available_bytes > 0 && file_bytes > available_bytes) {
      return make_error(ErrorCode::OutOfMemory, "reading the model into memory needs " + mib(file_bytes) + ", and " +
                                                    mib(available_bytes) +
                                                    " are available; load mode mmap maps the file instead");
    }
    c.mode = gguf::LoadMode::Read;
    c.reason = "read into memory (load mode none)";
    return c;
  }
  if (requested != "auto") {
    return make_error(
        ErrorCode::InvalidArgument,
        "unknown load mode '" + requested + "': auto, mmap, mlock or none (llama.cpp's dio is not supported)");
  }
  if (is_gpu) {
    c.reason = "mapped from the file (the GPU gets its own copy)";
  } else if (!offers_huge_pages(thp_setting)) {
    c.reason = "mapped from the file (the kernel offers no transparent huge pages)";
  } else if (available_bytes == 0 || file_bytes > available_bytes / 2) {
    c.reason = "mapped from the file (it is over half the available memory)";
  } else {
    c.mode = gguf::LoadMode::Read;
    c.reason = "read into memory for 2 MiB pages (decode reads them faster than a mapping)";
  }
  return c;
}

std::string transparent_huge_page_setting() {
  std::ifstream in("/sys/kernel/mm/transparent_hugepage/enabled");
  if (!in) return {};
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace iwb
