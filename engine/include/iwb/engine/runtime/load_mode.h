// EngineOptions::load_mode ("auto", "mmap", "mlock", "none": llama.cpp's --load-mode names)
// resolved for one load: map the GGUF file (and lock it in memory) or read it into memory of
// the process's own.
#pragma once

#include "iwb/engine/gguf/gguf_file.h"
#include "iwb/engine/status.h"

#include <cstdint>
#include <string>

namespace iwb {

struct LoadModeChoice {
  gguf::LoadMode mode = gguf::LoadMode::Map;
  // "mlock": the mapping is locked in memory (GgufFile::lock_in_memory), so the kernel never
  // pages the weights out under memory pressure; a refusal is reported, not fatal, as llama.cpp.
  bool lock_in_memory = false;
  std::string reason;  // "read into memory: 2 MiB pages read faster than a mapping" ...
};

// `thp_setting`: /sys/kernel/mm/transparent_hugepage/enabled ("always [madvise] never"; empty
// where there is no such file). `available_bytes`: the memory available now (MemAvailable).
// "none" is refused when the file does not fit in the available memory (a mapping would
// still run it); an unknown mode is refused with the ones there are.
Result<LoadModeChoice> choose_load_mode(const std::string& requested, bool is_gpu, uint64_t file_bytes,
                                        uint64_t available_bytes, const std::string& thp_setting);

// This machine's transparent huge page setting (the sysfs file's text), empty without one.
std::string transparent_huge_page_setting();

}  // namespace iwb
