// Fuzz target: the importance-matrix reader (llama.cpp's legacy .dat layout), which takes a
// path: each input is written to one scratch file in memory-backed /dev/shm (or the temp
// folder) and read back.
#include "iwb/engine/quant/imatrix.h"

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>

namespace {

std::string scratch_path() {
  std::error_code error;
  const std::filesystem::path dir = std::filesystem::is_directory("/dev/shm", error)
                                        ? std::filesystem::path("/dev/shm")
                                        : std::filesystem::temp_directory_path();
  return (dir / ("iwb-fuzz-imatrix-" + std::to_string(getpid()) + ".dat")).string();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string path = scratch_path();
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) return 0;
  const bool is_written = std::fwrite(data, 1, size, f) == size;
  std::fclose(f);
  if (is_written) {
    auto imatrix = iwb::quant::read_imatrix_file(path);
    if (imatrix) {
      for (const auto& [name, entry] : imatrix->entries) (void)imatrix->importance(name);
    }
  }
  std::remove(path.c_str());
  return 0;
}
